// Test support for xensim worlds: start a private `xensim` in a mkdtemp directory, and fork
// child processes that act as domUs, with a line-based control channel to them. Every wait
// is bounded; destructors kill (by pid) and reap what they started and remove the directory.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>

#include "common/hv/hypervisor_spec.hpp"
#include "common/util/unique_fd.hpp"
#include "tests/support/spawn.hpp"

namespace unetback::test {

/// The xensim binary: $XENSIM_BIN, else the path meson baked in (XENSIM_BIN_DEFAULT).
[[nodiscard]] std::string xensim_binary();

class XensimProcess {
 public:
  /// Starts xensim in a fresh temporary directory and waits (at most `timeout`) for its
  /// "ready" line. Throws std::runtime_error on failure. `extra_args` go on its command line.
  explicit XensimProcess(std::string extra_args = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// SIGTERM, then SIGKILL if it does not exit in a few seconds; removes the directory.
  ~XensimProcess();
  XensimProcess(const XensimProcess&) = delete;
  XensimProcess& operator=(const XensimProcess&) = delete;

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// "sim:<dir>", for open_hypervisor.
  [[nodiscard]] std::string spec() const { return hv::format_sim_spec(dir_); }

 private:
  std::string root_;  // the mkdtemp directory
  std::string dir_;   // the world inside it
  Process process_;
  pid_t pid_ = -1;
};

/// A forked child running `body(ctrl)` and exiting with its return value. `ctrl` is its end
/// of a socketpair; the parent talks to it with send()/recv().
class ChildProcess {
 public:
  explicit ChildProcess(const std::function<int(int ctrl)>& body);
  /// Kills (SIGKILL) and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  bool send(const std::string& line) const;
  /// The next line from the child, or nullopt after `timeout` or when it closed.
  [[nodiscard]] std::optional<std::string> recv(
      std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  /// Waits for the exit; returns the raw wait status, or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  pid_t pid_ = -1;
  UniqueFd ctrl_;
};

/// Line I/O on a control socket, for the child side.
bool send_line(int fd, const std::string& line);
std::optional<std::string> recv_line(int fd,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace unetback::test
