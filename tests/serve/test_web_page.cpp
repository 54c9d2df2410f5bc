// The web page in a real browser: headless Chromium loads /?selftest=1 from a server started here;
// the page's own code lists the models, sends a chat message through the playground (streamed),
// then opens the training-runs view and plots a metrics.jsonl this test writes, and marks the DOM
// with SELFTEST PASS or FAIL. Screenshots of both views are kept beside the test binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cdp_browser.h"
#include "serve_fixture.h"

namespace orion::test {
namespace {

std::string find_chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (std::filesystem::exists(p)) return p;
  return {};
}

TEST(WebPage, ChatStreamsAndTheRunsViewPlotsAMetricsFile) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium: scripts/setup.sh)";
  ServeFixtureOptions o;
  o.runs_dir = temp_dir();
  std::filesystem::create_directories(o.runs_dir + "/run1");
  {
    std::ofstream m(o.runs_dir + "/run1/metrics.jsonl");
    for (int s = 1; s <= 20; s++)
      m << nlohmann::json{{"step", s}, {"loss", 5.0 / s}, {"lr", 1e-3}, {"grad_norm", 1.0 + s * 0.1}, {"ms", 100.0 + s},
                          {"skipped", false}}
               .dump()
        << "\n";
  }
  ServeFixture f(o);
  const std::string base = "http://127.0.0.1:" + std::to_string(f.port) + "/";
  CdpBrowser browser(chromium);
  browser.open(base + "?selftest=1");
  const std::string result = browser.wait_for("document.getElementById('selftest').textContent", 30);
  ASSERT_FALSE(result.empty()) << "the page never finished its self test";
  EXPECT_EQ(result.rfind("SELFTEST PASS", 0), 0u) << result;
  EXPECT_NE(result.find("loss_points=20"), std::string::npos) << result;
  EXPECT_GT(browser.evaluate("document.getElementById('log').textContent.length").get<int>(), 5) << "streamed text shown";
  // Screenshots of the two views, kept beside the test binary as artifacts (not compared).
  const std::string shots = std::filesystem::current_path().string();
  browser.screenshot(shots + "/serve_runs.png");
  browser.evaluate("document.getElementById('tab-chat').click()");
  browser.screenshot(shots + "/serve_chat.png");
  EXPECT_GT(std::filesystem::file_size(shots + "/serve_chat.png"), 1000u);
}

}  // namespace
}  // namespace orion::test
