// A backend process sandboxed to serve guest A (backend/worker/sandbox.hpp), taken over by an
// attacker (suite root-netns, root): inside the very sandbox a worker enters, each attempt to
// reach beyond guest A (a file, a program, the control or xenstore socket, privcmd, guest B's
// event channel, the broker or another process, a packet or raw socket, a TAP, root or a
// capability, /proc/sys, a mount, executable memory, a child process, a new namespace) fails
// or kills the process with SIGSYS. The same sandbox still runs the data path: an event loop
// thread with a timer, a notification to guest A, a grant copy from guest A.
#include <arpa/inet.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/if_ether.h>
#include <linux/if_tun.h>
#include <memory>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "backend/worker/sandbox.hpp"
#include "common/event/event_loop.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/event_wait.hpp"
#include "tests/integration/xensim/offering_guest.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/figure.hpp"

namespace unetback::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kHangGuard = 30s;
constexpr std::size_t kPatternLen = 64;

std::set<int> open_fds() {
  std::set<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') fds.insert(std::atoi(e->d_name));
    }
    fds.erase(::dirfd(d));  // the listing's own descriptor
    ::closedir(d);
  }
  return fds;
}

std::string errno_text(int e) {
  return "refused: " + std::string(std::strerror(e));
}

/// What the compromised worker holds: its hypervisor handle restricted to guest A, an event
/// channel bound to guest A's port, and what the test tells it about the world.
struct Worker {
  hv::SimHypervisor* hv = nullptr;
  hv::EventChannel* channel = nullptr;
  Port bound{};  // our end of guest A's channel
  DomId guest_b{};
  Port b_offered{};
  GrantRef a_page{};
  DomId guest_a{};
  pid_t broker = 0;
  std::string control_socket;
  std::string xenstore_socket;
};

/// How a sandboxed child ended: killed by the filter (SIGSYS), or what it reported.
struct Outcome {
  bool killed_by_seccomp = false;
  int exit_code = -1;
  int signal = 0;
  std::string report;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "{killed_by_seccomp=" << o.killed_by_seccomp << " exit=" << o.exit_code
            << " signal=" << o.signal << " report='" << o.report << "'}";
}

class CompromisedWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a user, namespaces and a root of its own)";
    world_ = std::make_unique<XensimProcess>();
    hv::HypervisorOptions backend;
    backend.role = hv::Role::backend;
    toolstack_ = std::make_unique<hv::SimHypervisor>(world_->dir(), backend);
    a_ = offering_guest(*toolstack_, world_->dir(), "guest-a");
    b_ = offering_guest(*toolstack_, world_->dir(), "guest-b");
    auto pages = a_.hv->grant_sharer().share(kDom0, 1, hv::Access::read_only);
    ASSERT_TRUE(pages) << pages.error().message();
    a_page_ = std::make_unique<hv::SharedPages>(std::move(*pages));
    for (std::size_t i = 0; i < kPatternLen; ++i)
      a_page_->page(0)[i] = static_cast<std::byte>(0xA0 + i);
  }

  /// Runs `attempt` as a worker for guest A in the sandbox, in its own PID namespace; what it
  /// returns (or "done") comes back through a pipe.
  Outcome run_in_sandbox(const std::function<std::string(Worker&)>& attempt,
                         const std::vector<int>& also_keep = {}) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return {};
    const std::string dir = world_->dir();
    const DomId a = a_.id, b = b_.id;
    const Port a_port = a_.offered, b_port = b_.offered;
    const GrantRef a_ref = a_page_->ref(0);
    const pid_t broker = ::getpid();
    auto child = worker::spawn_in_pid_namespace([&]() -> int {
      ::close(p[0]);
      const std::set<int> inherited = open_fds();
      hv::HypervisorOptions o;
      o.role = hv::Role::backend;
      hv::SimHypervisor hv(dir, o);
      if (hv.restrict_to_domain(a)) return 10;
      auto ch = hv.open_event_channel();
      auto bound = ch->bind_interdomain(a, a_port);
      if (!bound) return 11;
      // What the worker opened itself stays; what it inherited from the test process (the
      // other guests' connections, the test's own files) goes, as a broker passes a worker
      // only its own descriptors.
      worker::SandboxSpec spec;
      spec.domid = a;
      for (const int fd : open_fds())
        if (!inherited.contains(fd)) spec.keep_fds.push_back(fd);
      spec.keep_fds.push_back(p[1]);
      spec.keep_fds.insert(spec.keep_fds.end(), also_keep.begin(), also_keep.end());
      if (auto ec = worker::enter_sandbox(spec)) {
        const std::string why = "sandbox: " + ec.message();
        (void)!::write(p[1], why.data(), why.size());
        return 12;
      }
      Worker w{&hv,
               ch.get(),
               *bound,
               b,
               b_port,
               a_ref,
               a,
               broker,
               dir + "/unetbackd.sock",
               dir + "/dom0.sock"};
      const std::string report = attempt(w);
      (void)!::write(p[1], report.data(), report.size());
      return 0;
    });
    ::close(p[1]);
    Outcome out;
    if (!child) {
      ::close(p[0]);
      out.report = "spawn: " + child.error().message();
      return out;
    }
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    for (;;) {
      pollfd pfd{p[0], POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::read(p[0], buf, sizeof buf);
      if (n <= 0) break;
      out.report.append(buf, static_cast<std::size_t>(n));
    }
    ::close(p[0]);
    int status = 0;
    ::waitpid(*child, &status, 0);
    if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
    out.killed_by_seccomp = out.signal == SIGSYS;
    return out;
  }

  /// The attempt must not have succeeded: the filter killed the process, or the call failed.
  void expect_held(const char* what, const std::function<std::string(Worker&)>& attempt) {
    const Outcome o = run_in_sandbox(attempt);
    EXPECT_TRUE(o.killed_by_seccomp || (o.exit_code == 0 && o.report.starts_with("refused")))
        << what << ": " << o;
    std::printf("sandbox attempt \"%s\": %s\n", what,
                o.killed_by_seccomp ? "killed by the filter (SIGSYS)" : o.report.c_str());
  }

  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> toolstack_;
  OfferingGuest a_, b_;
  std::unique_ptr<hv::SharedPages> a_page_;
};

std::string refused_or_done(int rc) {
  return rc < 0 ? errno_text(errno) : "done";
}

TEST_F(CompromisedWorker, StillServesItsGuestInsideTheSandbox) {
  const Outcome o = run_in_sandbox([](Worker& w) -> std::string {
    // An event-loop thread with a posted task and a timer: epoll, eventfd, timerfd, a thread.
    int ran = 0;
    {
      event::EventLoop loop("sandboxed");
      std::thread t([&] { loop.run(); });
      event::LoopTimer timer(loop);
      loop.post([&] {
        ++ran;
        timer.expires_after(1ms);
        timer.async_wait([&](std::error_code ec) {
          if (!ec) ++ran;
          loop.stop();
        });
      });
      t.join();
    }
    if (ran != 2) return "event loop ran " + std::to_string(ran) + " of 2 callbacks";
    if (auto ec = w.channel->notify(w.bound)) return "notify: " + ec.message();
    std::array<std::byte, kPatternLen> got{};
    hv::GrantCopySegment seg;
    seg.source = hv::GrantCopyPtr::granted(w.guest_a, w.a_page, 0);
    seg.dest = hv::GrantCopyPtr::local(got.data());
    seg.len = kPatternLen;
    w.hv->grant_table().copy(std::span(&seg, 1));
    if (seg.status != 0) return "grant copy status " + std::to_string(seg.status);
    for (std::size_t i = 0; i < kPatternLen; ++i)
      if (got[i] != static_cast<std::byte>(0xA0 + i)) return "grant copy: wrong bytes";
    return "served";
  });
  EXPECT_EQ(o.exit_code, 0) << o;
  EXPECT_EQ(o.report, "served") << o;
  EXPECT_EQ(wait_event(*a_.channel, kHangGuard), a_.offered);
  report_figure("worker_sandbox_allowed_syscalls",
                static_cast<double>(worker::allowed_syscalls().size()), "syscalls");
  report_figure("worker_sandbox_allowed_ioctls",
                static_cast<double>(worker::allowed_ioctls().size()), "requests");
}

