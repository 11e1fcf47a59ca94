// TapKeeper: someone outside the daemon that holds a vif's TAP queue fds across a restart or a
// crash of unetbackd (systemd's file descriptor store: backend/daemon/fd_store.hpp).
//
// Why: when the last fd of a TAP queue closes, the kernel detaches the queue, and with no queue
// left it turns the TAP's carrier off (tun.c, __tun_detach). The bridge then disables the port
// and flushes its FDB entries; when the TAP was the bridge's only port, the bridge's carrier goes
// too and dom0 forgets the guest's ARP entry. After the restart dom0 has to resolve the guest
// again, and an ARP request sent while no daemon served is retried only after a second
// (retrans_time). Held open elsewhere, the queues stay attached: the carrier stays on, the host's
// frames wait in the queues for the next daemon, and nothing has to be learnt again.
//
// The vif keeps its queues here from its first adoptable connect (when its state record is made,
// so that a successor may adopt it) until its TAP is removed; a reconnect of the guest keeps
// them where they are. It takes them back when it adopts.
#pragma once

#include <span>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::vif {

class TapKeeper {
 public:
  virtual ~TapKeeper() = default;
  /// Holds copies of `queue_fds` (queue i at index i) for the TAP with interface index
  /// `ifindex`, instead of whatever it held for that TAP.
  virtual void keep(int ifindex, std::span<const int> queue_fds) = 0;
  /// Lets go of what it holds for `ifindex` (the TAP may then go with the daemon's last fd).
  virtual void forget(int ifindex) = 0;
  /// The queue fds an earlier daemon kept for `ifindex` (queue order), which it still holds
  /// too until forget() or keep(); empty when it has none, or not all of them.
  [[nodiscard]] virtual std::vector<UniqueFd> take(int ifindex) = 0;
};

}  // namespace unetback::vif
