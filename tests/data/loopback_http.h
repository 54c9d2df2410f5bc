// A tiny HTTP/1.1 file server on 127.0.0.1 (an ephemeral port) for download tests. It serves one
// body at any path, honours "Range: bytes=N-" unless told not to, can cut its first response short
// (to test resuming), and records the requests it saw. Bounded: it stops when destroyed or after
// `lifetime_s` seconds, whichever comes first, and never talks to any other address.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace orion::test {

class LoopbackHttpServer {
 public:
  struct Behaviour {
    bool honour_range = true;
    size_t cut_first_response_after = 0;  // > 0: the first response sends only this many body bytes
    int status = 200;                     // e.g. 404 for every request
    double lifetime_s = 60;
  };

  LoopbackHttpServer(std::string body, Behaviour b) : body_(std::move(body)), b_(b) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd_, 8) != 0) return;
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackHttpServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  void serve() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(b_.lifetime_s);
    while (!stop_ && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      handle(c);
      ::close(c);
    }
  }

  void handle(int c) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return;
      const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return;
      req.append(buf, size_t(n));
    }
    size_t first = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      requests_.push_back(req);
      first = requests_.size();
    }
    if (b_.status != 200) {
      send_all(c, "HTTP/1.1 " + std::to_string(b_.status) + " Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    size_t from = 0;
    for (const char* key : {"Range: bytes=", "range: bytes="})
      if (size_t at = req.find(key); at != std::string::npos && b_.honour_range) from = std::stoul(req.substr(at + 13));
    std::string head;
    if (from > 0 && from >= body_.size()) {
      send_all(c, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    if (from > 0)
      head = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(from) + "-" +
             std::to_string(body_.size() - 1) + "/" + std::to_string(body_.size()) + "\r\n";
    else head = "HTTP/1.1 200 OK\r\n";
    head += "Content-Length: " + std::to_string(body_.size() - from) + "\r\nConnection: close\r\n\r\n";
    std::string body = body_.substr(from);
    if (first == 1 && b_.cut_first_response_after > 0) body.resize(std::min(body.size(), b_.cut_first_response_after));
    send_all(c, head + body);
  }

  static void send_all(int c, const std::string& s) {
    for (size_t done = 0; done < s.size();) {
      const ssize_t n = ::send(c, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += size_t(n);
    }
  }

  std::string body_;
  Behaviour b_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
};

}  // namespace orion::test
