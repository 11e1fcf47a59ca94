// A whole xensim world run as the demo runs it, for the root end-to-end suites: a temp dir,
// a "dom0" network namespace with a Linux bridge and an address, the real xensim, the real
// unetbackd in that namespace, and unetback-xl (libxl's role) creating guests whose
// netfront-shim TAPs live in namespaces of their own. Processes are children of the test,
// ended by PID; namespaces and the temp dir are removed by the destructor.
//
// Header-only on purpose: each root test binary that uses it is a single translation unit.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/hv/hypervisor_spec.hpp"
#include "tests/support/spawn.hpp"

namespace unetback::testing {

using namespace std::chrono_literals;

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RunResult {
  int status = -1;  // exit status; -1 killed/timeout
  std::string out, err;
};

/// Runs argv (no shell), stdout/stderr to files in `dir`, killed after `limit`.
inline RunResult run(const std::vector<std::string>& argv, const std::string& dir,
                     std::chrono::milliseconds limit = 60s) {
  static int n = 0;
  const std::string o = dir + "/run" + std::to_string(++n) + ".out";
  const std::string e = dir + "/run" + std::to_string(n) + ".err";
  test::SpawnOptions opts;
  opts.out = test::Output::file(o);
  opts.err = test::Output::file(e);
  test::Process p(argv, opts);
  RunResult r;
  if (const auto st = p.wait(limit); st && WIFEXITED(*st)) r.status = WEXITSTATUS(*st);
  p.kill();
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

/// Whether process `pid` runs: it exists and is not a zombie waiting for its parent.
inline bool running(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

/// A long-running child (xensim, unetbackd, an iperf3 server or client), output to a log;
/// SIGTERM then SIGKILL when dropped.
class Daemon {
 public:
  /// `keep`: descriptors the child inherits besides 0-2 (every other one is closed in the child,
  /// as a service manager starts a service: a test's own descriptors never reach the daemon).
  Daemon(const std::vector<std::string>& argv, std::string log, std::vector<int> keep = {})
      : log_(std::move(log)) {
    test::SpawnOptions opts;
    opts.out = test::Output::file(log_);
    opts.err_to_out = true;
    opts.keep_fds = std::move(keep);
    proc_ = test::Process(argv, opts);
  }
  /// A process this test did not start (an upgrade's successor, which the daemon forked),
  /// writing to `log`: signalled by pid; its end is seen in /proc, its status is not known (0).
  static std::unique_ptr<Daemon> follow(pid_t pid, std::string log) {
    auto d = std::unique_ptr<Daemon>(new Daemon(std::move(log)));
    d->foreign_pid_ = pid;
    return d;
  }
  ~Daemon() { stop(); }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// Its PID while it runs (-1 once it was seen to end).
  [[nodiscard]] pid_t pid() const { return foreign_pid_ != 0 ? foreign_pid_ : proc_.pid(); }
  void signal(int signo) const {
    if (pid() > 0) ::kill(pid(), signo);
  }
  /// Waits for the child to exit; its wait status, or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds limit) {
    if (foreign_pid_ == 0) return proc_.wait(limit);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (foreign_pid_ > 0 && running(foreign_pid_)) {
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(10ms);
    }
    foreign_pid_ = -1;
    return 0;
  }
  /// SIGTERM, up to 5 s, then SIGKILL.
  void stop() {
    if (pid() <= 0) return;
    signal(SIGTERM);
    if (wait_exit(5s)) return;
    signal(SIGKILL);
    (void)wait_exit(5s);
  }
  bool wait_for(const std::string& text, std::chrono::milliseconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (slurp(log_).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  [[nodiscard]] std::string log() const { return slurp(log_); }

 private:
  explicit Daemon(std::string log) : log_(std::move(log)) {}

  std::string log_;
  test::Process proc_;
  pid_t foreign_pid_ = 0;  // follow(): the PID, then -1 once it ended
};

/// Number of open descriptors of a process (its /proc/PID/fd entries).
inline std::size_t open_fds(pid_t pid) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

/// The world. Check ok() (and why()) after construction: setup failures are not exceptions so
/// a test can ASSERT on them with the logs.
class XlWorld {
 public:
  struct Binaries {
    std::string xensim, unetbackd, xl, ctl, shim, script;
  };

  /// `tag` keeps namespace names apart (`<tag>d<pid>` for dom0); `subnet` is "10.N.0";
  /// `daemon_args` are added to unetbackd's command line (tunables, --switch-uplink).
  XlWorld(Binaries bins, std::string tag, std::string subnet,
          std::vector<std::string> daemon_args = {})
      : bins_(std::move(bins)),
        tag_(std::move(tag)),
        subnet_(std::move(subnet)),
        daemon_args_(std::move(daemon_args)) {
    char tmpl[] = "/tmp/unetback-e2e.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      why_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    ns0_ = tag_ + "d" + std::to_string(::getpid());
    if (!add_netns(ns0_)) return;
    if (run({"ip", "-n", ns0_, "link", "add", kBridge, "type", "bridge"}, dir_).status != 0 ||
        run({"ip", "-n", ns0_, "addr", "add", host_ip() + "/24", "dev", kBridge}, dir_).status !=
            0 ||
        run({"ip", "-n", ns0_, "link", "set", kBridge, "up"}, dir_).status != 0) {
      why_ = "cannot set up the bridge";
      return;
    }
    xensim_ = std::make_unique<Daemon>(std::vector<std::string>{bins_.xensim, "--dir", world()},
                                       dir_ + "/xensim.log");
    if (!xensim_->wait_for("xensim ready", 30s)) {
      why_ = "xensim did not start: " + xensim_->log();
      return;
    }
    if (!start_daemon()) return;
    ok_ = true;
  }

  ~XlWorld() {
    // Guests still running (a failed test): their pid files name them.
    std::error_code ec;
    if (!dir_.empty())
      for (const auto& e : std::filesystem::directory_iterator(world(), ec))
        if (e.path().filename().string().starts_with("guest-") && e.path().extension() == ".pid") {
          const pid_t pid = std::atoi(slurp(e.path()).c_str());
          if (pid > 0 && slurp("/proc/" + std::to_string(pid) + "/cmdline").find("netfront-shim") !=
                             std::string::npos)
            ::kill(pid, SIGKILL);
        }
    extra_.clear();
    daemon_.reset();
    predecessors_.clear();
    xensim_.reset();
    for (const auto& ns : namespaces_) (void)run({"ip", "netns", "del", ns}, dir_);
    if (!dir_.empty() && std::getenv("UNETBACK_KEEP_E2E") == nullptr)
      std::filesystem::remove_all(dir_, ec);
  }
  XlWorld(const XlWorld&) = delete;
  XlWorld& operator=(const XlWorld&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] const std::string& why() const { return why_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] std::string world() const { return dir_ + "/world"; }
  [[nodiscard]] const std::string& ns0() const { return ns0_; }
  [[nodiscard]] std::string host_ip() const { return subnet_ + ".1"; }
  [[nodiscard]] Daemon& daemon() { return *daemon_; }
  [[nodiscard]] const Binaries& bins() const { return bins_; }
  static constexpr const char* kBridge = "e2ebr0";

  /// The unetbackd program the world starts from now on (start_daemon, start_successor).
  void set_daemon_binary(const std::string& path) { bins_.unetbackd = path; }
  /// (Re)starts unetbackd in the dom0 namespace and waits for its control socket.
  bool start_daemon() {
    std::error_code ec;
    std::filesystem::remove(world() + "/unetbackd.sock", ec);
    std::vector<std::string> argv{
        "ip", "netns", "exec", ns0_, bins_.unetbackd, "--hypervisor", hv::format_sim_spec(world())};
    argv.insert(argv.end(), daemon_args_.begin(), daemon_args_.end());
    daemon_ = std::make_unique<Daemon>(
        argv, dir_ + "/unetbackd-" + std::to_string(++daemon_runs_) + ".log");
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!std::filesystem::exists(world() + "/unetbackd.sock") &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    if (!std::filesystem::exists(world() + "/unetbackd.sock")) {
      why_ = "unetbackd did not start: " + daemon_->log();
      return false;
    }
    return true;
  }
  /// Starts another unetbackd with `extra` arguments (e.g. --takeover) while the current one
  /// may still run; the current one is kept (predecessor()) until the world goes. With
  /// `env` ("NAME=VALUE" items) in the new daemon's environment.
  bool start_successor(const std::vector<std::string>& extra,
                       const std::vector<std::string>& env = {}) {
    predecessors_.push_back(std::move(daemon_));
    std::vector<std::string> argv{"ip", "netns", "exec", ns0_, "env"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), {bins_.unetbackd, "--hypervisor", hv::format_sim_spec(world())});
    argv.insert(argv.end(), daemon_args_.begin(), daemon_args_.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<Daemon>(
        argv, dir_ + "/unetbackd-" + std::to_string(++daemon_runs_) + ".log");
    return true;
  }
  /// As start_successor(), with `fds` (name, fd) passed as systemd passes its fd store to a
  /// service it starts again: at 3.. in order, with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID
  /// (the daemon's own pid: a shell sets it and execs, and so does `ip netns exec`).
  bool start_successor_with_fds(const std::vector<std::string>& extra,
                                const std::vector<std::pair<std::string, int>>& fds) {
    predecessors_.push_back(std::move(daemon_));
    std::vector<int> high;  // inheritable copies, out of the way of 3..
    std::string moves, closes, names;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      high.push_back(::fcntl(fds[i].second, F_DUPFD, 200));
      moves += " " + std::to_string(3 + i) + "<&" + std::to_string(high.back());
      closes += " " + std::to_string(high.back()) + "<&-";
      names += (i == 0 ? "" : ":") + fds[i].first;
    }
    const std::string script = (fds.empty() ? "" : "exec" + moves + closes + "; ") +
                               "export LISTEN_PID=$$ LISTEN_FDS=" + std::to_string(fds.size()) +
                               " LISTEN_FDNAMES='" + names + "'; exec \"$@\"";
    // bash: dash takes no descriptor above 9 in a redirection.
    std::vector<std::string> argv{"bash", "-c", script, "bash", "ip", "netns", "exec", ns0_};
    argv.insert(argv.end(), {bins_.unetbackd, "--hypervisor", hv::format_sim_spec(world())});
    argv.insert(argv.end(), daemon_args_.begin(), daemon_args_.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<Daemon>(
        argv, dir_ + "/unetbackd-" + std::to_string(++daemon_runs_) + ".log", high);
    for (int fd : high) ::close(fd);
    return true;
  }
  /// The daemon is now `pid`, a process the current one started (an upgrade's successor),
  /// logging where it did; the current one is kept as predecessor().
  void follow_daemon(pid_t pid) {
    const std::string log = dir_ + "/unetbackd-" + std::to_string(daemon_runs_) + ".log";
    predecessors_.push_back(std::move(daemon_));
    daemon_ = Daemon::follow(pid, log);
  }
  /// The daemon start_successor() replaced.
  [[nodiscard]] Daemon& predecessor() { return *predecessors_.back(); }
  /// The xensim process.
  [[nodiscard]] pid_t xensim_pid() const { return xensim_->pid(); }
  /// Ends unetbackd with `signo` (SIGTERM: orderly, SIGKILL: a crash) and waits for it.
  void kill_daemon(int signo) {
    daemon_->signal(signo);
    (void)daemon_->wait_exit(30s);
  }

  RunResult xl(std::vector<std::string> args, std::chrono::milliseconds limit = 90s) {
    std::vector<std::string> argv = {"ip", "netns", "exec", ns0_, bins_.xl, "--world", world()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, dir_, limit);
  }
  RunResult ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {bins_.ctl, "--world", world()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, dir_, 60s);
  }

  struct Guest {
    std::string name, ns, ip;
    int domid = -1;
    [[nodiscard]] std::string tap() const { return "vif" + std::to_string(domid) + ".0"; }
  };
  /// `unetback-xl create` guest number `n` (address subnet.<10+n>) in a namespace of its own;
  /// `shim_args` go to netfront-shim; `bridge` is the vif's bridge= (a Linux bridge in dom0's
  /// namespace, or "unetback:<name>"); `script` the vif's script= (empty: bins().script);
  /// `vif_extra` more ",key=value" items of the vif spec. nullopt (and why()) when the create
  /// fails; last_create() has its output.
  std::optional<Guest> create_guest(int n, const std::vector<std::string>& shim_args = {},
                                    const std::vector<std::string>& xl_args = {},
                                    const std::string& bridge = kBridge,
                                    const std::string& script = "",
                                    const std::string& vif_extra = "") {
    Guest g;
    g.name = "g" + std::to_string(n);
    g.ns = tag_ + "g" + std::to_string(n) + "-" + std::to_string(::getpid());
    g.ip = subnet_ + "." + std::to_string(10 + n);
    if (std::find(namespaces_.begin(), namespaces_.end(), g.ns) == namespaces_.end() &&
        !add_netns(g.ns))
      return std::nullopt;
    char mac[32];
    std::snprintf(mac, sizeof mac, "00:16:3e:00:%02x:%02x", n / 256, n % 256);
    std::vector<std::string> args = {"create",
                                     g.name,
                                     "--vif",
                                     std::string("mac=") + mac + ",bridge=" + bridge + ",script=" +
                                         (script.empty() ? bins_.script : script) + vif_extra,
                                     "--guest-netns",
                                     g.ns,
                                     "--address",
                                     g.ip + "/24",
                                     "--shim",
                                     bins_.shim};
    args.insert(args.end(), xl_args.begin(), xl_args.end());
    if (!shim_args.empty()) {
      args.push_back("--");
      args.insert(args.end(), shim_args.begin(), shim_args.end());
    }
    const RunResult r = xl(args);
    last_create_ = r;
    if (r.status != 0 || !r.out.starts_with("domid ")) {
      why_ = "create " + g.name + " exited " + std::to_string(r.status) + ": " + r.err;
      return std::nullopt;
    }
    g.domid = std::atoi(r.out.c_str() + 6);
    return g;
  }
  RunResult destroy_guest(const Guest& g) { return xl({"destroy", g.name}); }
  [[nodiscard]] const RunResult& last_create() const { return last_create_; }
  /// The guest's netfront-shim pid (from unetback-xl's pid file), or -1.
  [[nodiscard]] pid_t guest_pid(const Guest& g) const {
    const std::string s = slurp(world() + "/guest-" + std::to_string(g.domid) + ".pid");
    return s.empty() ? -1 : std::atoi(s.c_str());
  }

  /// Runs `argv` inside namespace `ns` (a shorthand for ip netns exec).
  RunResult in_ns(const std::string& ns, std::vector<std::string> argv,
                  std::chrono::milliseconds limit = 60s) {
    std::vector<std::string> full = {"ip", "netns", "exec", ns};
    full.insert(full.end(), argv.begin(), argv.end());
    return run(full, dir_, limit);
  }
  /// A background process in namespace `ns`, ended when the world goes (or earlier by reset).
  Daemon& spawn_in_ns(const std::string& ns, std::vector<std::string> argv,
                      const std::string& log_name) {
    std::vector<std::string> full = {"ip", "netns", "exec", ns};
    full.insert(full.end(), argv.begin(), argv.end());
    extra_.push_back(std::make_unique<Daemon>(full, dir_ + "/" + log_name));
    return *extra_.back();
  }
  /// A network namespace of the test's own (lo up), deleted when the world goes.
  bool add_namespace(const std::string& ns) { return add_netns(ns); }
  [[nodiscard]] bool link_exists(const std::string& ns, const std::string& dev) {
    return run({"ip", "-n", ns, "link", "show", "dev", dev}, dir_).status == 0;
  }
  /// Names of the vif* links in dom0's namespace.
  [[nodiscard]] std::vector<std::string> vif_links() {
    const RunResult r = run({"ip", "-n", ns0_, "-o", "link", "show"}, dir_);
    std::vector<std::string> out;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      const auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      std::string name = line.substr(colon + 2, line.find(':', colon + 2) - colon - 2);
      if (const auto at = name.find('@'); at != std::string::npos) name.resize(at);
      if (name.starts_with("vif")) out.push_back(name);
    }
    return out;
  }

 private:
  bool add_netns(const std::string& ns) {
    (void)run({"ip", "netns", "del", ns}, dir_);
    if (run({"ip", "netns", "add", ns}, dir_).status != 0) {
      why_ = "ip netns add " + ns + " failed";
      return false;
    }
    namespaces_.push_back(ns);
    (void)run({"ip", "-n", ns, "link", "set", "lo", "up"}, dir_);
    return true;
  }

  Binaries bins_;
  std::string tag_, subnet_;
  std::vector<std::string> daemon_args_;
  std::string dir_, ns0_, why_;
  bool ok_ = false;
  int daemon_runs_ = 0;
  std::vector<std::string> namespaces_;
  std::unique_ptr<Daemon> xensim_, daemon_;
  std::vector<std::unique_ptr<Daemon>> predecessors_;
  std::vector<std::unique_ptr<Daemon>> extra_;
  RunResult last_create_;
};

/// iperf3 -J: the number `key` of the whole run's summary `section` ("sum_received",
/// "sum_sent"), or 0 when absent.
inline double iperf_summary_number(const std::string& json, std::string_view section,
                                   std::string_view key) {
  const auto at = json.find("\"" + std::string(section) + "\"");
  if (at == std::string::npos) return 0;
  const std::string field = "\"" + std::string(key) + "\":";
  const auto value = json.find(field, at);
  if (value == std::string::npos) return 0;
  return std::strtod(json.c_str() + value + field.size(), nullptr);
}

/// iperf3 -J: the receiver's rate of the whole run in bits/s (0 when absent).
inline double iperf_bits_per_second(const std::string& json) {
  return iperf_summary_number(json, "sum_received", "bits_per_second");
}

/// iperf3 -J: the bytes the receiver counted over the whole run (0 when absent).
inline double iperf_bytes_received(const std::string& json) {
  return iperf_summary_number(json, "sum_received", "bytes");
}

/// iperf3 -J: the bytes the sender wrote over the whole run (0 when absent).
inline double iperf_bytes_sent(const std::string& json) {
  return iperf_summary_number(json, "sum_sent", "bytes");
}

/// iperf3 -J: the bits/s of each interval's sum, in order.
inline std::vector<double> iperf_interval_rates(const std::string& json) {
  std::vector<double> out;
  // The summary object: each interval also has an "end" key, but a number, not an object.
  std::size_t end = std::string::npos;
  for (auto p = json.find("\"end\":"); p != std::string::npos; p = json.find("\"end\":", p + 1)) {
    const auto v = json.find_first_not_of(" \t\n", p + 6);
    if (v != std::string::npos && json[v] == '{') {
      end = p;
      break;
    }
  }
  std::size_t pos = json.find("\"intervals\":");
  while (pos != std::string::npos) {
    pos = json.find("\"sum\":", pos);
    if (pos == std::string::npos || pos > end) break;
    const auto bps = json.find("\"bits_per_second\":", pos);
    if (bps == std::string::npos || bps > end) break;
    out.push_back(std::strtod(json.c_str() + bps + 18, nullptr));
    pos = bps;
  }
  return out;
}

}  // namespace unetback::testing
