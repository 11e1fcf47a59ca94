#include "backend/worker/sandbox.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/if_tun.h>
#include <linux/securebits.h>
#include <memory>
#include <sched.h>
#include <seccomp.h>
#include <string>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xen/xen.h>  // domid_t, which the device headers use
// clang-format off
#include <xen/sys/evtchn.h>
#include <xen/sys/gntdev.h>
// clang-format on

#include "common/util/unique_fd.hpp"

namespace unetback::worker {

namespace {

// The data path's system calls: event loops (epoll, eventfd, timerfd), the threads that run
// them (clone for threads only, futex, robust lists, rseq, signal masks and stacks), memory
// (no executable mappings), the rings' devices (read and write carry pending and unmasked
// ports; ioctl below), the TAP queues (read, readv, write, writev), the broker's channel and
// xensim's (sendmsg, recvmsg, poll), clocks, and the way out.
constexpr std::array kSyscalls = {
    AllowedSyscall{"read", ""},
    AllowedSyscall{"write", ""},
    AllowedSyscall{"readv", ""},
    AllowedSyscall{"writev", ""},
    AllowedSyscall{"close", ""},
    AllowedSyscall{"fcntl", "F_GETFL, F_SETFL, F_GETFD, F_SETFD"},
    AllowedSyscall{"ioctl", "the requests of allowed_ioctls()"},
    AllowedSyscall{"poll", ""},
    AllowedSyscall{"ppoll", ""},
    AllowedSyscall{"epoll_create1", ""},
    AllowedSyscall{"epoll_ctl", ""},
    AllowedSyscall{"epoll_wait", ""},
    AllowedSyscall{"epoll_pwait", ""},
    AllowedSyscall{"eventfd2", ""},
    AllowedSyscall{"timerfd_create", ""},
    AllowedSyscall{"timerfd_settime", ""},
    AllowedSyscall{"sendmsg", ""},
    AllowedSyscall{"recvmsg", ""},
    AllowedSyscall{"sendto", ""},
    AllowedSyscall{"recvfrom", ""},
    AllowedSyscall{"mmap", "without PROT_EXEC"},
    AllowedSyscall{"mprotect", "without PROT_EXEC"},
    AllowedSyscall{"munmap", ""},
    AllowedSyscall{"mremap", ""},
    AllowedSyscall{"madvise", ""},
    AllowedSyscall{"brk", ""},
    AllowedSyscall{"futex", ""},
    AllowedSyscall{"clone", "with CLONE_THREAD (a thread)"},
    AllowedSyscall{"clone3", "fails with ENOSYS (glibc then uses clone)"},
    AllowedSyscall{"set_robust_list", ""},
    AllowedSyscall{"rseq", ""},
    AllowedSyscall{"rt_sigprocmask", ""},
    AllowedSyscall{"rt_sigaction", ""},
    AllowedSyscall{"rt_sigreturn", ""},
    AllowedSyscall{"sigaltstack", ""},
    AllowedSyscall{"tgkill", "to this process only"},
    AllowedSyscall{"gettid", ""},
    AllowedSyscall{"getpid", ""},
    AllowedSyscall{"sched_yield", ""},
    AllowedSyscall{"sched_getaffinity", ""},
    AllowedSyscall{"getrandom", ""},
    AllowedSyscall{"clock_gettime", ""},
    AllowedSyscall{"clock_nanosleep", ""},
    AllowedSyscall{"nanosleep", ""},
    AllowedSyscall{"restart_syscall", ""},
    AllowedSyscall{"exit", ""},
    AllowedSyscall{"exit_group", ""},
};

// The sanitizers' runtimes make system calls of their own (ASan probes memory with a pipe
// when a thread starts); a sanitized build (the tests') allows them too. Not in a release build,
// and not counted in allowed_syscalls().
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNETBACK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(undefined_behavior_sanitizer)
#define UNETBACK_SANITIZED 1
#endif
#endif
#ifdef UNETBACK_SANITIZED
constexpr std::array<std::string_view, 1> kSanitizerSyscalls = {"pipe2"};
#else
constexpr std::array<std::string_view, 0> kSanitizerSyscalls = {};
#endif

// /dev/xen/gntdev: map, unmap and copy grants (libxengnttab); /dev/xen/evtchn: bind to the
// guest (the fd is restricted to it), unbind, notify (libxenevtchn); a TAP queue: the guest's
// offloads, renegotiated on a reconnect. A TAP's name, queues, owner or persistence are the
// broker's.
constexpr std::array<unsigned long, 7> kIoctls = {
    IOCTL_GNTDEV_MAP_GRANT_REF,
    IOCTL_GNTDEV_UNMAP_GRANT_REF,
    IOCTL_GNTDEV_GRANT_COPY,
    IOCTL_EVTCHN_BIND_INTERDOMAIN,
    IOCTL_EVTCHN_UNBIND,
    IOCTL_EVTCHN_NOTIFY,
    TUNSETOFFLOAD,
};

std::error_code errno_now() {
  return {errno, std::system_category()};
}

std::error_code write_file(const char* path, const std::string& text) {
  UniqueFd fd(::open(path, O_WRONLY | O_CLOEXEC));
  if (!fd) return errno_now();
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return errno_now();
  return {};
}

std::error_code close_all_but(std::vector<int> keep) {
  keep.push_back(0);
  keep.push_back(1);
  keep.push_back(2);
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  unsigned first = 0;
  for (const int fd : keep) {
    if (fd < 0) continue;
    const auto u = static_cast<unsigned>(fd);
    if (u > first && ::close_range(first, u - 1, 0) != 0) return errno_now();
    first = u + 1;
  }
  if (::close_range(first, ~0U, 0) != 0) return errno_now();
  return {};
}

// A user of its own (it loses root here), then namespaces of its own, in which it holds the
// capabilities it needs to set up its root and nothing outside.
std::error_code become_worker(uid_t uid) {
  if (::setgroups(0, nullptr) != 0) return errno_now();
  if (::setresgid(uid, uid, uid) != 0) return errno_now();
  if (::setresuid(uid, uid, uid) != 0) return errno_now();
  // The change of user made the process undumpable, which leaves /proc/self to root: the
  // maps below are written while it is dumpable again, and it stops being so at the end.
  if (::prctl(PR_SET_DUMPABLE, 1) != 0) return errno_now();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS |
                CLONE_NEWCGROUP) != 0)
    return errno_now();
  const std::string map = std::to_string(uid) + " " + std::to_string(uid) + " 1\n";
  if (auto ec = write_file("/proc/self/setgroups", "deny")) return ec;
  if (auto ec = write_file("/proc/self/uid_map", map)) return ec;
  if (auto ec = write_file("/proc/self/gid_map", map)) return ec;
  return {};
}

