#include "backend/daemon/fd_store.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <limits>
#include <system_error>
#include <unistd.h>

#include "common/util/log.hpp"
#include "common/util/parse_decimal.hpp"

#if UNETBACK_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace unetback::daemon {
namespace {

constexpr std::string_view kFdStoreLog = "unetbackd";
constexpr std::string_view kPrefix = "tap-";
/// sd_listen_fds(3)'s first fd, and a bound on what this daemon takes (FileDescriptorStoreMax).
constexpr int kListenFdsStart = 3;
constexpr unsigned kMaxListenFds = 65536;

}  // namespace

std::string FdStore::fd_name(int ifindex, std::uint32_t queue) {
  return std::string(kPrefix) + std::to_string(ifindex) + "-q" + std::to_string(queue);
}

std::optional<std::pair<int, std::uint32_t>> FdStore::parse_name(std::string_view n) {
  if (!n.starts_with(kPrefix)) return std::nullopt;
  n.remove_prefix(kPrefix.size());
  const auto dash = n.find("-q");
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  const auto ifindex = parse_decimal<std::uint32_t>(
      n.substr(0, dash), 1, static_cast<std::uint32_t>(std::numeric_limits<int>::max()));
  const auto queue = parse_decimal<std::uint32_t>(n.substr(dash + 2), 0, 255);
  if (!ifindex || !queue) return std::nullopt;
  return std::pair{static_cast<int>(*ifindex), *queue};
}

FdStore::Sender FdStore::systemd_sender() {
  return [](const std::string& state, std::span<const int> fds) -> int {
#if UNETBACK_HAVE_LIBSYSTEMD
    return ::sd_pid_notify_with_fds(0, 0, state.c_str(), fds.data(),
                                    static_cast<unsigned>(fds.size()));
#else
    (void)state;
    (void)fds;
    return 0;
#endif
  };
}

std::vector<std::pair<std::string, int>> FdStore::listed_fds(
    const std::function<const char*(const char*)>& env, long pid) {
  std::vector<std::pair<std::string, int>> out;
  const char* lpid = env("LISTEN_PID");
  const char* lfds = env("LISTEN_FDS");
  if (lpid == nullptr || lfds == nullptr) return out;
  const auto p = parse_decimal<unsigned long>(lpid);
  const auto n = parse_decimal<unsigned>(lfds, 1, kMaxListenFds);
  if (!p || static_cast<long>(*p) != pid || !n) return out;
  const char* lnames = env("LISTEN_FDNAMES");
  std::string_view names = lnames != nullptr ? lnames : "";
  for (int i = 0; i < static_cast<int>(*n); ++i) {
    const auto colon = names.find(':');
    std::string name(names.substr(0, colon));
    names = colon == std::string_view::npos ? std::string_view() : names.substr(colon + 1);
    out.emplace_back(name.empty() ? "unknown" : std::move(name), kListenFdsStart + i);
  }
  return out;
}

// The environment is read and changed from main(), before any thread: the mt-unsafe calls below
// are safe there.
std::unique_ptr<FdStore> FdStore::from_environment() {
  std::vector<std::pair<std::string, UniqueFd>> passed;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): before any thread (see above).
  const auto env = [](const char* k) { return std::getenv(k); };
  std::size_t not_open = 0;
  for (auto& [name, fd] : listed_fds(env, ::getpid())) {
    // A number the variable claims that was not passed (LISTEN_FDS larger than what came) is
    // not ours: the daemon's own descriptors will get it, and closing it later would close
    // one of them.
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      ++not_open;
      continue;
    }
    passed.emplace_back(std::move(name), UniqueFd(fd));
  }
  if (not_open != 0) {
    log::write(log::Level::warn, "unetbackd",
               "LISTEN_FDS names " + std::to_string(not_open) +
                   " descriptor(s) that are not open: ignored");
  }
  // A hotplug script started later must not think the fds are its own.
  for (const char* k : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}) {
    ::unsetenv(k);  // NOLINT(concurrency-mt-unsafe): before any thread (see above).
  }
  Sender send;
  if (env("NOTIFY_SOCKET") != nullptr) send = systemd_sender();
  return std::make_unique<FdStore>(std::move(passed), std::move(send));
}

