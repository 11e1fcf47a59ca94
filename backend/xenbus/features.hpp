// The backend's feature advertisement: the keys written to the backend directory at probe,
// before InitWait, which netfront reads when it sees InitWait (Linux netback's xenbus.c,
// netif.h's feature keys, Linux netfront's talk_to_netback).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "common/hv/xenstore.hpp"

namespace unetback::xenbus {

struct FeatureOptions {
  std::uint32_t max_queues = 1;      // multi-queue-max-queues (>= 1)
  bool split_event_channels = true;  // feature-split-event-channels
  bool ctrl_ring = false;            // feature-ctrl-ring, only when the vif layer serves it
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

/// The keys and values to write, relative to the backend directory, in a fixed order.
[[nodiscard]] KeyValues feature_advertisement(const FeatureOptions& opts);

/// Writes the advertisement under `backend_path` in one transaction, retried on EAGAIN.
std::error_code write_features(hv::XenStore& xs, std::string_view backend_path,
                               const FeatureOptions& opts);

}  // namespace unetback::xenbus
