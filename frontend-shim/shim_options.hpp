// ShimOptions: the netfront-shim command line, parsed strictly (no exceptions, no atoi):
// every number is range-checked, every name validated before it reaches a syscall.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/hv/hypervisor_spec.hpp"
#include "common/util/log.hpp"
#include "common/util/strong_id.hpp"
#include "frontend-shim/frontend_mode.hpp"
#include "frontend-shim/rx_refill.hpp"

namespace unetback::shim {

/// Exit codes (documented in --help): scripts tell a clean stop from a failed start.
inline constexpr int kExitClean = 0;
inline constexpr int kExitSetupFailure = 1;
inline constexpr int kExitUsage = 2;
/// The connection to xenstore broke (xenstored or the xensim world went away): without it the
/// guest can neither see its backend nor reconnect, so it stops instead of spinning.
inline constexpr int kExitXenstoreLost = 3;

/// --tx-frags bounds: a piece is at least a cache line and at most a page.
inline constexpr std::uint32_t kTxFragMin = 64;
inline constexpr std::uint32_t kTxFragMax = 4096;

struct ShimOptions {
  hv::HypervisorSpec hypervisor;       ///< --hypervisor xen or sim:<dir>
  std::optional<DomId> domid;          ///< claim this domain (created by the toolstack)
  std::string name = "netfront-shim";  ///< or register a fresh domain with this name
  DevId devid{0};
  std::string tap = "eth0";
  std::optional<std::string> netns;    ///< /run/netns/<netns>
  std::optional<std::string> address;  ///< CIDR, e.g. 10.0.0.2/24
  std::uint32_t mtu = 1500;
  std::uint32_t queues = 1;
  bool sg = true;
  std::uint32_t rx_budget = 64;
  std::optional<std::uint32_t> rx_rate;  ///< RX packets per second the guest takes
  /// When to re-post RX buffers: seed 002's rule (early) or the old half-ring rule.
  netfront::RxRefillRule rx_refill = netfront::RxRefillRule::early;
  /// Send every TX frame as a Linux-like slot chain: a header slot, then payload pieces of
  /// this many bytes at odd page offsets (kTxFragMin..kTxFragMax; needs SG).
  std::optional<std::uint32_t> tx_frags;
  /// Without --connect-timeout-ms: the mode's state wait (10 s for the whole connect; xenvif
  /// 120 s for each backend state).
  std::uint32_t connect_timeout_ms = 10000;
  /// Which frontend to play (--mode); its rules are mode_rules(mode).
  FrontendMode mode = FrontendMode::linux_netfront;
  log::Level log_level = log::Level::info;
  /// Drive the control ring as win-xenvif does (Toeplitz, a 40-byte key, all four hash
  /// types, a mapping table) when the backend offers feature-ctrl-ring.
  bool rss = false;
  /// The mapping table, re-read while the shim runs (implies rss); else entry i = i % queues
  /// of a 128-entry table.
  std::optional<std::string> rss_mapping_file;
  /// xdp-headroom to ask for at connect (0..32767), when the backend offers it.
  std::uint32_t xdp_headroom = 0;
  /// A file holding the xdp-headroom, re-read while the shim runs: a change while connected
  /// goes through Reconfiguring (7) -> backend Reconfigured (8) -> Connected (4), as Linux
  /// netfront's xennet_xdp_set does when an XDP program is attached or detached.
  std::optional<std::string> xdp_headroom_file;
  /// Where the toolstack leaves the resumed domain's id ("domid N") before it sends SIGUSR1:
  /// with it the shim honours control/shutdown=suspend (xensim save/restore/migrate).
  std::optional<std::string> resume_file;
};

/// An xdp-headroom file's value: one decimal 0..32767, surrounding whitespace allowed.
[[nodiscard]] std::optional<std::uint32_t> parse_xdp_headroom(std::string_view text);

/// A mapping file's table: queue numbers (decimal) separated by whitespace or commas, 1..128
/// of them, each below `queues`. Nothing for anything else (the caller keeps its table).
[[nodiscard]] std::optional<std::vector<std::uint32_t>> parse_rss_mapping(std::string_view text,
                                                                          std::uint32_t queues);

/// --help was asked for.
struct HelpRequested {};
/// A usage error, with the message to print before the usage text.
struct UsageError {
  std::string message;
};

using ParseOutcome = std::variant<ShimOptions, HelpRequested, UsageError>;

/// Parses argv[1..]. Accepts "--opt value" and "--opt=value".
[[nodiscard]] ParseOutcome parse_shim_options(std::span<const std::string_view> args);

/// The --help text (options and exit codes).
[[nodiscard]] std::string shim_usage();

/// A network namespace name as `ip netns` accepts it: 1..255 bytes, no '/', not "." / "..".
[[nodiscard]] bool valid_netns_name(std::string_view name);
/// An IPv4 or IPv6 address with a prefix length ("10.0.0.2/24", "fd00::2/64").
[[nodiscard]] bool valid_cidr(std::string_view text);

}  // namespace unetback::shim
