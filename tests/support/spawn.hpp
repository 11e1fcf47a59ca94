// Process: a program the test starts (argv as words, no shell), with the environment it adds,
// optionally in a named network namespace, its stdout and stderr to files or to pipes the test
// reads; ended by its PID (SIGTERM, SIGKILL) and reaped within a deadline. The destructor kills
// and reaps a child that still runs. run_program(): a short program run to its end, its output
// captured.
//
// The child is made with fork() and may only make async-signal-safe calls before exec (the
// test process has threads): everything it needs is built before the fork.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <optional>
#include <poll.h>
#include <sched.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "common/util/unique_fd.hpp"

extern char** environ;

namespace unetback::test {

/// Where a child's stdout or stderr goes.
struct Output {
  enum class Kind { inherit, file, pipe };
  Kind kind = Kind::inherit;
  std::string path;  // Kind::file: created or truncated

  static Output inherit() { return {}; }
  static Output file(std::string p) { return {Kind::file, std::move(p)}; }
  static Output pipe() { return {Kind::pipe, {}}; }
};

struct SpawnOptions {
  /// "NAME=value" entries the child gets on top of (or instead of) the test's environment.
  std::vector<std::string> env;
  /// The network namespace (/run/netns/<name>) the child runs in; empty: the test's own.
  std::string netns;
  Output out;
  Output err;
  /// stderr to wherever stdout goes (the same file or pipe); `err` is then not used.
  bool err_to_out = false;
  /// When set, the child keeps only 0-2 and these descriptors (as a service manager starts a
  /// service); otherwise it inherits what is not close-on-exec.
  std::optional<std::vector<int>> keep_fds;
};

/// A wait status as a shell reports it: the exit code, or 128 + the signal that ended it.
[[nodiscard]] inline int exit_code(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

/// Appends what `fd` has to `into`, waiting up to `t` for the first bytes; false at end of file.
inline bool drain(int fd, std::string& into, std::chrono::milliseconds t = {}) {
  char buf[4096];
  for (int wait_ms = static_cast<int>(t.count());; wait_ms = 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) != 1) return true;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    into.append(buf, static_cast<std::size_t>(n));
  }
}

