// The frontend's side of the vif xenbus handshake, as data: what it reads from the backend
// directory and what it writes into its own (Linux xen-netfront's talk_to_netback). Pure, so
// the exact key set is unit-tested; Netfront does the I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hv/xenstore.hpp"
#include "common/util/strong_id.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace unetback::netfront {

/// xenbus states (xen/io/xenbus.h): the one enum the backend uses too.
using xenbus::XenbusState;

/// What the backend advertised in its directory.
struct BackendFeatures {
  bool rx_copy = false;                     ///< feature-rx-copy: netfront refuses without it
  std::optional<std::uint32_t> max_queues;  ///< multi-queue-max-queues, if present
  bool split_event_channels = false;        ///< feature-split-event-channels
  bool sg = false;                          ///< feature-sg
  bool gso_tcpv4 = false;                   ///< feature-gso-tcpv4
  bool gso_tcpv6 = false;                   ///< feature-gso-tcpv6
  bool ipv6_csum = false;                   ///< feature-ipv6-csum-offload
  bool ctrl_ring = false;                   ///< feature-ctrl-ring
  bool mcast_control = false;               ///< feature-multicast-control
  bool dynamic_mcast_control = false;       ///< feature-dynamic-multicast-control
  bool xdp_headroom = false;                ///< feature-xdp-headroom
};

/// Parses a boolean feature key as netfront does (xenbus_read_unsigned(..., 0)): a decimal
/// number, non-zero means on; absent or malformed means off.
[[nodiscard]] bool parse_feature(const std::optional<std::string>& value);

/// Reads every feature key through `read` (absent keys: nullopt).
template <typename ReadFn>
BackendFeatures read_backend_features(ReadFn&& read);

/// The grant refs and ports of one queue, as written to xenstore.
struct QueueKeys {
  GrantRef tx_ring_ref, rx_ring_ref;
  Port tx_port, rx_port;  ///< equal when the event channel is not split
};

/// What the frontend writes when it connects.
struct FrontendConnect {
  bool request_rx_copy = true;
  bool rx_notify = true;
  bool sg = true, gso_tcpv4 = true, gso_tcpv6 = true, ipv6_csum = true;
  /// Written only when the backend advertised multi-queue-max-queues (Linux), or always
  /// (win-xenvif).
  bool write_num_queues = false;
  /// feature-rx-notify, feature-sg, feature-gso-*, feature-ipv6-csum-offload written at all
  /// (Mini-OS writes none of them: absent means off, IPv4 checksum offload on).
  bool feature_keys = true;
  /// request-multicast-control=1 (only groups added by MCAST_ADD extras get through).
  bool request_multicast_control = false;
  bool split_event_channels = false;
  std::vector<QueueKeys> queues;  ///< one entry per queue (>= 1)
  /// ctrl-ring-ref and event-channel-ctrl, when we offer a control ring.
  std::optional<std::pair<GrantRef, Port>> ctrl;
  /// xdp-headroom, written only when the backend offers feature-xdp-headroom (Linux writes
  /// 0, or XDP_PACKET_HEADROOM = 256 with an XDP program attached).
  std::optional<std::uint32_t> xdp_headroom;
};

/// The keys (relative to the frontend directory) and values, in the order written, ending
/// with state=4: Linux netfront skips Initialised and goes straight to Connected.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> frontend_connect_keys(
    const FrontendConnect& c);

template <typename ReadFn>
BackendFeatures read_backend_features(ReadFn&& read) {
  BackendFeatures f;
  f.rx_copy = parse_feature(read("feature-rx-copy"));
  if (auto v = read("multi-queue-max-queues")) f.max_queues = hv::parse_xs_uint<std::uint32_t>(*v);
  f.split_event_channels = parse_feature(read("feature-split-event-channels"));
  f.sg = parse_feature(read("feature-sg"));
  f.gso_tcpv4 = parse_feature(read("feature-gso-tcpv4"));
  f.gso_tcpv6 = parse_feature(read("feature-gso-tcpv6"));
  f.ipv6_csum = parse_feature(read("feature-ipv6-csum-offload"));
  f.ctrl_ring = parse_feature(read("feature-ctrl-ring"));
  f.mcast_control = parse_feature(read("feature-multicast-control"));
  f.dynamic_mcast_control = parse_feature(read("feature-dynamic-multicast-control"));
  f.xdp_headroom = parse_feature(read("feature-xdp-headroom"));
  return f;
}

}  // namespace unetback::netfront