// An empty tmpfs becomes the root, read-only; the host's tree is detached.
std::error_code empty_root() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno_now();
  constexpr const char* kDir = "/tmp";
  if (::mount("unetback-worker", kDir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,nr_inodes=2,mode=0555") != 0)
    return errno_now();
  if (::chdir(kDir) != 0) return errno_now();
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno_now();
  if (::umount2(".", MNT_DETACH) != 0) return errno_now();
  if (::chdir("/") != 0) return errno_now();
  if (::mount(nullptr, "/", nullptr,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno_now();
  return {};
}

std::error_code limit(int resource, std::uint64_t value) {
  const rlimit r{value, value};
  return ::setrlimit(resource, &r) == 0 ? std::error_code{} : errno_now();
}

std::error_code limits(const SandboxSpec& spec) {
  if (auto ec = limit(RLIMIT_NOFILE, spec.max_fds)) return ec;
  if (auto ec = limit(RLIMIT_NPROC, spec.max_tasks)) return ec;
  if (auto ec = limit(RLIMIT_FSIZE, 0)) return ec;
  if (auto ec = limit(RLIMIT_CORE, 0)) return ec;
  if (auto ec = limit(RLIMIT_MEMLOCK, 0)) return ec;
  return limit(RLIMIT_MSGQUEUE, 0);
}

// Every capability, in every set, for good (the ones held in the new user namespace too).
std::error_code drop_capabilities() {
  for (int cap = 0; ::prctl(PR_CAPBSET_READ, cap) >= 0; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap) != 0) return errno_now();
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return errno_now();
  constexpr unsigned long kBits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, kBits) != 0) return errno_now();
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  std::array<__user_cap_data_struct, 2> none{};
  if (::syscall(SYS_capset, &header, none.data()) != 0) return errno_now();
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno_now();
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) return errno_now();
  return {};
}

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