class Process {
 public:
  Process() = default;
  /// Starts argv[0] (looked up in PATH when it has no slash). started() is false if it could
  /// not be forked; a program that cannot be executed exits with status 127.
  explicit Process(const std::vector<std::string>& argv, const SpawnOptions& opts = {}) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      const auto name = entry.substr(0, entry.find('=') + 1);
      if (std::none_of(opts.env.begin(), opts.env.end(),
                       [&](const std::string& o) { return o.starts_with(name); }))
        env_strings.emplace_back(entry);
    }
    env_strings.insert(env_strings.end(), opts.env.begin(), opts.env.end());
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);

    UniqueFd ns;
    if (!opts.netns.empty()) {
      ns.reset(::open(("/run/netns/" + opts.netns).c_str(), O_RDONLY | O_CLOEXEC));
      if (!ns.valid()) return;
    }
    // The files are emptied here, before the fork: a look at one right after the constructor
    // never finds what an earlier child wrote there.
    const auto prepare = [](const Output& o, UniqueFd& rd, UniqueFd& wr) {
      if (o.kind == Output::Kind::file) {
        wr.reset(::open(o.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      } else if (o.kind == Output::Kind::pipe) {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0) return;
        rd.reset(p[0]);
        wr.reset(p[1]);
      }
    };
    UniqueFd out_wr, err_wr;
    prepare(opts.out, out_, out_wr);
    if (!opts.err_to_out) prepare(opts.err, err_, err_wr);
    const int out_fd = out_wr.get();
    const int err_fd = opts.err_to_out ? out_fd : err_wr.get();
    std::vector<int> keep = opts.keep_fds.value_or(std::vector<int>{});
    std::sort(keep.begin(), keep.end());
    const bool close_others = opts.keep_fds.has_value();

    pid_ = ::fork();
    if (pid_ == 0) {
      if (ns.valid() && ::setns(ns.get(), CLONE_NEWNET) != 0) ::_exit(126);
      if (out_fd >= 0) ::dup2(out_fd, STDOUT_FILENO);
      if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
      if (close_others) {
        unsigned first = 3;
        for (const int k : keep) {
          if (k < 3) continue;
          if (static_cast<unsigned>(k) > first)
            ::close_range(first, static_cast<unsigned>(k) - 1, 0);
          first = static_cast<unsigned>(k) + 1;
        }
        ::close_range(first, ~0U, 0);
      }
      ::execvpe(args[0], args.data(), envp.data());
      ::_exit(127);
    }
  }
  ~Process() { kill(); }
  Process(Process&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        status_(o.status_),
        out_(std::move(o.out_)),
        err_(std::move(o.err_)),
        output_(std::move(o.output_)),
        out_eof_(o.out_eof_) {}
  Process& operator=(Process&& o) noexcept {
    if (this != &o) {
      kill();
      pid_ = std::exchange(o.pid_, -1);
      status_ = o.status_;
      out_ = std::move(o.out_);
      err_ = std::move(o.err_);
      output_ = std::move(o.output_);
      out_eof_ = o.out_eof_;
    }
    return *this;
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  /// Whether a child was made (it may have exited since).
  [[nodiscard]] bool started() const { return pid_ > 0 || status_.has_value(); }
  /// Its PID while it runs (or has not been reaped), else -1.
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// The read ends of Output::pipe() (-1 for another output).
  [[nodiscard]] int out_fd() const { return out_.get(); }
  [[nodiscard]] int err_fd() const { return err_.get(); }

  void signal(int signo) const {
    if (pid_ > 0) ::kill(pid_, signo);
  }
  /// Whether it exited (reaped now if it just did).
  bool exited() {
    if (pid_ > 0) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        status_ = st;
      }
    }
    return status_.has_value();
  }
  /// Waits up to `t` for it to exit: its wait status, or nullopt if it still runs. Meanwhile
  /// its stdout pipe, if it has one, is read into output() (a full pipe would stop it).
  std::optional<int> wait(std::chrono::milliseconds t) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    while (!exited() && pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      if (out_.valid())
        pump(std::chrono::milliseconds(5));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (out_.valid()) pump({});
    return status_;
  }

  /// Appends what its stdout pipe holds (waiting up to `t` for the first bytes) to output().
  void pump(std::chrono::milliseconds t) {
    if (out_.valid() && !drain(out_.get(), output_, t)) out_eof_ = true;
  }
  /// Waits until output() holds `needle`: false once `t` passed, or it exited, without it.
  bool wait_for_output(std::string_view needle, std::chrono::milliseconds t) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    while (output_.find(needle) == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      if (exited() || out_eof_) {
        pump({});
        break;
      }
      pump(std::chrono::milliseconds(50));
    }
    return output_.find(needle) != std::string::npos;
  }
  /// What pump() read from its stdout pipe so far.
  [[nodiscard]] const std::string& output() const { return output_; }
  /// SIGTERM, then SIGKILL if it did not exit within `grace`: its wait status.
  std::optional<int> stop(std::chrono::milliseconds grace) {
    signal(SIGTERM);
    if (auto st = wait(grace)) return st;
    kill();
    return status_;
  }
  /// SIGKILL and reap, if it still runs.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    if (::waitpid(pid_, &st, 0) == pid_) status_ = st;
    pid_ = -1;
  }
  /// The wait status once it exited and was reaped.
  [[nodiscard]] std::optional<int> status() const { return status_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  UniqueFd out_, err_;
  std::string output_;
  bool out_eof_ = false;
};

struct ProgramResult {
  int status = -1;  // exit_code(), or -1 if it did not end in time (it is then killed)
  std::string out, err;
};

/// Runs `argv` to its end with stdout and stderr captured, calling `tick` (the test's event
/// loop, or a short sleep) between two looks at it; killed after `limit`.
inline ProgramResult run_program(const std::vector<std::string>& argv,
                                 const std::function<void()>& tick,
                                 std::chrono::milliseconds limit = std::chrono::seconds(60),
                                 SpawnOptions opts = {}) {
  opts.out = Output::pipe();
  opts.err = Output::pipe();
  opts.err_to_out = false;
  Process p(argv, opts);
  ProgramResult r;
  if (!p.started()) {
    r.err = "spawn failed";
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (tick) tick();
    (void)drain(p.out_fd(), r.out);
    (void)drain(p.err_fd(), r.err);
    if (p.exited()) {
      (void)drain(p.out_fd(), r.out);
      (void)drain(p.err_fd(), r.err);
      r.status = exit_code(*p.status());
      return r;
    }
    if (std::chrono::steady_clock::now() > deadline) return r;  // p's destructor kills it
  }
}

}  // namespace unetback::test
