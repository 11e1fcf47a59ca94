// FdStore: systemd's file descriptor store (sd_pid_notify_with_fds(3), FDSTORE=1) as the vifs'
// TapKeeper (backend/vif/tap_keeper.hpp): every adoptable vif's TAP queue fds are stored in the
// service manager, which keeps them over a crash (Restart=on-failure) and over `systemctl
// restart`, and passes them to the next unetbackd (LISTEN_FDS, LISTEN_FDNAMES). The TAP keeps its
// queues and its carrier while no daemon runs; the host's frames wait in its queues.
//
// Names: "tap-<ifindex>-q<queue>", one fd each (FDNAME). keep() first removes what was stored
// for that TAP (FDSTOREREMOVE=1), then stores the new copies; forget() removes them. Passed fds
// no vif takes by the time the daemon serves are removed and closed (release_unclaimed): their
// guests went while no daemon ran. systemd also drops a stored fd by itself when it reports an
// error (the TAP was deleted: tun's poll says EPOLLERR).
//
// The store also holds its own copy of every kept queue (close-on-exec), so that the daemon can
// re-execute itself in place (`unetback-ctl upgrade`, backend/daemon/reexec.hpp): release_held()
// hands them to the new image, which finds them as systemd would pass them (LISTEN_FDS,
// LISTEN_FDNAMES, LISTEN_PID), under systemd or not.
//
// The unit must allow the store (FileDescriptorStoreMax=); without it systemd refuses the fds and
// logs so, and a restart behaves as without a keeper. Outside systemd (no NOTIFY_SOCKET), or
// built without libsystemd, nothing is sent: only the store's own copies are kept.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/vif/tap_keeper.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::daemon {

class FdStore final : public vif::TapKeeper {
 public:
  /// Sends one notification (`state`, with `fds` attached) to the service manager; returns
  /// sd_notify's convention (> 0 sent, 0 no manager, < 0 -errno).
  using Sender = std::function<int(const std::string& state, std::span<const int> fds)>;

  /// Takes the fds passed to this process (LISTEN_FDS for this pid, with LISTEN_FDNAMES, as
  /// systemd or a re-executing unetbackd passes them; then unset from the environment so that no
  /// child sees them; they are made close-on-exec), and sends to systemd's store when
  /// $NOTIFY_SOCKET is set (libsystemd).
  [[nodiscard]] static std::unique_ptr<FdStore> from_environment();
  /// sd_pid_notify_with_fds to $NOTIFY_SOCKET (libsystemd), or a sender that sends nothing.
  [[nodiscard]] static Sender systemd_sender();
  /// The fds LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES in `env` give to process `pid` (fds 3..3+n-1,
  /// named; "unknown" where a name is missing). Empty unless LISTEN_PID is `pid`.
  [[nodiscard]] static std::vector<std::pair<std::string, int>> listed_fds(
      const std::function<const char*(const char*)>& env, long pid);

  /// `passed`: the fds the service manager passed, with their names (others are closed);
  /// `send`: where notifications go (none if empty).
  FdStore(std::vector<std::pair<std::string, UniqueFd>>&& passed, Sender send);

  void keep(int ifindex, std::span<const int> queue_fds) override;
  void forget(int ifindex) override;
  [[nodiscard]] std::vector<UniqueFd> take(int ifindex) override;

  /// Removes from the store and closes every passed fd no vif took; returns how many TAPs.
  std::size_t release_unclaimed();
  /// The store's own copies of every queue kept and not forgotten, named as in systemd's store,
  /// for the next image of this process; the store holds none after.
  [[nodiscard]] std::vector<std::pair<std::string, UniqueFd>> release_held();
  /// The store's own copies, borrowed (they stay here), named as in systemd's store: what a
  /// successor process gets as LISTEN_FDS.
  [[nodiscard]] std::vector<std::pair<std::string, int>> held() const;
  /// Queue fds the store holds copies of.
  [[nodiscard]] std::size_t held_count() const;
  /// TAP queue fds passed at start (before any take).
  [[nodiscard]] std::size_t passed_count() const { return passed_count_; }
  /// Notifications the service manager refused or that could not be sent.
  [[nodiscard]] std::uint64_t send_failures() const { return send_failures_; }

  [[nodiscard]] static std::string fd_name(int ifindex, std::uint32_t queue);
  /// {ifindex, queue} of a name fd_name() made; nullopt for any other name.
  [[nodiscard]] static std::optional<std::pair<int, std::uint32_t>> parse_name(std::string_view n);

 private:
  void remove_stored(int ifindex);
  void send(const std::string& state, std::span<const int> fds);

  mutable std::mutex mu_;
  Sender send_;
  /// The store's own copies of the kept queues: ifindex -> queue order.
  std::map<int, std::vector<UniqueFd>> held_;
  /// Passed fds not taken yet: ifindex -> queue -> fd.
  std::map<int, std::map<std::uint32_t, UniqueFd>> passed_;
  /// How many queues the store holds for each TAP (names q0..qN-1).
  std::map<int, std::uint32_t> stored_;
  std::size_t passed_count_ = 0;
  std::uint64_t send_failures_ = 0;
};

}  // namespace unetback::daemon
