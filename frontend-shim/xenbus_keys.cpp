#include "frontend-shim/xenbus_keys.hpp"

namespace unetback::netfront {

bool parse_feature(const std::optional<std::string>& value) {
  if (!value) return false;
  const auto n = hv::parse_xs_uint<std::uint32_t>(*value);
  return n.has_value() && *n != 0;
}

std::vector<std::pair<std::string, std::string>> frontend_connect_keys(const FrontendConnect& c) {
  std::vector<std::pair<std::string, std::string>> keys;
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  if (c.write_num_queues)
    keys.emplace_back("multi-queue-num-queues", std::to_string(c.queues.size()));
  // One queue: keys flat in the device directory; several: under queue-N/ (netif.h).
  const bool flat = c.queues.size() == 1;
  for (std::size_t i = 0; i < c.queues.size(); ++i) {
    const QueueKeys& q = c.queues[i];
    const std::string prefix = flat ? "" : "queue-" + std::to_string(i) + "/";
    keys.emplace_back(prefix + "tx-ring-ref", std::to_string(q.tx_ring_ref.value()));
    keys.emplace_back(prefix + "rx-ring-ref", std::to_string(q.rx_ring_ref.value()));
    if (c.split_event_channels) {
      keys.emplace_back(prefix + "event-channel-tx", std::to_string(q.tx_port.value()));
      keys.emplace_back(prefix + "event-channel-rx", std::to_string(q.rx_port.value()));
    } else {
      keys.emplace_back(prefix + "event-channel", std::to_string(q.tx_port.value()));
    }
  }
  if (c.ctrl) {
    // netif.h: set before the frontend moves to Connected.
    keys.emplace_back("ctrl-ring-ref", std::to_string(c.ctrl->first.value()));
    keys.emplace_back("event-channel-ctrl", std::to_string(c.ctrl->second.value()));
  }
  keys.emplace_back("request-rx-copy", flag(c.request_rx_copy));
  if (c.feature_keys) {
    keys.emplace_back("feature-rx-notify", flag(c.rx_notify));
    keys.emplace_back("feature-sg", flag(c.sg));
    keys.emplace_back("feature-gso-tcpv4", flag(c.gso_tcpv4));
    keys.emplace_back("feature-gso-tcpv6", flag(c.gso_tcpv6));
    keys.emplace_back("feature-ipv6-csum-offload", flag(c.ipv6_csum));
  }
  if (c.request_multicast_control) keys.emplace_back("request-multicast-control", "1");
  if (c.xdp_headroom) keys.emplace_back("xdp-headroom", std::to_string(*c.xdp_headroom));
  keys.emplace_back("state", std::to_string(static_cast<int>(XenbusState::connected)));
  return keys;
}

}  // namespace unetback::netfront
