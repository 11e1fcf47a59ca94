// FdReserve: keeps the control plane alive when guests' connects use up the descriptor table.
//
// A guest chooses what its connect costs in descriptors (queue count, split or shared event
// channels) and may retry for free after a refusal, so the daemon must never let guests take
// the last descriptors: the control socket, the hotplug scripts (fork, pipes) and the
// xenstore connection need some to keep working. Two means:
//  * allows(n): a vif connect about to take `n` descriptors is refused unless `floor` stay
//    free after it (the connect fails as that vif's error, never as the daemon's);
//  * spares: a few descriptors held open on /dev/null. Under EMFILE an acceptor closes one
//    (release_spare), accepts, answers and closes the client, and reopens it
//    (restore_spares), so that the listening socket's backlog is drained instead of waking
//    the loop again and again (the classic accept-under-EMFILE busy loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback {

/// Descriptors this process may still open: RLIMIT_NOFILE's soft limit minus those open
/// below it (0 when even counting them fails for want of a descriptor).
[[nodiscard]] std::size_t free_fds();

struct FdLimit {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
};
/// Raises the soft RLIMIT_NOFILE to the hard limit (systemd starts services at a soft 1024);
/// returns the limits now in force.
Result<FdLimit> raise_fd_limit();

class FdReserve {
 public:
  /// Every vif connect of this daemon is to leave this many descriptors free: the control
  /// socket's connections (16 by default), a hotplug script's fork and pipes, and margin.
  static constexpr std::size_t kDefaultFloor = 32;

  explicit FdReserve(std::size_t spares = 2, std::size_t floor = kDefaultFloor);
  FdReserve(const FdReserve&) = delete;
  FdReserve& operator=(const FdReserve&) = delete;

  /// Whether `n` more descriptors may be taken and still leave floor() free.
  [[nodiscard]] bool allows(std::size_t n) const { return free_fds() >= n + floor_; }
  [[nodiscard]] std::size_t floor() const { return floor_; }

  /// Closes one spare, so that the caller's next open succeeds; false if none is held.
  bool release_spare();
  /// Reopens the spares released so far, as far as descriptors allow (the rest later).
  void restore_spares();
  [[nodiscard]] std::size_t spares_held() const;

 private:
  std::vector<UniqueFd> spares_;
  std::size_t floor_;
};

}  // namespace unetback
