// The frontend's keys, read and validated at connect (Linux netback's xenbus.c connect(),
// netif.h).
// The frontend directory is hostile: every value is parsed strictly, and the first bad key
// makes the whole configuration an error that the adapter reports like xenbus_dev_fatal.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/xenbus/keys.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::xenbus {

/// One queue's rings and event channels. With one shared channel (`event-channel`), evtchn_tx
/// and evtchn_rx are equal.
struct QueueConfig {
  GrantRef tx_ring_ref{};
  GrantRef rx_ring_ref{};
  Port evtchn_tx{};
  Port evtchn_rx{};
  [[nodiscard]] bool split_event_channels() const { return evtchn_tx != evtchn_rx; }
  friend bool operator==(const QueueConfig&, const QueueConfig&) = default;
};

struct CtrlRingConfig {
  GrantRef ring_ref{};
  Port evtchn{};
  friend bool operator==(const CtrlRingConfig&, const CtrlRingConfig&) = default;
};

struct FrontendConfig {
  bool rx_copy = true;              // request-rx-copy (must be 1: there is no flipping)
  bool rx_notify = false;           // feature-rx-notify: the frontend kicks on RX refill
  bool sg = false;                  // feature-sg
  bool gso_tcpv4 = false;           // feature-gso-tcpv4
  bool gso_tcpv6 = false;           // feature-gso-tcpv6
  bool csum_ipv4 = true;            // !feature-no-csum-offload
  bool csum_ipv6 = false;           // feature-ipv6-csum-offload
  bool multicast_control = false;   // request-multicast-control (sampled now, then watched)
  std::uint32_t xdp_headroom = 0;   // xdp-headroom: free bytes before the packet in slot 0
  std::vector<QueueConfig> queues;  // size = multi-queue-num-queues, 1..max_queues
  std::optional<CtrlRingConfig> ctrl;
  friend bool operator==(const FrontendConfig&, const FrontendConfig&) = default;
};

struct FrontendLimits {
  std::uint32_t max_queues = 1;  // what we advertised as multi-queue-max-queues
  bool ctrl_ring = false;        // whether we advertised feature-ctrl-ring
};

/// netif.h XEN_NETIF_MAX_XDP_HEADROOM: the most a frontend may ask for.
inline constexpr std::uint32_t kMaxXdpHeadroom = 0x7FFF;

/// F:xdp-headroom, read at connect and again when the frontend goes Reconfiguring. Absent = 0
/// (Linux netback). A value that is not a decimal, above kMaxXdpHeadroom (Linux clamps it;
/// netif.h caps it) or leaving no byte of a 4096-byte buffer for data (Linux would then write
/// past the page) is EINVAL: the vif's error, like any other bad frontend key.
[[nodiscard]] Result<std::uint32_t, KeyError> read_xdp_headroom(const KeyReader& read);

/// Parses the frontend directory through `read` (keys relative to it). Rules:
/// * `request-rx-copy` absent or "0" -> EOPNOTSUPP ("frontend does not support rx-copy").
/// * Boolean keys accept "0"/"1" only; absent takes netif.h's default.
/// * `multi-queue-num-queues`: absent = 1; otherwise 1..max_queues (0 is the 2026 upstream fix,
///   above max is what Linux refuses).
/// * Per queue (flat with one queue, `queue-<i>/` otherwise): `tx-ring-ref`, `rx-ring-ref`,
///   then `event-channel-tx` + `event-channel-rx` (both, if either is present) or
///   `event-channel`. Port 0 is never a bindable event channel and is refused.
/// * `ctrl-ring-ref` (read only if we offered the ctrl ring) requires `event-channel-ctrl`.
/// * `xdp-headroom`: read_xdp_headroom.
[[nodiscard]] Result<FrontendConfig, KeyError> parse_frontend_config(const KeyReader& read,
                                                                     const FrontendLimits& limits);

}  // namespace unetback::xenbus
