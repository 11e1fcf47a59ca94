// Runs an XenstoreServer on its own thread in a fresh temp dir, with dom0 and dom1
// introduced, for tests that talk to it through real sockets.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdlib.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <utility>

#include "tools/xensim/xenstore/server.hpp"

namespace unetback::xensim::test {

class ServerThread {
 public:
  explicit ServerThread(XenstoreLimits limits = {}) {
    char tmpl[] = "/tmp/xsd-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    std::promise<void> ready;
    auto fut = ready.get_future();
    thread_ = std::thread([this, limits, &ready] {
      std::optional<XenstoreServer> s;
      try {
        s.emplace(io_, dir_, limits);
        s->introduce_domain(kDom0, "Domain-0");
        s->introduce_domain(DomId{1}, "guest1");
      } catch (...) {
        ready.set_exception(std::current_exception());
        return;
      }
      server_ = &*s;
      ready.set_value();
      io_.run();
      server_ = nullptr;
    });
    fut.get();
  }
  ~ServerThread() {
    guard_.reset();
    io_.stop();
    thread_.join();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  /// Runs `f(server)` on the server's thread and returns its result (a 30 s guard against a
  /// hang).
  template <typename F>
  auto call(F f) -> decltype(f(std::declval<XenstoreServer&>())) {
    using R = decltype(f(std::declval<XenstoreServer&>()));
    auto task = std::make_shared<std::packaged_task<R()>>([this, f] { return f(*server_); });
    auto fut = task->get_future();
    boost::asio::post(io_, [task] { (*task)(); });
    if (fut.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
      throw std::runtime_error("server thread did not answer");
    return fut.get();
  }

  [[nodiscard]] std::string sock(int dom) const {
    return (dir_ / ("dom" + std::to_string(dom) + ".sock")).string();
  }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_{
      boost::asio::make_work_guard(io_)};
  XenstoreServer* server_ = nullptr;
  std::thread thread_;
};

struct CmdResult {
  int rc = -1;
  std::string out;
};

/// Runs a shell command line (bounded by `timeout 60`, a guard against a hang) and captures
/// stdout+stderr.
inline CmdResult run(const std::string& sock, const std::string& cmd) {
  const std::string line = "XENSTORED_PATH='" + sock + "' timeout 60 " + cmd + " 2>&1";
  CmdResult r;
  FILE* p = ::popen(line.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace unetback::xensim::test
