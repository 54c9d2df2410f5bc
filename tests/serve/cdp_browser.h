// Headless Chromium driven over the DevTools protocol through a pipe (--remote-debugging-pipe:
// JSON messages separated by NUL bytes on file descriptors 3 and 4), for tests that must wait for a
// page's asynchronous work — `--dump-dom` dumps at the load event, before fetches finish.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace orion::test {

class CdpBrowser {
 public:
  // Starts `chromium` headless; a Runtime error when it cannot be started.
  explicit CdpBrowser(const std::string& chromium);
  ~CdpBrowser();
  // Opens url in a new tab 1200×800 and attaches to it.
  void open(const std::string& url);
  // The value of a JavaScript expression in the page (a string, number, … or null).
  nlohmann::json evaluate(const std::string& expression);
  // Waits until the expression is a non-empty string (polling); returns it, or "" after timeout_s.
  std::string wait_for(const std::string& expression, double timeout_s);
  // A PNG of the page written to path.
  void screenshot(const std::string& path);

 private:
  nlohmann::json call(const std::string& method, const nlohmann::json& params, bool in_page = true);
  int pid_ = -1, to_browser_ = -1, from_browser_ = -1, next_id_ = 1;
  std::string session_, buffer_, profile_;
};

}  // namespace orion::test
