#include "frontend-shim/shim_options.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <utility>

#include "common/net/tap_device.hpp"
#include "common/util/arg_parser.hpp"
#include "common/util/parse_decimal.hpp"
#include "frontend-shim/netfront_types.hpp"

namespace unetback::shim {

bool valid_netns_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  return name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

bool valid_cidr(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash > 45) return false;
  const std::string addr(text.substr(0, slash));
  const std::string_view prefix = text.substr(slash + 1);
  in6_addr buf{};
  if (::inet_pton(AF_INET, addr.c_str(), &buf) == 1)
    return parse_decimal<std::uint32_t>(prefix, 0, 32).has_value();
  if (::inet_pton(AF_INET6, addr.c_str(), &buf) == 1)
    return parse_decimal<std::uint32_t>(prefix, 0, 128).has_value();
  return false;
}

ParseOutcome parse_shim_options(std::span<const std::string_view> args) {
  static constexpr cli::OptionSpec kOptions[] = {cli::kHelp,
                                                 cli::flag("no-sg"),
                                                 cli::flag("rss"),
                                                 cli::valued("hypervisor"),
                                                 cli::valued("domid"),
                                                 cli::valued("name"),
                                                 cli::valued("devid"),
                                                 cli::valued("tap"),
                                                 cli::valued("netns"),
                                                 cli::valued("address"),
                                                 cli::valued("mtu"),
                                                 cli::valued("queues"),
                                                 cli::valued("rx-budget"),
                                                 cli::valued("rx-rate"),
                                                 cli::valued("connect-timeout-ms"),
                                                 cli::valued("log-level"),
                                                 cli::valued("rx-refill"),
                                                 cli::valued("tx-frags"),
                                                 cli::valued("rss-mapping-file"),
                                                 cli::valued("mode"),
                                                 cli::valued("xdp-headroom"),
                                                 cli::valued("xdp-headroom-file"),
                                                 cli::valued("resume-file")};
  ShimOptions o;
  bool have_hypervisor = false, have_name = false, have_timeout = false;
  cli::ArgParser parser(args, kOptions, {.positionals = false});
  while (const auto a = parser.next()) {
    if (a->is("help")) return HelpRequested{};
    const std::string_view value = a->value;
    auto bad = [&] { return UsageError{a->bad_value()}; };
    if (a->is("no-sg")) {
      o.sg = false;
    } else if (a->is("rss")) {
      o.rss = true;
    } else if (a->is("hypervisor")) {
      auto v = hv::parse_hypervisor_spec(value);
      if (!v) return bad();
      o.hypervisor = std::move(*v);
      have_hypervisor = true;
    } else if (a->is("domid")) {
      // A reserved id names no domain; dom0 is never a guest here.
      auto v = parse_decimal<std::uint16_t>(value, 1, kFirstReservedDomId.value() - 1);
      if (!v) return bad();
      o.domid = DomId{*v};
    } else if (a->is("name")) {
      if (value.empty() || value.size() > 64) return bad();
      o.name = value;
      have_name = true;
    } else if (a->is("devid")) {
      auto v = parse_decimal<std::uint32_t>(value, 0, 0xFFFF);
      if (!v) return bad();
      o.devid = DevId{*v};
    } else if (a->is("tap")) {
      if (!net::valid_ifname(value)) return bad();
      o.tap = value;
    } else if (a->is("netns")) {
      if (!valid_netns_name(value)) return bad();
      o.netns = std::string(value);
    } else if (a->is("address")) {
      if (!valid_cidr(value)) return bad();
      o.address = std::string(value);
    } else if (a->is("mtu")) {
      auto v = parse_decimal<std::uint32_t>(value, 68, 65535);
      if (!v) return bad();
      o.mtu = *v;
    } else if (a->is("queues")) {
      auto v = parse_decimal<std::uint32_t>(value, 1, 64);
      if (!v) return bad();
      o.queues = *v;
    } else if (a->is("rx-budget")) {
      auto v = parse_decimal<std::uint32_t>(value, 1, 256);
      if (!v) return bad();
      o.rx_budget = *v;
    } else if (a->is("rx-rate")) {
      auto v = parse_decimal<std::uint32_t>(value, 1, 100'000'000);
      if (!v) return bad();
      o.rx_rate = *v;
    } else if (a->is("rx-refill")) {
      auto v = netfront::parse_rx_refill_rule(value);
      if (!v) return bad();
      o.rx_refill = *v;
    } else if (a->is("tx-frags")) {
      auto v = parse_decimal<std::uint32_t>(value, kTxFragMin, kTxFragMax);
      if (!v) return bad();
      o.tx_frags = *v;
    } else if (a->is("rss-mapping-file")) {
      if (value.empty() || value.size() > 4096) return bad();
      o.rss_mapping_file = std::string(value);
      o.rss = true;
    } else if (a->is("xdp-headroom")) {
      auto v = parse_xdp_headroom(value);
      if (!v || value.find_first_of(" \t\r\n") != std::string_view::npos) return bad();
      o.xdp_headroom = *v;
    } else if (a->is("xdp-headroom-file")) {
      if (value.empty() || value.size() > 4096) return bad();
      o.xdp_headroom_file = std::string(value);
    } else if (a->is("resume-file")) {
      if (value.empty() || value.size() > 4096) return bad();
      o.resume_file = std::string(value);
    } else if (a->is("connect-timeout-ms")) {
      auto v = parse_decimal<std::uint32_t>(value, 1, 3'600'000);
      if (!v) return bad();
      o.connect_timeout_ms = *v;
      have_timeout = true;
    } else if (a->is("mode")) {
      auto v = parse_frontend_mode(value);
      if (!v) return bad();
      o.mode = *v;
    } else if (a->is("log-level")) {
      auto v = log::parse_level(value);
      if (!v) return bad();
      o.log_level = *v;
    }
  }
  if (const auto& e = parser.error()) return UsageError{e->message()};
  if (!have_hypervisor) return UsageError{"--hypervisor is required"};
  if (o.domid && have_name) return UsageError{"--domid and --name are exclusive"};
  // Linux netfront: without SG the MTU is at most ETH_DATA_LEN (xen-netfront.c).
  if (!o.sg && o.mtu > 1500)
    return UsageError{"--mtu above 1500 needs scatter-gather (drop --no-sg)"};
  // A slot chain is a multi-slot packet: without feature-sg the backend takes one slot only.
  if (!o.sg && o.tx_frags) return UsageError{"--tx-frags needs scatter-gather (drop --no-sg)"};
  const ModeRules rules = mode_rules(o.mode);
  const std::string mode = "--mode " + std::string(frontend_mode_name(o.mode));
  if (!rules.sg_allowed) {
    // Mini-OS: no feature-sg, so single-slot packets and a 1500-byte MTU at most.
    if (o.mtu > 1500) return UsageError{"--mtu above 1500 needs scatter-gather, not " + mode};
    if (o.tx_frags) return UsageError{"--tx-frags needs scatter-gather, not " + mode};
    o.sg = false;
  }
  if (!rules.multi_queue && o.queues > 1) return UsageError{"--queues above 1 is not " + mode};
  if (!rules.feature_keys && o.rss) return UsageError{"--rss needs a control ring, not " + mode};
  if (!have_timeout) o.connect_timeout_ms = static_cast<std::uint32_t>(rules.state_wait.count());
  return o;
}

