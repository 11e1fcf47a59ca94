// The sandbox of a backend process that serves one guest domain: what it gives up, for good,
// before it touches that guest's rings, so that a bug the guest reaches there costs only this
// process and this guest.
//
// The process keeps the descriptors it was given (the rings' grant device, an event-channel
// handle restricted to the guest, the guest's TAP queues, a channel to its broker) and loses
// everything else:
//
// * its own user: uid and gid `uid_base + domid` (as Xen's device-model deprivileging derives
//   a uid per domid from `xen-qemuuser-range-base`), no supplementary groups;
// * its own user, mount, IPC, network, UTS and cgroup namespaces; its own PID namespace when
//   started by spawn_in_pid_namespace() (a process cannot move itself into one and keep
//   making threads);
// * an empty, read-only root: a tmpfs with nothing in it, the host's file system detached (no
//   /proc, /dev, /sys, no socket path to connect to);
// * no capability (bounding, ambient, permitted, effective, inheritable), `no_new_privs`, not
//   dumpable, resource limits on descriptors, threads, file size and core dumps;
// * a seccomp filter whose default action kills the process: it allows only the system calls
//   the data path makes (allowed_syscalls()), `ioctl` only with the request numbers of the
//   grant device, the event-channel device and `TUNSETOFFLOAD`, no executable memory, `clone`
//   only for threads, signals only to itself.
//
// What it cannot take away: /dev/xen/gntdev has no per-domain restriction in Linux, so the
// process can map or copy any grant issued to its own domain (dom0 or the driver domain).
//
// Not allowed yet: io_uring, which the TAP path uses (common/net/io_uring_ring). Its
// operations (open, socket, connect, ...) are not seen by seccomp, so a worker may only get
// rings limited to read and write operations on its own descriptors
// (IORING_REGISTER_RESTRICTIONS on a ring created disabled); until that is built, a worker's
// TAP path is the one without io_uring.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <sys/types.h>
#include <system_error>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::worker {

/// The first worker uid's base: uid = base + domid (domids are below 0x7FF0). Far above the
/// ranges Debian hands out (system users, users, subordinate ids from 100000) and systemd's
/// dynamic users (61184-65519).
inline constexpr std::uint32_t kDefaultUidBase = 0x70000000;

struct SandboxSpec {
  DomId domid;                               ///< the guest served
  std::uint32_t uid_base = kDefaultUidBase;  ///< uid and gid = uid_base + domid
  std::vector<int> keep_fds;                 ///< stay open; every other descriptor above 2 closes
  std::uint64_t max_fds = 1024;              ///< RLIMIT_NOFILE
  std::uint64_t max_tasks = 64;              ///< RLIMIT_NPROC: the worker's threads
};

/// The uid (and gid) of the worker for `spec`: EINVAL for dom0, a reserved domid, a base of 0
/// or one whose sum overflows into the invalid uid (uid_t)-1.
Result<uid_t> worker_uid(const SandboxSpec& spec);

/// Enters the sandbox for good. The caller is root (uid 0 with CAP_SETUID and CAP_SETGID) and
/// single-threaded, and has opened everything it needs; descriptors 0-2 stay. On failure the
/// process may be half-way (a new user, say): it must exit, never go on to serve the guest.
std::error_code enter_sandbox(const SandboxSpec& spec);

/// A system call the sandbox allows, with what it allows of it.
struct AllowedSyscall {
  std::string_view name;
  std::string_view condition;  ///< empty: any arguments
};

/// The seccomp allowlist, in the order the filter is built; its size is the figure to watch.
std::span<const AllowedSyscall> allowed_syscalls();

/// The ioctl requests the filter allows (grant device, event-channel device, TUNSETOFFLOAD).
std::span<const unsigned long> allowed_ioctls();

/// Runs `body` in a child process that is PID 1 of a new PID namespace (clone with
/// CLONE_NEWPID; root only) and returns the child's pid; the child exits with body's return
/// value. The caller waits for it.
Result<pid_t> spawn_in_pid_namespace(const std::function<int()>& body);

}  // namespace unetback::worker
