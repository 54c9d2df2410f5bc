// download_file against a server on 127.0.0.1 started by the test: whole downloads, a dropped
// connection resumed with a Range request, a partial file resumed, a server that ignores Range,
// HTTP errors, and refused URL schemes. Every case is bounded by the server's lifetime and curl's
// timeouts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/file.h"
#include "data/download.h"
#include "loopback_http.h"
#include "support.h"

namespace orion::data {
namespace {
namespace fs = std::filesystem;
using test::LoopbackHttpServer;

std::string body_of(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char('a' + (i * 7 + i / 26) % 26);
  return s;
}

DownloadOptions quick() {
  DownloadOptions o;
  o.retries = 2;
  o.retry_delay_s = 0;
  o.connect_timeout_s = 5;
  o.stall_timeout_s = 5;
  o.progress = false;
  return o;
}

TEST(DataFetch, DownloadsWholeFileAndRenamesAtTheEnd) {
  const std::string body = body_of(100000);
  LoopbackHttpServer server(body, {});
  const std::string dest = test::temp_dir() + "/file.bin";
  DownloadResult r = download_file(server.url("/file.bin"), dest, quick());
  EXPECT_EQ(r.bytes, body.size());
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(read_text_file(dest), body);
  EXPECT_FALSE(fs::exists(dest + ".part"));
  // Present already: nothing is fetched.
  DownloadResult again = download_file(server.url("/file.bin"), dest, quick());
  EXPECT_TRUE(again.already_present);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(DataFetch, DroppedConnectionResumesWithRange) {
  const std::string body = body_of(50000);
  LoopbackHttpServer server(body, {.cut_first_response_after = 12345});
  const std::string dest = test::temp_dir() + "/d.bin";
  DownloadResult r = download_file(server.url("/d.bin"), dest, quick());
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(read_text_file(dest), body);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].find("Range:"), std::string::npos);
  EXPECT_NE(reqs[1].find("Range: bytes=12345-"), std::string::npos) << reqs[1];
}

TEST(DataFetch, ExistingPartialFileIsContinued) {
  const std::string body = body_of(30000);
  LoopbackHttpServer server(body, {});
  const std::string dest = test::temp_dir() + "/p.bin";
  std::ofstream(dest + ".part", std::ios::binary) << body.substr(0, 20000);
  DownloadResult r = download_file(server.url("/p.bin"), dest, quick());
  EXPECT_EQ(r.resumed_from, 20000u);
  EXPECT_EQ(read_text_file(dest), body);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_NE(server.requests()[0].find("Range: bytes=20000-"), std::string::npos);
}

TEST(DataFetch, ServerIgnoringRangeRestartsCleanly) {
  const std::string body = body_of(20000);
  LoopbackHttpServer server(body, {.honour_range = false});
  const std::string dest = test::temp_dir() + "/r.bin";
  std::ofstream(dest + ".part", std::ios::binary) << std::string(777, 'X');  // stale bytes
  download_file(server.url("/r.bin"), dest, quick());
  EXPECT_EQ(read_text_file(dest), body);
}

TEST(DataFetch, PartialFileLongerThanTheBodyStartsOver) {
  const std::string body = body_of(1000);
  LoopbackHttpServer server(body, {});
  const std::string dest = test::temp_dir() + "/long.bin";
  std::ofstream(dest + ".part", std::ios::binary) << std::string(5000, 'X');  // 416, then from 0
  download_file(server.url("/long.bin"), dest, quick());
  EXPECT_EQ(read_text_file(dest), body);
}

TEST(DataFetch, HttpErrorsAndBadUrlsAreReported) {
  LoopbackHttpServer server("", {.status = 404});
  const std::string dest = test::temp_dir() + "/missing.bin";
  try {
    download_file(server.url("/missing.bin"), dest, quick());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(e.message().find("HTTP 404"), std::string::npos) << e.what();
    EXPECT_NE(e.context().hint.find("resume"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_EQ(server.requests().size(), 1u);  // a 404 is not retried
  LoopbackHttpServer busy("", {.status = 503});
  EXPECT_THROW(download_file(busy.url("/x.bin"), dest, quick()), Error);
  EXPECT_EQ(busy.requests().size(), 3u);  // a server error is retried: the first attempt and 2 more
  for (const char* url : {"ftp://127.0.0.1/x", "file:///etc/passwd", "127.0.0.1/x"}) {
    try {
      download_file(url, dest, quick());
      FAIL() << url;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage) << url;
    }
  }
}

}  // namespace
}  // namespace orion::data