TEST_F(CompromisedWorker, CannotBindAnotherGuestsEventChannel) {
  const Outcome o = run_in_sandbox([](Worker& w) -> std::string {
    auto r = w.channel->bind_interdomain(w.guest_b, w.b_offered);
    if (r) return "done";
    return errno_text(r.error().value());
  });
  EXPECT_TRUE(o.killed_by_seccomp || o.report == errno_text(EACCES)) << o;
  // Guest B's port is still offered to dom0: the broker's own handle binds it.
  auto ch = toolstack_->open_event_channel();
  EXPECT_TRUE(ch->bind_interdomain(b_.id, b_.offered));
}

TEST_F(CompromisedWorker, CannotReachFilesProgramsOrSockets) {
  expect_held("open a file",
              [](Worker&) { return refused_or_done(::open("/etc/passwd", O_RDONLY | O_CLOEXEC)); });
  expect_held("open privcmd", [](Worker&) {
    return refused_or_done(::open("/dev/xen/privcmd", O_RDWR | O_CLOEXEC));
  });
  expect_held("open /dev/net/tun to attach to guest B's TAP",
              [](Worker&) { return refused_or_done(::open("/dev/net/tun", O_RDWR | O_CLOEXEC)); });
  expect_held("write /proc/sys", [](Worker&) {
    return refused_or_done(::open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC));
  });
  expect_held("exec a shell", [](Worker&) {
    char* argv[] = {const_cast<char*>("/bin/sh"), nullptr};
    return refused_or_done(::execve("/bin/sh", argv, nullptr));
  });
  for (const bool control : {true, false}) {
    expect_held(control ? "connect to the control socket" : "connect to xenstored", [control](
                                                                                        Worker& w) {
      const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s < 0) return errno_text(errno);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      const std::string& path = control ? w.control_socket : w.xenstore_socket;
      std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
      return refused_or_done(::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr));
    });
  }
  expect_held("open a packet socket", [](Worker&) {
    return refused_or_done(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
  });
  expect_held("open a raw IP socket", [](Worker&) {
    return refused_or_done(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  });
}

TEST_F(CompromisedWorker, CannotTouchOtherProcesses) {
  expect_held("signal the broker",
              [](Worker& w) { return refused_or_done(::kill(w.broker, SIGKILL)); });
  expect_held("signal another process's thread", [](Worker& w) {
    return refused_or_done(static_cast<int>(::syscall(SYS_tgkill, w.broker, w.broker, SIGKILL)));
  });
  expect_held("ptrace the broker", [](Worker& w) {
    return refused_or_done(static_cast<int>(::ptrace(PTRACE_ATTACH, w.broker, nullptr, nullptr)));
  });
  expect_held("fork", [](Worker&) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    return refused_or_done(pid);
  });
  EXPECT_EQ(::kill(::getpid(), 0), 0);  // the broker lives
}

TEST_F(CompromisedWorker, CannotRegainPrivilegeOrChangeItsWorld) {
  expect_held("become root", [](Worker&) { return refused_or_done(::setuid(0)); });
  expect_held("regain a capability", [](Worker&) {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    std::array<__user_cap_data_struct, 2> all{};
    all[0].effective = all[0].permitted = ~0U;
    return refused_or_done(static_cast<int>(::syscall(SYS_capset, &h, all.data())));
  });
  expect_held("mount /proc",
              [](Worker&) { return refused_or_done(::mount("proc", "/", "proc", 0, nullptr)); });
  expect_held("make a user namespace",
              [](Worker&) { return refused_or_done(::unshare(CLONE_NEWUSER)); });
  expect_held("map executable memory", [](Worker&) {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? errno_text(errno) : std::string("done");
  });
  expect_held("set up a TAP on a descriptor it holds", [](Worker& w) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "vif9.0", IFNAMSIZ - 1);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    return refused_or_done(::ioctl(w.channel->fd(), TUNSETIFF, &ifr));
  });
}

/// Reads "Key:\tvalue" from /proc/<pid>/status.
std::string status_field(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key + ":")) {
      std::string v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return {};
}

/// The processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  while (const dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid > 0 && status_field(pid, "PPid") == std::to_string(parent)) found.push_back(pid);
  }
  if (d != nullptr) ::closedir(d);
  return found;
}

