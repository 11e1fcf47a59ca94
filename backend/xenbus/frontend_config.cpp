#include "backend/xenbus/frontend_config.hpp"

#include <cerrno>
#include <string>

#include "common/hv/xenstore.hpp"

namespace unetback::xenbus {
namespace {

Result<std::uint32_t, KeyError> read_num_queues(const KeyReader& read, std::uint32_t max_queues) {
  constexpr std::string_view kKey = "multi-queue-num-queues";
  const auto raw = read(kKey);
  if (!raw) return 1U;  // a frontend that predates multi-queue uses one, flat
  const auto n = hv::parse_xs_uint<std::uint32_t>(*raw);
  if (!n) return KeyError{std::string(kKey), "not an unsigned 32-bit decimal", EINVAL};
  if (*n == 0) return KeyError{std::string(kKey), "zero queues", EINVAL};
  if (*n > max_queues) {
    return KeyError{std::string(kKey),
                    "more queues than the advertised maximum " + std::to_string(max_queues),
                    EINVAL};
  }
  return *n;
}

// Each key is read once: a value the frontend changes between two reads must not make us
// act on a mix of both.
Result<Port, KeyError> parse_port(const std::string& key, const std::optional<std::string>& raw) {
  if (!raw) return KeyError{key, "missing", ENOENT};
  const auto v = hv::parse_xs_uint<std::uint32_t>(*raw);
  if (!v) return KeyError{key, "not an unsigned 32-bit decimal", EINVAL};
  if (*v == 0) return KeyError{key, "port 0 is never a valid event channel", EINVAL};
  return Port{*v};
}

Result<QueueConfig, KeyError> read_queue(const KeyReader& read, const std::string& prefix) {
  QueueConfig q;
  auto tx = read_u32_key(read, prefix + "tx-ring-ref");
  if (!tx) return tx.error();
  auto rx = read_u32_key(read, prefix + "rx-ring-ref");
  if (!rx) return rx.error();
  q.tx_ring_ref = GrantRef{*tx};
  q.rx_ring_ref = GrantRef{*rx};

  const std::string tx_key = prefix + "event-channel-tx";
  const std::string rx_key = prefix + "event-channel-rx";
  const auto raw_tx = read(tx_key);
  const auto raw_rx = read(rx_key);
  if (raw_tx || raw_rx) {
    // Split channels: half a pair is a broken frontend, not a request for a shared channel.
    auto ptx = parse_port(tx_key, raw_tx);
    if (!ptx) return ptx.error();
    auto prx = parse_port(rx_key, raw_rx);
    if (!prx) return prx.error();
    q.evtchn_tx = *ptx;
    q.evtchn_rx = *prx;
  } else {
    const std::string key = prefix + "event-channel";
    auto p = parse_port(key, read(key));
    if (!p) return p.error();
    q.evtchn_tx = q.evtchn_rx = *p;
  }
  return q;
}

}  // namespace

Result<std::uint32_t, KeyError> read_xdp_headroom(const KeyReader& read) {
  constexpr std::string_view kKey = "xdp-headroom";
  const auto raw = read(kKey);
  if (!raw) return 0U;  // a frontend without XDP (or predating it) wants none
  const auto v = hv::parse_xs_uint<std::uint32_t>(*raw);
  if (!v) return KeyError{std::string(kKey), "not an unsigned 32-bit decimal", EINVAL};
  if (*v > kMaxXdpHeadroom)
    return KeyError{std::string(kKey), "above XEN_NETIF_MAX_XDP_HEADROOM (32767)", EINVAL};
  if (*v >= 4096)
    return KeyError{std::string(kKey), "leaves no room for data in a 4096-byte buffer", EINVAL};
  return *v;
}

Result<FrontendConfig, KeyError> parse_frontend_config(const KeyReader& read,
                                                       const FrontendLimits& limits) {
  FrontendConfig cfg;

  // Linux read_xenbus_vif_flags(): absent means 0, and 0 means the frontend wants flipping,
  // which no backend has done for a decade.
  {
    const auto raw = read("request-rx-copy");
    if (!raw || *raw == "0")
      return KeyError{"request-rx-copy", "frontend does not support rx-copy", EOPNOTSUPP};
    if (*raw != "1") return KeyError{"request-rx-copy", "not a boolean (\"0\" or \"1\")", EINVAL};
    cfg.rx_copy = true;
  }

  struct BoolKey {
    std::string_view key;
    bool absent;
    bool FrontendConfig::*field;
    bool invert;
  };
  // Defaults from netif.h: IPv4 checksum offload is on unless refused, IPv6's is off unless
  // offered; the rest are off unless offered.
  static constexpr BoolKey kBoolKeys[] = {
      {"feature-rx-notify", false, &FrontendConfig::rx_notify, false},
      {"feature-sg", false, &FrontendConfig::sg, false},
      {"feature-gso-tcpv4", false, &FrontendConfig::gso_tcpv4, false},
      {"feature-gso-tcpv6", false, &FrontendConfig::gso_tcpv6, false},
      {"feature-no-csum-offload", false, &FrontendConfig::csum_ipv4, true},
      {"feature-ipv6-csum-offload", false, &FrontendConfig::csum_ipv6, false},
      {"request-multicast-control", false, &FrontendConfig::multicast_control, false},
  };
  for (const BoolKey& k : kBoolKeys) {
    auto v = read_bool_key(read, k.key, k.absent);
    if (!v) return v.error();
    cfg.*k.field = k.invert ? !*v : *v;
  }

  auto headroom = read_xdp_headroom(read);
  if (!headroom) return headroom.error();
  cfg.xdp_headroom = *headroom;

  auto n = read_num_queues(read, limits.max_queues == 0 ? 1 : limits.max_queues);
  if (!n) return n.error();
  cfg.queues.reserve(*n);
  for (std::uint32_t i = 0; i < *n; ++i) {
    // netif.h: per-queue keys live under queue-N/ only when there is more than one queue.
    const std::string prefix = *n == 1 ? std::string() : "queue-" + std::to_string(i) + "/";
    auto q = read_queue(read, prefix);
    if (!q) return q.error();
    cfg.queues.push_back(*q);
  }

  if (const auto raw_ref = limits.ctrl_ring ? read("ctrl-ring-ref") : std::nullopt) {
    const auto ref = hv::parse_xs_uint<std::uint32_t>(*raw_ref);
    if (!ref) return KeyError{"ctrl-ring-ref", "not an unsigned 32-bit decimal", EINVAL};
    auto port = parse_port("event-channel-ctrl", read("event-channel-ctrl"));
    if (!port) return port.error();
    cfg.ctrl = CtrlRingConfig{GrantRef{*ref}, *port};
  }
  return cfg;
}

}  // namespace unetback::xenbus
