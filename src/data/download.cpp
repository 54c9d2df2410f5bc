#include "data/download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/timer.h"
#include "data/progress.h"

namespace orion::data {
namespace fs = std::filesystem;

namespace {

// State shared with libcurl's callbacks during one attempt.
struct Transfer {
  CURL* curl = nullptr;
  int fd = -1;
  uint64_t offset = 0;   // bytes in the .part file before this attempt
  uint64_t written = 0;  // bytes appended by this attempt
  bool checked_status = false;
  bool write_failed = false;
  bool progress = true;
  bool tty = false;
  Timer timer;
  double last_print = -1e9;
};

// Called with each piece of the body. On the first piece, a 200 answer to a Range request means
// the server sends the whole file again: the partial file is emptied first.
size_t on_data(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->checked_status) {
    t->checked_status = true;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (t->offset > 0 && code == 200) {
      if (ftruncate(t->fd, 0) != 0 || lseek(t->fd, 0, SEEK_SET) != 0) return 0;
      t->offset = 0;
    }
  }
  const size_t bytes = size * n;
  for (size_t done = 0; done < bytes;) {
    const ssize_t w = ::write(t->fd, data + done, bytes - done);
    if (w <= 0) {
      t->write_failed = true;
      return 0;  // makes curl stop with CURLE_WRITE_ERROR
    }
    done += size_t(w);
  }
  t->written += bytes;
  return bytes;
}

void print_bar(Transfer& t, uint64_t now, uint64_t total, bool final) {
  const double secs = std::max(t.timer.seconds(), 1e-6);
  const double rate = double(t.written) / secs;
  std::string line;
  if (total > 0) {
    const double frac = std::min(1.0, double(now) / double(total));
    const int filled = int(frac * 30);
    line = fmt::format("fetch [{}{}] {:3.0f}% {:.1f}/{:.1f} MB {:.2f} MB/s", std::string(filled, '#'),
                       std::string(30 - filled, '-'), frac * 100, now / 1e6, total / 1e6, rate / 1e6);
    if (!final && rate > 0) line += " ETA " + format_duration(double(total - std::min(now, total)) / rate);
  } else {
    line = fmt::format("fetch {:.1f} MB {:.2f} MB/s", now / 1e6, rate / 1e6);
  }
  std::fprintf(stderr, t.tty ? "\r%s\033[K%s" : "%s%s", line.c_str(), final || !t.tty ? "\n" : "");
  std::fflush(stderr);
}

int on_progress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->progress) return 0;
  const double now = t->timer.seconds();
  if (now - t->last_print < (t->tty ? 0.2 : 5.0)) return 0;
  t->last_print = now;
  print_bar(*t, t->offset + uint64_t(dlnow), dltotal > 0 ? t->offset + uint64_t(dltotal) : 0, false);
  return 0;
}

uint64_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : uint64_t(n);
}

// One attempt: returns "" on success, else what went wrong; *http_code is the server's status.
std::string attempt(const std::string& url, const std::string& part, const DownloadOptions& opt, long* http_code) {
  Transfer t;
  t.offset = file_size_or_zero(part);
  t.progress = opt.progress;
  t.tty = isatty(2);
  t.fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (t.fd < 0) throw_runtime_error("cannot open the partial download for writing", part);
  t.curl = curl_easy_init();
  ORION_CHECK(t.curl != nullptr, "curl_easy_init failed");
  char err[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(t.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(t.curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(t.curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(t.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(t.curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(t.curl, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(t.curl, CURLOPT_USERAGENT, "orion/0.1");
  curl_easy_setopt(t.curl, CURLOPT_CONNECTTIMEOUT, opt.connect_timeout_s);
  curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_TIME, opt.stall_timeout_s);
  curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(t.curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(t.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(t.curl, CURLOPT_XFERINFODATA, &t);
  if (t.offset > 0) curl_easy_setopt(t.curl, CURLOPT_RESUME_FROM_LARGE, curl_off_t(t.offset));
  const CURLcode rc = curl_easy_perform(t.curl);
  long code = 0;
  *http_code = 0;
  curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(t.curl);
  const bool synced = ::fsync(t.fd) == 0;
  ::close(t.fd);
  if (t.write_failed) throw_runtime_error("writing the download failed (disk full?)", part);
  // A resume the server cannot serve: 416 (curl reports it as success, taking the file for
  // complete — we cannot know that) or curl's "server does not support byte ranges".
  if (t.offset > 0 && (code == 416 || rc == CURLE_RANGE_ERROR)) {
    *http_code = 416;
    return "the server cannot continue the partial download; starting over";
  }
  if (rc == CURLE_OK && !synced) throw_runtime_error("fsync of the download failed", part);
  if (rc == CURLE_OK) {
    if (opt.progress) print_bar(t, t.offset + t.written, t.offset + t.written, true);
    return "";
  }
  *http_code = code;
  return code >= 400 ? fmt::format("HTTP {} ({})", code, err[0] ? err : curl_easy_strerror(rc))
                     : fmt::format("{}", err[0] ? err : curl_easy_strerror(rc));
}

}  // namespace

DownloadResult download_file(const std::string& url, const std::string& dest, const DownloadOptions& opt) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    throw_usage_error(fmt::format("'{}' is not an http:// or https:// URL", url), "--url");
  DownloadResult r;
  if (fs::exists(dest)) {
    r.bytes = file_size_or_zero(dest);
    r.already_present = true;
    return r;
  }
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) throw_runtime_error(fmt::format("libcurl failed to start: {}", curl_easy_strerror(global)));
  const std::string part = dest + ".part";
  r.resumed_from = file_size_or_zero(part);
  std::string failure;
  for (r.attempts = 1; r.attempts <= opt.retries + 1; ++r.attempts) {
    long code = 0;
    failure = attempt(url, part, opt, &code);
    if (failure.empty()) break;
    if (opt.progress) std::fprintf(stderr, "fetch: attempt %d failed: %s\n", r.attempts, failure.c_str());
    // 416: the range starts at or past the end, so the partial file cannot be trusted: start over.
    // Other 4xx answers (404, 403) will not change by asking again.
    if (code == 416) fs::remove(part);
    else if (code >= 400 && code < 500 && code != 408 && code != 429) break;
    if (r.attempts <= opt.retries) std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(opt.retry_delay_s * 1000)));
  }
  if (!failure.empty())
    throw_runtime_error(fmt::format("download of {} failed: {}", url, failure), dest,
                        fmt::format("{} bytes are kept in {}; run the same command again to resume", file_size_or_zero(part),
                                    part));
  r.attempts = std::min(r.attempts, opt.retries + 1);
  std::error_code ec;
  fs::rename(part, dest, ec);
  if (ec) throw_runtime_error(fmt::format("cannot rename the finished download: {}", ec.message()), part);
  r.bytes = file_size_or_zero(dest);
  return r;
}

}  // namespace orion::data
