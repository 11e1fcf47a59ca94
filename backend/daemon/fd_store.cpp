#include "backend/daemon/fd_store.hpp"

#include <charconv>
#include <cstdlib>
#include <system_error>

#include "common/util/log.hpp"

#if UNETBACK_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace unetback::daemon {
namespace {

constexpr std::string_view kLog = "unetbackd";
constexpr std::string_view kPrefix = "tap-";

}  // namespace

std::string FdStore::fd_name(int ifindex, std::uint32_t queue) {
  return std::string(kPrefix) + std::to_string(ifindex) + "-q" + std::to_string(queue);
}

std::optional<std::pair<int, std::uint32_t>> FdStore::parse_name(std::string_view n) {
  if (!n.starts_with(kPrefix)) return std::nullopt;
  n.remove_prefix(kPrefix.size());
  const auto dash = n.find("-q");
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  int ifindex = 0;
  std::uint32_t queue = 0;
  const std::string_view a = n.substr(0, dash), b = n.substr(dash + 2);
  auto ra = std::from_chars(a.data(), a.data() + a.size(), ifindex);
  auto rb = std::from_chars(b.data(), b.data() + b.size(), queue);
  if (ra.ec != std::errc{} || ra.ptr != a.data() + a.size() || ifindex <= 0 || b.empty() ||
      rb.ec != std::errc{} || rb.ptr != b.data() + b.size() || queue >= 256)
    return std::nullopt;
  return std::pair{ifindex, queue};
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

std::unique_ptr<FdStore> FdStore::from_environment() {
#if UNETBACK_HAVE_LIBSYSTEMD
  if (std::getenv("NOTIFY_SOCKET") == nullptr) return nullptr;
  std::vector<std::pair<std::string, UniqueFd>> passed;
  char** names = nullptr;
  // unset_environment: a hotplug script started later must not think the fds are its own.
  const int n = ::sd_listen_fds_with_names(1, &names);
  for (int i = 0; i < n; ++i) {
    passed.emplace_back(names != nullptr && names[i] != nullptr ? names[i] : "",
                        UniqueFd(SD_LISTEN_FDS_START + i));
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);  // NOLINT(cppcoreguidelines-no-malloc)
    std::free(static_cast<void*>(names));             // NOLINT(cppcoreguidelines-no-malloc)
  }
  if (n < 0)
    log::write(log::Level::warn, kLog,
               "cannot take the fds systemd passed: " + std::system_category().message(-n));
  return std::make_unique<FdStore>(std::move(passed), systemd_sender());
#else
  return nullptr;
#endif
}

FdStore::FdStore(std::vector<std::pair<std::string, UniqueFd>> passed, Sender send)
    : send_(std::move(send)) {
  std::size_t foreign = 0;
  for (auto& [name, fd] : passed) {
    auto id = parse_name(name);
    if (!id || !fd) {
      ++foreign;
      continue;  // closed here: nothing of ours
    }
    auto& q = passed_[id->first];
    if (q.contains(id->second)) continue;  // a second fd of one name: the first one counts
    q.emplace(id->second, std::move(fd));
    ++passed_count_;
    stored_[id->first] = std::max(stored_[id->first], id->second + 1);
  }
  if (passed_count_ != 0 || foreign != 0)
    log::write(
        log::Level::info, kLog,
        "the service manager passed " + std::to_string(passed_count_) + " TAP queue fd(s) of " +
            std::to_string(passed_.size()) + " TAP(s)" +
            (foreign != 0 ? " and " + std::to_string(foreign) + " other fd(s), closed" : ""));
}

void FdStore::send(const std::string& state, std::span<const int> fds) {
  const int rc = send_(state, fds);
  if (rc > 0) return;
  if (send_failures_++ == 0)
    log::write(log::Level::warn, kLog,
               "cannot reach the service manager's fd store (" +
                   (rc < 0 ? std::system_category().message(-rc) : std::string("no manager")) +
                   "): a restart will see the TAPs' carrier go off");
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
}

void FdStore::forget(int ifindex) {
  const std::lock_guard lock(mu_);
  remove_stored(ifindex);
  passed_.erase(ifindex);
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
  if (n != 0)
    log::write(log::Level::info, kLog,
               "released the kept queues of " + std::to_string(n) + " TAP(s) that no vif adopted");
  return n;
}

}  // namespace unetback::daemon