std::error_code seccomp_error(int rc) {
  return {rc < 0 ? -rc : EINVAL, std::system_category()};
}

std::error_code add_rules(scmp_filter_ctx ctx) {
  const auto allow = [&](int nr, unsigned count, const scmp_arg_cmp* args) {
    return seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, count, args);
  };
  for (const AllowedSyscall& s : kSyscalls) {
    const int nr = seccomp_syscall_resolve_name(std::string(s.name).c_str());
    if (nr == __NR_SCMP_ERROR) return std::make_error_code(std::errc::function_not_supported);
    int rc = 0;
    if (s.name == "ioctl") {
      for (const unsigned long req : kIoctls) {
        const scmp_arg_cmp a = SCMP_A1(SCMP_CMP_EQ, req);
        if ((rc = allow(nr, 1, &a)) != 0) break;
      }
    } else if (s.name == "fcntl") {
      for (const int cmd : {F_GETFL, F_SETFL, F_GETFD, F_SETFD}) {
        const scmp_arg_cmp a = SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(cmd));
        if ((rc = allow(nr, 1, &a)) != 0) break;
      }
    } else if (s.name == "mmap" || s.name == "mprotect") {
      const scmp_arg_cmp a = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
      rc = allow(nr, 1, &a);
    } else if (s.name == "clone") {
      const scmp_arg_cmp a = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
      rc = allow(nr, 1, &a);
    } else if (s.name == "clone3") {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
    } else if (s.name == "tgkill") {
      const scmp_arg_cmp a = SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid()));
      rc = allow(nr, 1, &a);
    } else {
      rc = allow(nr, 0, nullptr);
    }
    if (rc != 0) return seccomp_error(rc);
  }
  for (const std::string_view name : kSanitizerSyscalls) {
    const int nr = seccomp_syscall_resolve_name(std::string(name).c_str());
    if (const int rc = allow(nr, 0, nullptr); rc != 0) return seccomp_error(rc);
  }
  return {};
}

std::error_code load_filter() {
  std::unique_ptr<void, FilterDeleter> ctx(seccomp_init(SCMP_ACT_KILL_PROCESS));
  if (!ctx) return std::make_error_code(std::errc::not_enough_memory);
  if (auto ec = add_rules(ctx.get())) return ec;
  if (const int rc = seccomp_load(ctx.get()); rc != 0) return seccomp_error(rc);
  return {};
}

}  // namespace

Result<uid_t> worker_uid(const SandboxSpec& spec) {
  if (spec.domid == kDom0 || is_reserved(spec.domid) || spec.uid_base == 0)
    return std::make_error_code(std::errc::invalid_argument);
  const std::uint64_t uid = std::uint64_t{spec.uid_base} + spec.domid.value();
  if (uid >= 0xFFFFFFFFULL) return std::make_error_code(std::errc::invalid_argument);
  return static_cast<uid_t>(uid);
}

std::error_code enter_sandbox(const SandboxSpec& spec) {
  auto uid = worker_uid(spec);
  if (!uid) return uid.error();
  if (auto ec = close_all_but(spec.keep_fds)) return ec;
  if (auto ec = become_worker(*uid)) return ec;
  if (auto ec = empty_root()) return ec;
  if (auto ec = limits(spec)) return ec;
  if (auto ec = drop_capabilities()) return ec;
  return load_filter();
}

std::span<const AllowedSyscall> allowed_syscalls() {
  return kSyscalls;
}

std::span<const unsigned long> allowed_ioctls() {
  return kIoctls;
}

Result<pid_t> spawn_in_pid_namespace(const std::function<int()>& body) {
  const pid_t outer = ::fork();
  if (outer < 0) return errno_now();
  if (outer > 0) return outer;
  // The outer child makes the namespace and waits for its first process, whose end it
  // reports as its own (the same exit status, or death by the same signal).
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::unshare(CLONE_NEWPID) != 0) ::_exit(127);
  const pid_t inner = ::fork();
  if (inner < 0) ::_exit(127);
  if (inner == 0) {
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::_exit(body());
  }
  int status = 0;
  while (::waitpid(inner, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    ::signal(sig, SIG_DFL);
    const rlimit no_core{0, 0};
    (void)::setrlimit(RLIMIT_CORE, &no_core);
    (void)::raise(sig);
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

}  // namespace unetback::worker
