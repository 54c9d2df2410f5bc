#include "cdp_browser.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "support.h"

namespace orion::test {

CdpBrowser::CdpBrowser(const std::string& chromium) : profile_(temp_dir()) {
  int in[2], out[2];  // in: we write, the browser reads fd 3; out: the browser writes fd 4
  if (pipe(in) != 0 || pipe(out) != 0) throw_runtime_error("cannot create pipes for chromium");
  pid_ = fork();
  if (pid_ == 0) {
    // The pipes may themselves be fds 3 and 4: move both ends above them before placing them.
    const int reads = fcntl(in[0], F_DUPFD, 10), writes = fcntl(out[1], F_DUPFD, 10);
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    dup2(reads, 3), dup2(writes, 4);
    close(reads), close(writes);
    const std::string dir = "--user-data-dir=" + profile_;
    std::freopen("/dev/null", "w", stderr);
    execl(chromium.c_str(), chromium.c_str(), "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run",
          "--remote-debugging-pipe", dir.c_str(), "about:blank", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]), close(out[1]);
  to_browser_ = in[1], from_browser_ = out[0];
}

CdpBrowser::~CdpBrowser() {
  if (pid_ <= 0) return;
  close(to_browser_), close(from_browser_);
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
}

// Sends one command and reads messages until its answer (events in between are skipped).
nlohmann::json CdpBrowser::call(const std::string& method, const nlohmann::json& params, bool in_page) {
  const int id = next_id_++;
  nlohmann::json msg = {{"id", id}, {"method", method}, {"params", params}};
  if (in_page) msg["sessionId"] = session_;
  const std::string text = msg.dump() + '\0';
  if (write(to_browser_, text.data(), text.size()) != ssize_t(text.size())) throw_runtime_error("chromium went away");
  for (;;) {
    size_t end;
    while ((end = buffer_.find('\0')) == std::string::npos) {
      char buf[65536];
      const ssize_t n = read(from_browser_, buf, sizeof buf);
      if (n <= 0) throw_runtime_error("chromium closed the DevTools pipe");
      buffer_.append(buf, size_t(n));
    }
    nlohmann::json reply = nlohmann::json::parse(buffer_.substr(0, end), nullptr, false);
    buffer_.erase(0, end + 1);
    if (reply.value("id", -1) != id) continue;
    if (reply.contains("error")) throw_runtime_error(method + ": " + reply["error"].dump());
    return reply["result"];
  }
}

void CdpBrowser::open(const std::string& url) {
  const std::string target = call("Target.createTarget", {{"url", "about:blank"}}, false)["targetId"];
  session_ = call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, false)["sessionId"];
  call("Emulation.setDeviceMetricsOverride", {{"width", 1200}, {"height", 800}, {"deviceScaleFactor", 1}, {"mobile", false}});
  call("Page.navigate", {{"url", url}});
}

nlohmann::json CdpBrowser::evaluate(const std::string& expression) {
  nlohmann::json r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
  return r["result"].value("value", nlohmann::json());
}

std::string CdpBrowser::wait_for(const std::string& expression, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    nlohmann::json v = evaluate(expression);
    if (v.is_string() && !v.get<std::string>().empty()) return v.get<std::string>();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {};
}

void CdpBrowser::screenshot(const std::string& path) {
  const std::string b64 = call("Page.captureScreenshot", {{"format", "png"}})["data"];
  // base64 → bytes
  std::string bytes;
  int bits = 0, acc = 0;
  for (char ch : b64) {
    const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* at = ch ? std::strchr(table, ch) : nullptr;
    if (!at) continue;  // '=' padding
    acc = (acc << 6) | int(at - table), bits += 6;
    if (bits >= 8) bits -= 8, bytes.push_back(char((acc >> bits) & 0xFF));
  }
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace orion::test
