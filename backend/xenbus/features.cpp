#include "backend/xenbus/features.hpp"

namespace unetback::xenbus {

KeyValues feature_advertisement(const FeatureOptions& opts) {
  KeyValues kv = {
      // What the data path implements: scatter-gather, TSO both ways, IPv6 checksum offload.
      {"feature-sg", "1"},
      {"feature-gso-tcpv4", "1"},
      {"feature-gso-tcpv6", "1"},
      {"feature-ipv6-csum-offload", "1"},
      // netfront refuses a backend without rx-copy (-ENODEV); page flipping is long gone.
      {"feature-rx-copy", "1"},
      {"feature-rx-flip", "0"},
      // The guest-RX layout honours F:xdp-headroom, re-read in Reconfiguring (7 -> 8).
      {"feature-xdp-headroom", "1"},
      // request-multicast-control is sampled at connect and watched afterwards.
      {"feature-multicast-control", "1"},
      {"feature-dynamic-multicast-control", "1"},
      {"feature-split-event-channels", opts.split_event_channels ? "1" : "0"},
      // netfront only writes multi-queue-num-queues (and queue-N/) if a max is advertised.
      {"multi-queue-max-queues", std::to_string(opts.max_queues == 0 ? 1 : opts.max_queues)},
  };
  if (opts.ctrl_ring) kv.emplace_back("feature-ctrl-ring", "1");
  return kv;
}

std::error_code write_features(hv::XenStore& xs, std::string_view backend_path,
                               const FeatureOptions& opts) {
  const KeyValues kv = feature_advertisement(opts);
  const std::string base = std::string(backend_path) + "/";
  return hv::transact(xs, [&](hv::XsTx tx) -> std::error_code {
    for (const auto& [key, value] : kv) {
      if (auto ec = xs.write(base + key, value, tx)) return ec;
    }
    return {};
  });
}

}  // namespace unetback::xenbus