FdStore::FdStore(std::vector<std::pair<std::string, UniqueFd>>&& passed, Sender send)
    : send_(std::move(send)) {
  std::size_t foreign = 0;
  // Every fd is consumed here: kept, or closed with this vector.
  auto all = std::move(passed);
  for (auto& [name, fd] : all) {
    auto id = parse_name(name);
    if (!id || !fd) {
      ++foreign;
      continue;  // closed here: nothing of ours
    }
    auto& q = passed_[id->first];
    if (q.contains(id->second)) {
      continue;  // a second fd of one name: the first one counts
    }
    q.emplace(id->second, std::move(fd));
    ++passed_count_;
    stored_[id->first] = std::max(stored_[id->first], id->second + 1);
  }
  if (passed_count_ != 0 || foreign != 0) {
    log::write(
        log::Level::info, kFdStoreLog,
        "passed at start (LISTEN_FDS): " + std::to_string(passed_count_) + " TAP queue fd(s) of " +
            std::to_string(passed_.size()) + " TAP(s)" +
            (foreign != 0 ? " and " + std::to_string(foreign) + " other fd(s), closed" : ""));
  }
}

void FdStore::send(const std::string& state, std::span<const int> fds) {
  if (!send_) return;  // no service manager: the store's own copies only
  const int rc = send_(state, fds);
  if (rc > 0) return;
  if (send_failures_++ == 0) {
    log::write(log::Level::warn, kFdStoreLog,
               "cannot reach the service manager's fd store (" +
                   (rc < 0 ? std::system_category().message(-rc) : std::string("no manager")) +
                   "): a restart will see the TAPs' carrier go off");
  }
}

void FdStore::remove_stored(int ifindex) {
  auto it = stored_.find(ifindex);
  if (it == stored_.end()) return;
  for (std::uint32_t q = 0; q < it->second; ++q)
    send("FDSTOREREMOVE=1\nFDNAME=" + fd_name(ifindex, q), {});
  stored_.erase(it);
}

void FdStore::keep(int ifindex, std::span<const int> queue_fds) {
  const std::lock_guard lock(mu_);
  remove_stored(ifindex);
  passed_.erase(ifindex);
  for (std::size_t q = 0; q < queue_fds.size(); ++q) {
    const int fd = queue_fds[q];
    send("FDSTORE=1\nFDNAME=" + fd_name(ifindex, static_cast<std::uint32_t>(q)),
         std::span<const int>(&fd, 1));
  }
  if (!queue_fds.empty()) stored_[ifindex] = static_cast<std::uint32_t>(queue_fds.size());
  std::vector<UniqueFd> copies;
  for (const int fd : queue_fds) {
    UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    if (!copy) {
      log::write(log::Level::warn, kFdStoreLog,
                 "cannot hold a copy of a TAP queue fd (" + std::system_category().message(errno) +
                     "): an upgrade in place will see TAP " + std::to_string(ifindex) +
                     "'s carrier go off");
      copies.clear();
      break;
    }
    copies.push_back(std::move(copy));
  }
  if (copies.empty()) {
    held_.erase(ifindex);
  } else {
    held_[ifindex] = std::move(copies);
  }
}

void FdStore::forget(int ifindex) {
  const std::lock_guard lock(mu_);
  remove_stored(ifindex);
  passed_.erase(ifindex);
  held_.erase(ifindex);
}

std::vector<UniqueFd> FdStore::take(int ifindex) {
  const std::lock_guard lock(mu_);
  std::vector<UniqueFd> fds;
  auto it = passed_.find(ifindex);
  if (it == passed_.end()) return fds;
  // Queues 0..n-1, every one: a TAP with a queue missing is attached anew.
  std::uint32_t expect = 0;
  for (const auto& [q, fd] : it->second) {
    (void)fd;
    if (q != expect++) return fds;
  }
  for (auto& [q, fd] : it->second) fds.push_back(std::move(fd));
  passed_.erase(it);
  return fds;
}

std::size_t FdStore::release_unclaimed() {
  const std::lock_guard lock(mu_);
  const std::size_t n = passed_.size();
  for (auto& [ifindex, queues] : passed_) {
    (void)queues;
    remove_stored(ifindex);
  }
  passed_.clear();
  if (n != 0) {
    log::write(log::Level::info, kFdStoreLog,
               "released the kept queues of " + std::to_string(n) + " TAP(s) that no vif adopted");
  }
  return n;
}

std::vector<std::pair<std::string, UniqueFd>> FdStore::release_held() {
  const std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, UniqueFd>> out;
  for (auto& [ifindex, queues] : held_) {
    for (std::size_t q = 0; q < queues.size(); ++q)
      out.emplace_back(fd_name(ifindex, static_cast<std::uint32_t>(q)), std::move(queues[q]));
  }
  held_.clear();
  return out;
}

std::vector<std::pair<std::string, int>> FdStore::held() const {
  const std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, int>> out;
  for (const auto& [ifindex, queues] : held_) {
    for (std::size_t q = 0; q < queues.size(); ++q)
      out.emplace_back(fd_name(ifindex, static_cast<std::uint32_t>(q)), queues[q].get());
  }
  return out;
}

std::size_t FdStore::held_count() const {
  const std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [ifindex, queues] : held_) n += queues.size();
  return n;
}

}  // namespace unetback::daemon
