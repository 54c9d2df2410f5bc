// HTTP(S) downloads for `orion data fetch`, through libcurl (Debian's libcurl4-openssl-dev; real
// data sets are served over HTTPS, which a hand-written socket client could not reach).
//
// Resumable: bytes go to DEST.part; a later call (or a retry after a dropped connection) asks the
// server for the rest with a Range request and appends; a server that ignores Range (answers 200)
// makes the download start over cleanly. Only when the transfer completes is DEST.part fsynced and
// renamed to DEST, so DEST never holds a partial file. Only http:// and https:// URLs are accepted.
#pragma once
#include <cstdint>
#include <string>

namespace orion::data {

struct DownloadOptions {
  int retries = 3;  // further attempts after a failed one, each resuming
  double retry_delay_s = 1.0;
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;  // give up on an attempt that receives nothing for this long
  bool progress = true;       // progress bar on stderr
};

struct DownloadResult {
  uint64_t bytes = 0;         // size of DEST
  uint64_t resumed_from = 0;  // bytes already in DEST.part when the first attempt began
  int attempts = 0;
  bool already_present = false;  // DEST existed: nothing was downloaded
};

// Downloads url to dest. Failures (after the retries) are Runtime errors naming the URL and the
// HTTP status or curl error, with a hint that running again resumes.
DownloadResult download_file(const std::string& url, const std::string& dest, const DownloadOptions& opt = {});

}  // namespace orion::data