/// This process's grandchild under a seccomp filter: the sandboxed worker.
pid_t sandboxed_grandchild() {
  for (const pid_t child : children_of(::getpid())) {
    for (const pid_t grandchild : children_of(child)) {
      if (status_field(grandchild, "Seccomp") == "2") return grandchild;
    }
  }
  return 0;
}

/// What /proc says of a sandboxed process: its user, capabilities, filter, which namespaces
/// it shares with this process, and how much its root holds.
std::string describe(pid_t pid) {
  std::ostringstream os;
  os << "Uid=" << status_field(pid, "Uid");
  for (const char* key : {"CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp"})
    os << ";" << key << "=" << status_field(pid, key);
  for (const char* ns : {"user", "mnt", "net", "ipc", "uts", "pid"}) {
    std::array<char, 64> mine{}, its{};
    (void)!::readlink(("/proc/self/ns/" + std::string(ns)).c_str(), mine.data(), mine.size() - 1);
    (void)!::readlink(("/proc/" + std::to_string(pid) + "/ns/" + ns).c_str(), its.data(),
                      its.size() - 1);
    os << ";" << ns << "=" << (std::string(mine.data()) == its.data() ? "shared" : "own");
  }
  std::size_t entries = 0;
  if (DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/root").c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++entries;
    ::closedir(d);
  }
  os << ";root_entries=" << entries;
  return os.str();
}

TEST_F(CompromisedWorker, RunsAsItsOwnUserWithNothingElse) {
  // The worker says it is in (ready), then waits on `hold` while the test reads its /proc
  // entries from outside.
  int ready[2], hold[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(hold, O_CLOEXEC), 0);
  std::string seen;
  std::thread inspector([&] {
    pollfd pfd{ready[0], POLLIN, 0};
    const bool in = ::poll(&pfd, 1, static_cast<int>(kHangGuard / 1ms)) == 1;
    // The sandboxed process is the child of the child spawn_in_pid_namespace made.
    const pid_t worker_pid = in ? sandboxed_grandchild() : 0;
    if (worker_pid > 0) seen = describe(worker_pid);
    // Lets the worker go on (a write: the spawner's first child holds this end open too).
    (void)!::write(hold[1], "g", 1);
  });
  const int ready_fd = ready[1], wait_fd = hold[0];
  const Outcome o = run_in_sandbox(
      [ready_fd, wait_fd](Worker&) -> std::string {
        (void)!::write(ready_fd, "r", 1);
        char c;
        (void)!::read(wait_fd, &c, 1);
        return "waited";
      },
      {ready_fd, wait_fd});
  inspector.join();
  for (const int fd : {ready[0], ready[1], hold[0], hold[1]}) ::close(fd);
  EXPECT_EQ(o.report, "waited") << o;
  worker::SandboxSpec spec;
  spec.domid = a_.id;
  const std::string uid = std::to_string(*worker::worker_uid(spec));
  EXPECT_EQ(seen, "Uid=" + uid + "\t" + uid + "\t" + uid + "\t" + uid +
                      ";CapEff=0000000000000000;CapPrm=0000000000000000;CapBnd=0000000000000000"
                      ";NoNewPrivs=1;Seccomp=2;user=own;mnt=own;net=own;ipc=own;uts=own;pid=own"
                      ";root_entries=0");
}

TEST(WorkerSandbox, UidIsTheBasePlusTheDomidAndRefusesWhatCannotBeAWorker) {
  worker::SandboxSpec spec;
  spec.domid = DomId{7};
  EXPECT_EQ(*worker::worker_uid(spec), worker::kDefaultUidBase + 7);
  spec.domid = kDom0;
  EXPECT_FALSE(worker::worker_uid(spec));
  spec.domid = kFirstReservedDomId;
  EXPECT_FALSE(worker::worker_uid(spec));
  spec.domid = DomId{7};
  spec.uid_base = 0;
  EXPECT_FALSE(worker::worker_uid(spec));
  spec.uid_base = 0xFFFFFFF8U;
  EXPECT_FALSE(worker::worker_uid(spec));  // would reach the invalid uid (uid_t)-1
  EXPECT_LE(worker::allowed_syscalls().size(), 60U);
}

}  // namespace
}  // namespace unetback::test
