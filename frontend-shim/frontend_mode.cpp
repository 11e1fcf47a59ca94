#include "frontend-shim/frontend_mode.hpp"

namespace unetback::shim {

std::string_view frontend_mode_name(FrontendMode m) {
  switch (m) {
    case FrontendMode::linux_netfront: return "linux";
    case FrontendMode::xenvif: return "xenvif";
    case FrontendMode::minimal: return "minimal";
  }
  return "?";
}

std::optional<FrontendMode> parse_frontend_mode(std::string_view name) {
  if (name == "linux") return FrontendMode::linux_netfront;
  if (name == "xenvif") return FrontendMode::xenvif;
  if (name == "minimal") return FrontendMode::minimal;
  return std::nullopt;
}

ModeRules mode_rules(FrontendMode m) {
  ModeRules r;
  switch (m) {
    case FrontendMode::linux_netfront: break;
    case FrontendMode::xenvif:
      r.always_num_queues = true;
      r.rx_checks = true;
      r.tx_hash_extras = true;
      r.mcast_extras = true;
      // A 64 KiB TSO frame: its headers in one slot, then 17 pieces of 4000 bytes or less:
      // 18 slots, XEN_NETBK_LEGACY_SLOTS_MAX (win-xenvif bounces anything longer).
      r.tx_chain_piece = 4000;
      // win-xenvif: each state wait has a 120 s total timeout.
      r.state_wait = std::chrono::seconds(120);
      r.per_state_wait = true;
      break;
    case FrontendMode::minimal:
      r.rx_notify = false;
      r.sg_allowed = false;
      r.feature_keys = false;
      r.multi_queue = false;
      r.split_event_channels = false;
      break;
  }
  return r;
}

}  // namespace unetback::shim