std::optional<std::vector<std::uint32_t>> parse_rss_mapping(std::string_view text,
                                                            std::uint32_t queues) {
  std::vector<std::uint32_t> out;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
    if (j == i) return std::nullopt;  // not a number
    const auto v = parse_decimal<std::uint32_t>(text.substr(i, j - i), 0, queues - 1);
    if (!v || out.size() == 128) return std::nullopt;
    out.push_back(*v);
    i = j;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<std::uint32_t> parse_xdp_headroom(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return std::nullopt;
  const auto last = text.find_last_not_of(" \t\r\n");
  return parse_decimal<std::uint32_t>(text.substr(first, last - first + 1), 0,
                                      netfront::kMaxXdpHeadroom);
}

std::string shim_usage() {
  return R"(usage: netfront-shim --hypervisor sim:<dir>|xen [--domid N | --name NAME] [--devid 0]
                     [--tap eth0] [--netns NAME] [--address 10.0.0.2/24] [--mtu 1500]
                     [--queues N] [--no-sg] [--rx-budget 64] [--rx-rate PPS]
                     [--rx-refill early|half-ring] [--tx-frags SIZE]
                     [--rss] [--rss-mapping-file PATH] [--mode linux|xenvif|minimal]
                     [--xdp-headroom N] [--xdp-headroom-file PATH] [--resume-file PATH]
                     [--connect-timeout-ms 10000] [--log-level debug|info|warn|error]

A userspace Xen netfront acting as a guest domain: connects device/vif/<devid> to its
backend and bridges it to a TAP interface (with virtio-net offload headers).

  --hypervisor SPEC        "xen", or "sim:<world dir>" for xensim
  --domid N                claim domain N (created by the toolstack)
  --name NAME              register a fresh xensim domain called NAME (default netfront-shim)
  --devid N                the vif's device id (default 0)
  --tap NAME               the guest-side TAP interface (default eth0)
  --netns NAME             create the TAP in network namespace /run/netns/NAME
  --address CIDR           add this address to the TAP
  --mtu N                  the TAP's MTU (default 1500; at most 1500 with --no-sg)
  --queues N               queues to request (capped by the backend's maximum)
  --no-sg                  do not use scatter-gather (and so no TSO)
  --rx-budget N            RX packets per poll (NAPI budget, 1..256, default 64)
  --rx-rate PPS            take at most PPS packets per second off the RX ring (slow guest)
  --rx-refill RULE         when to re-post RX buffers: "early" (default, seed 002: once more
                           than min(rx-budget, ring)/2 are free) or "half-ring" (the old
                           virtio-net rule: once more than half the ring is free)
  --tx-frags SIZE          send each TX frame as a Linux-like slot chain: one slot with the
                           L2-L4 headers, then SIZE-byte payload pieces (64..4096), each at an
                           odd offset in its own page; a frame needing more than 18 slots goes
                           out in the normal layout (counted as tx_frags_fallback)
  --rss                    drive the control ring as win-xenvif does, when the backend offers
                           feature-ctrl-ring: SET_HASH_ALGORITHM (Toeplitz),
                           SET_HASH_MAPPING_SIZE, SET_HASH_MAPPING, SET_HASH_KEY (Microsoft's
                           40-byte RSS key), SET_HASH_FLAGS (IPv4/IPv6, with and without TCP),
                           one request at a time, each answered or given up within 5 s
                           while traffic flows; the "ready" line follows the sequence's end
                           (a failure is logged). Without a file the table has 128 entries,
                           entry i naming queue i % queues
  --rss-mapping-file PATH  (implies --rss) the mapping table: 1..128 queue numbers separated
                           by whitespace or commas. The file is re-read whenever its contents
                           change (checked every 200 ms) and the new table sent while traffic
                           runs (SET_HASH_MAPPING_SIZE if the size changed, SET_HASH_MAPPING);
                           an unreadable or bad file is logged and the table in use kept
  --mode MODE              the frontend to play: "linux" (default, Linux xen-netfront),
                           "xenvif" (the Windows PV drivers: multi-queue-num-queues always,
                           also 1; every RX response checked to sit in its request's slot
                           and every GSO packet to carry csum_blank and data_validated, a
                           violation counted and logged as a backend protocol error; a HASH
                           extra on every TCP/IP frame, the TAP's multicast list sent as
                           MCAST_ADD/DEL extras, TX frames as slot chains of up to 18 slots
                           in 4000-byte pieces; 120 s for each backend state) or "minimal"
                           (Mini-OS: only the ring refs, the event channel, request-rx-copy
                           and state 4, in one transaction; no feature-rx-notify, so RX
                           refills are never kicked; no feature-sg; one queue)
  --connect-timeout-ms N   give up if not connected within N ms (default 10000; with
                           --mode xenvif the limit for each backend state, default 120000)
  --xdp-headroom N         ask the backend, when it offers feature-xdp-headroom, to leave N
                           bytes (0..32767, default 0) before each received packet in its
                           first buffer, as Linux netfront does (256) with an XDP program
  --xdp-headroom-file PATH the headroom, as one decimal in a file re-read every 200 ms (at
                           connect it wins over --xdp-headroom); a change while connected
                           goes as Linux netfront's does: frontend state Reconfiguring (7),
                           the new xdp-headroom, wait up to 5 s for the backend's
                           Reconfigured (8), Connected (4) again. An unreadable or bad file is
                           logged and the headroom in use kept
  --resume-file PATH       honour the toolstack's control/shutdown=suspend (save, migrate):
                           acknowledge it (""), stop the data path and say nothing to the
                           backend; once the toolstack has removed the vif, let the domain go
                           (the TAP and its addresses stay). On SIGUSR1, read "domid N" from
                           PATH, claim domain N and connect its vif as Linux netfront's
                           netfront_resume does: fresh rings and grants, the queue count
                           negotiated again, a gratuitous ARP once the backend is Connected.
                           Without this option a suspend request is refused (not acknowledged)
  --log-level LEVEL        stderr log level (default info)

On stopping it logs its counters (a "stopped:" line), among them rx_protocol_errors (RX
responses out of their slot or GSO packets without both checksum flags, --mode xenvif),
rx_slot_checked and rx_gso_checked (what those checks looked at).

On connection it prints one line to stdout:
  netfront-shim ready domid=N devid=D tap=NAME queues=Q
It reconnects when the backend closes and comes back to InitWait.
SIGTERM/SIGINT disconnect cleanly (frontend state 6, grants revoked).

Exit codes: 0 clean stop, 1 setup failure (hypervisor, connect timeout, TAP, address),
            2 usage error, 3 the xenstore connection broke (xenstored or the xensim
            world went away).
)";
}

}  // namespace unetback::shim
