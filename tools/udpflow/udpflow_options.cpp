#include "tools/udpflow/udpflow_options.hpp"

#include <arpa/inet.h>
#include <charconv>
#include <cmath>
#include <netinet/in.h>

#include "common/util/arg_parser.hpp"
#include "common/util/parse_decimal.hpp"

namespace unetback::udpflow {

namespace {

/// The options of each mode, each at most once.
constexpr cli::OptionSpec once(std::string_view name, bool takes_value) {
  return cli::OptionSpec{name, takes_value, {}, true, '\0'};
}
constexpr cli::OptionSpec kSendOpts[] = {cli::kHelp,         once("to", true),
                                         once("size", true), once("seconds", true),
                                         once("pps", true),  once("json", false)};
constexpr cli::OptionSpec kRecvOpts[] = {
    cli::kHelp,         once("port", true),        once("seconds", true),
    once("bind", true), once("from-start", false), once("wait", true),
    once("json", false)};

}  // namespace

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) return std::nullopt;
  const std::string s(text);
  in6_addr buf{};
  if (::inet_pton(AF_INET, s.c_str(), &buf) == 1) return IpAddress{s, false};
  if (::inet_pton(AF_INET6, s.c_str(), &buf) == 1) return IpAddress{s, true};
  return std::nullopt;
}

std::optional<std::pair<IpAddress, std::uint16_t>> parse_endpoint(std::string_view text) {
  std::string_view host, port;
  if (text.starts_with('[')) {
    // RFC 3986 style: an IPv6 literal in brackets, then ':' and the port.
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    auto ip = parse_ip(host);
    if (!ip || !ip->ipv6) return std::nullopt;
    auto p = parse_decimal<std::uint16_t>(port, 1, 65535);
    if (!p) return std::nullopt;
    return std::pair{*ip, *p};
  }
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  host = text.substr(0, colon);
  port = text.substr(colon + 1);
  auto ip = parse_ip(host);
  if (!ip || ip->ipv6) return std::nullopt;  // a bare IPv6 literal needs brackets
  auto p = parse_decimal<std::uint16_t>(port, 1, 65535);
  if (!p) return std::nullopt;
  return std::pair{*ip, *p};
}

std::optional<double> parse_seconds(std::string_view text) {
  if (text.empty() || text.size() > 32) return std::nullopt;
  // Plain decimal only: no sign, exponent, hex, inf or nan.
  for (char c : text)
    if (!((c >= '0' && c <= '9') || c == '.')) return std::nullopt;
  double v = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  if (!std::isfinite(v) || v <= 0 || v > kMaxSeconds) return std::nullopt;
  return v;
}

ParseOutcome parse_udpflow_args(std::span<const std::string_view> args) {
  if (args.empty()) return UsageError{"missing mode (send or recv)"};
  const std::string_view mode = args[0];
  if (mode == "-h" || mode == "--help") return HelpRequested{};
  if (mode != "send" && mode != "recv")
    return UsageError{"unknown mode '" + std::string(mode) + "' (send or recv)"};
  const bool send = mode == "send";
  SendOptions so;
  RecvOptions ro;
  using Options = std::span<const cli::OptionSpec>;
  const Options options = send ? Options(kSendOpts) : Options(kRecvOpts);
  cli::ArgParser parser(args.subspan(1), options, {.positionals = false});
  while (const auto a = parser.next()) {
    if (a->is("help")) return HelpRequested{};
    const std::string_view value = a->value;
    auto bad = [&] { return UsageError{a->bad_value()}; };
    if (a->is("json")) {
      so.json = ro.json = true;
    } else if (a->is("from-start")) {
      ro.from_start = true;
    } else if (a->is("to")) {
      auto ep = parse_endpoint(value);
      if (!ep) return bad();
      so.to = ep->first;
      so.port = ep->second;
    } else if (a->is("size")) {
      auto v = parse_decimal<std::uint32_t>(value, 1, kMaxPayload);
      if (!v) return bad();
      so.size = *v;
    } else if (a->is("seconds")) {
      auto v = parse_seconds(value);
      if (!v) return bad();
      so.seconds = ro.seconds = *v;
    } else if (a->is("pps")) {
      auto v = parse_decimal<std::uint64_t>(value, 1, 100'000'000);
      if (!v) return bad();
      so.pps = *v;
    } else if (a->is("port")) {
      auto v = parse_decimal<std::uint16_t>(value, 1, 65535);
      if (!v) return bad();
      ro.port = *v;
    } else if (a->is("bind")) {
      auto v = parse_ip(value);
      if (!v) return bad();
      ro.bind = *v;
    } else if (a->is("wait")) {
      auto v = parse_seconds(value);
      if (!v) return bad();
      ro.wait = *v;
    }
  }
  if (const auto& e = parser.error()) {
    if (e->kind == cli::ArgError::Kind::unknown_option)
      return UsageError{e->message() + " for " + std::string(mode)};
    return UsageError{e->message()};
  }
  auto require = [&](std::string_view name) -> std::optional<UsageError> {
    if (parser.seen(name)) return std::nullopt;
    return UsageError{"--" + std::string(name) + " is required for " + std::string(mode)};
  };
  if (send) {
    for (std::string_view k : {"to", "size", "seconds"})
      if (auto e = require(k)) return *e;
    return so;
  }
  for (std::string_view k : {"port", "seconds"})
    if (auto e = require(k)) return *e;
  if (ro.from_start && parser.seen("wait"))
    return UsageError{"--wait applies only without --from-start"};
  return ro;
}

std::string udpflow_usage() {
  return R"(usage: unetback-udpflow send --to IP:PORT --size N --seconds S [--pps R] [--json]
       unetback-udpflow recv --port P --seconds S [--bind IP] [--from-start] [--wait S]
                             [--json]

A UDP packet-rate tool (iperf3 cannot send 1-byte payloads).

send: sends N-byte payloads (1..65507) to IP:PORT ("[v6addr]:PORT" for IPv6) for S seconds,
      as fast as the socket takes them, or paced at R packets per second. A payload of 8
      bytes or more starts with a 64-bit big-endian sequence number (from 0). The socket is
      non-blocking: a full socket buffer (EAGAIN) is waited out with poll, a full device
      queue (ENOBUFS) with a short sleep; both are counted.
      Prints: sent=N pps=R bytes=B errors=E eagain=A enobufs=F seconds=S

recv: counts packets and bytes on UDP port P for S seconds, from the first packet (or
      from the start with --from-start). Without --from-start, waits at most --wait
      seconds (default 30) for the first packet. Loss is computed from the sequence numbers
      when every packet carried one (payload >= 8 bytes): lost = highest sequence + 1 -
      distinct sequences seen. socket_drops is the kernel's count of datagrams the socket
      buffer could not take (SO_RXQ_OVFL).
      Prints: received=N pps=R bytes=B lost=L seconds=S duplicates=D reordered=O
              socket_drops=K     (lost= only when sequence numbers were carried)

--json prints one JSON object instead:
  send: {"packets":..,"pps":..,"bytes":..,"seconds":..,"errors":..,"eagain":..,"enobufs":..}
  recv: {"packets":..,"pps":..,"bytes":..,"seconds":..,"lost":..,"duplicates":..,
         "reordered":..,"socket_drops":..}   ("lost" omitted without sequence numbers)

SIGINT/SIGTERM end the run early; the report covers the time actually run.
Exit codes: 0 done, 1 socket error or (recv) no packet within --wait, 2 usage error.
)";
}

}  // namespace unetback::udpflow
