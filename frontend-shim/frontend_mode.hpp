// Which frontend the shim plays (netfront-shim --mode). Backends meet more than Linux's
// xen-netfront (their connect code; docs/design.md, "Frontends"):
//
//  * linux:   Linux xen-netfront (the default; xen-netfront.c).
//  * xenvif:  the Windows PV drivers (win-xenvif): multi-queue-num-queues always written (also
//             1, flat keys then); each RX response must sit in its request's slot and a GSO
//             packet must carry both csum_blank and data_validated (win-xenvif asserts both;
//             here a violation is a counted, logged backend protocol error); TX frames carry
//             a HASH extra and go out as slot chains of up to 18 slots; the guest's multicast
//             list goes to the backend as MCAST_ADD/DEL extras; each backend state is waited
//             for up to 120 s.
//  * minimal: Mini-OS netfront: only tx-ring-ref, rx-ring-ref, event-channel,
//             request-rx-copy and state=4, in one transaction; no feature-rx-notify (and so
//             no kick when RX buffers are re-posted), no feature-sg, one queue.
//
// Pure data: what each mode changes, so the rules are unit-tested in one place.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace unetback::shim {

enum class FrontendMode : std::uint8_t { linux_netfront, xenvif, minimal };

/// "linux" / "xenvif" / "minimal", as --mode spells them.
[[nodiscard]] std::string_view frontend_mode_name(FrontendMode m);
/// The inverse (exact spelling only).
[[nodiscard]] std::optional<FrontendMode> parse_frontend_mode(std::string_view name);

/// What a mode changes against Linux netfront.
struct ModeRules {
  /// multi-queue-num-queues even when the backend advertises no maximum, even for 1 queue.
  bool always_num_queues = false;
  /// feature-rx-notify=1 written and RX refills kicked (else neither).
  bool rx_notify = true;
  /// Scatter-gather (and so TSO) allowed; minimal forces it off.
  bool sg_allowed = true;
  /// The feature-* keys are written at all (Mini-OS writes none).
  bool feature_keys = true;
  /// More than one queue allowed.
  bool multi_queue = true;
  /// Separate TX and RX event channels when the backend offers them (Mini-OS binds one).
  bool split_event_channels = true;
  /// win-xenvif's RX checks: response in its request's slot, GSO with both checksum flags.
  bool rx_checks = false;
  /// A HASH extra on every hashable TX frame.
  bool tx_hash_extras = false;
  /// The guest's multicast list sent as MCAST_ADD/DEL extras (request-multicast-control).
  bool mcast_extras = false;
  /// TX frames sent as slot chains of at most 18 slots with this piece size (0: off).
  std::uint32_t tx_chain_piece = 0;
  /// How long one backend state is waited for when the command line does not say.
  std::chrono::milliseconds state_wait{10000};
  /// Whether state_wait applies per state (re-armed at every backend state change) or to
  /// the whole connect.
  bool per_state_wait = false;
};

[[nodiscard]] ModeRules mode_rules(FrontendMode m);

}  // namespace unetback::shim
