// Fuzz target: the parsers of xenstore values a guest or toolstack writes — numbers
// (hv::parse_xs_uint: ring refs, event channels, queue counts, domids), MAC addresses and
// interface names (common/net), the netif rate (backend parse_rate, xl parse_vif_rate) and
// the two directory parsers built on them (parse_frontend_config, parse_backend_config).
//
// Each parser is compared with a reference model written from its documented grammar, so
// the property is "accepts exactly the grammar, and yields the value it spells", not just
// "does not crash". The directory parsers read a key map built from the input (known keys
// with valid or hostile values, plus junk keys); the model applies netif.h's rules.
#include <cctype>
#include <cerrno>
#include <fuzzer/FuzzedDataProvider.h>
#include <limits>
#include <map>
#include <string>

#include "backend/xenbus/backend_config.hpp"
#include "backend/xenbus/frontend_config.hpp"
#include "common/hv/xenstore.hpp"
#include "common/net/frame.hpp"
#include "common/net/tap_device.hpp"
#include "fuzz/fuzz_check.hpp"
#include "tools/xl/rate.hpp"
#include "tools/xl/vif_option.hpp"

namespace {

using namespace unetback;
using KeyMap = std::map<std::string, std::string, std::less<>>;

/// Grammar [0-9]{1,20}, value <= max.
std::optional<std::uint64_t> model_uint(std::string_view s, std::uint64_t max) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  unsigned __int128 v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) return std::nullopt;
  return static_cast<std::uint64_t>(v);
}

template <typename T>
void check_uint(std::string_view s) {
  const auto got = hv::parse_xs_uint<T>(s);
  const auto want = model_uint(s, std::numeric_limits<T>::max());
  FUZZ_CHECK(got.has_value() == want.has_value());
  if (got) FUZZ_CHECK(*got == *want);
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// xx:xx:xx:xx:xx:xx, hex digits of either case.
std::optional<net::MacAddress> model_mac(std::string_view s) {
  if (s.size() != 17) return std::nullopt;
  net::MacAddress m;
  for (std::size_t i = 0; i < 6; ++i) {
    const int hi = hex(s[3 * i]), lo = hex(s[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':')) return std::nullopt;
    m.octets[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return m;
}

void check_scalars(std::string_view s) {
  check_uint<std::uint8_t>(s);
  check_uint<std::uint16_t>(s);
  check_uint<std::uint32_t>(s);
  check_uint<std::uint64_t>(s);

  const auto mac = net::parse_mac(s);
  const auto want_mac = model_mac(s);
  FUZZ_CHECK(mac.has_value() == want_mac.has_value());
  if (mac) {
    FUZZ_CHECK(*mac == *want_mac);
    FUZZ_CHECK(net::parse_mac(net::format_mac(*mac)).value() == *mac);  // round trip
  }

  // An accepted interface name fits ifr_name with its NUL and cannot name a path.
  if (net::valid_ifname(s)) {
    FUZZ_CHECK(!s.empty() && s.size() < 16);
    FUZZ_CHECK(s != "." && s != "..");
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      FUZZ_CHECK(u >= 0x21 && u != 0x7F && c != '/' && c != ':' && c != '%');
    }
  }

  // Backend B:rate: <u64>,<u64> and nothing else.
  const auto rate = xenbus::parse_rate(s);
  const auto comma = s.find(',');
  std::optional<xenbus::Rate> want_rate;
  if (comma != std::string_view::npos) {
    const auto b = model_uint(s.substr(0, comma), ~std::uint64_t{0});
    const auto u = model_uint(s.substr(comma + 1), ~std::uint64_t{0});
    if (b && u) want_rate = xenbus::Rate{*b, *u};
  }
  FUZZ_CHECK(rate.has_value() == want_rate.has_value());
  if (rate) FUZZ_CHECK(*rate == *want_rate);

  // xl's rate=: whatever the toolstack accepts, it writes a B:rate the backend reads back
  // as the same numbers (the contract between unetback-xl and unetbackd), and the
  // interval is never zero.
  if (const auto xl = toolstack::parse_vif_rate(s)) {
    FUZZ_CHECK(xl->interval_usecs != 0 && xl->bytes_per_interval != 0);
    const auto back = xenbus::parse_rate(toolstack::format_vif_rate(*xl));
    FUZZ_CHECK(back.has_value());
    FUZZ_CHECK(back->bytes == xl->bytes_per_interval && back->usecs == xl->interval_usecs);
    FUZZ_CHECK(!back->unlimited());
  } else {
    FUZZ_CHECK(xl.error() == std::errc::invalid_argument ||
               xl.error() == std::errc::value_too_large ||
               xl.error() == std::errc::result_out_of_range);
  }
  (void)toolstack::parse_vif_option(s, DevId{0});
}

// --- directory parsers ------------------------------------------------------------------

std::optional<std::string> lookup(const KeyMap& m, std::string_view k) {
  const auto it = m.find(k);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

/// netif.h's frontend rules (frontend_config.hpp), independently: nullopt = refused.
std::optional<xenbus::FrontendConfig> model_frontend(const KeyMap& m,
                                                     const xenbus::FrontendLimits& lim) {
  xenbus::FrontendConfig c;
  if (lookup(m, "request-rx-copy") != "1") return std::nullopt;
  auto boolean = [&](std::string_view k, bool& field, bool invert) {
    const auto v = lookup(m, k);
    if (!v) {
      field = invert;  // absent = 0
      return true;
    }
    if (*v != "0" && *v != "1") return false;
    field = (*v == "1") != invert;
    return true;
  };
  if (!boolean("feature-rx-notify", c.rx_notify, false) || !boolean("feature-sg", c.sg, false) ||
      !boolean("feature-gso-tcpv4", c.gso_tcpv4, false) ||
      !boolean("feature-gso-tcpv6", c.gso_tcpv6, false) ||
      !boolean("feature-no-csum-offload", c.csum_ipv4, true) ||
      !boolean("feature-ipv6-csum-offload", c.csum_ipv6, false) ||
      !boolean("request-multicast-control", c.multicast_control, false))
    return std::nullopt;
  std::uint64_t n = 1;
  if (const auto v = lookup(m, "multi-queue-num-queues")) {
    const auto p = model_uint(*v, 0xFFFF'FFFF);
    if (!p || *p == 0 || *p > std::max<std::uint32_t>(lim.max_queues, 1)) return std::nullopt;
    n = *p;
  }
  auto port = [&](const std::string& k) -> std::optional<Port> {
    const auto v = lookup(m, k);
    if (!v) return std::nullopt;
    const auto p = model_uint(*v, 0xFFFF'FFFF);
    if (!p || *p == 0) return std::nullopt;
    return Port{static_cast<std::uint32_t>(*p)};
  };
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::string pre = n == 1 ? "" : "queue-" + std::to_string(i) + "/";
    const auto tx = lookup(m, pre + "tx-ring-ref");
    const auto rx = lookup(m, pre + "rx-ring-ref");
    const auto txr = tx ? model_uint(*tx, 0xFFFF'FFFF) : std::nullopt;
    const auto rxr = rx ? model_uint(*rx, 0xFFFF'FFFF) : std::nullopt;
    if (!txr || !rxr) return std::nullopt;
    xenbus::QueueConfig q;
    q.tx_ring_ref = GrantRef{static_cast<std::uint32_t>(*txr)};
    q.rx_ring_ref = GrantRef{static_cast<std::uint32_t>(*rxr)};
    if (lookup(m, pre + "event-channel-tx") || lookup(m, pre + "event-channel-rx")) {
      const auto a = port(pre + "event-channel-tx"), b = port(pre + "event-channel-rx");
      if (!a || !b) return std::nullopt;
      q.evtchn_tx = *a;
      q.evtchn_rx = *b;
    } else {
      const auto p = port(pre + "event-channel");
      if (!p) return std::nullopt;
      q.evtchn_tx = q.evtchn_rx = *p;
    }
    c.queues.push_back(q);
  }
  if (lim.ctrl_ring) {
    if (const auto r = lookup(m, "ctrl-ring-ref")) {
      const auto ref = model_uint(*r, 0xFFFF'FFFF);
      const auto p = port("event-channel-ctrl");
      if (!ref || !p) return std::nullopt;
      c.ctrl = xenbus::CtrlRingConfig{GrantRef{static_cast<std::uint32_t>(*ref)}, *p};
    }
  }
  return c;
}

std::string pick_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0: return "0";
    case 1: return "1";
    case 2: return std::to_string(in.ConsumeIntegral<std::uint32_t>());
    case 3: return std::to_string(in.ConsumeIntegralInRange<std::uint32_t>(1, 8));
    default: return in.ConsumeRandomLengthString(24);
  }
}

constexpr std::string_view kFrontendKeys[] = {
    "request-rx-copy",
    "feature-rx-notify",
    "feature-sg",
    "feature-gso-tcpv4",
    "feature-gso-tcpv6",
    "feature-no-csum-offload",
    "feature-ipv6-csum-offload",
    "request-multicast-control",
    "multi-queue-num-queues",
    "tx-ring-ref",
    "rx-ring-ref",
    "event-channel",
    "event-channel-tx",
    "event-channel-rx",
    "ctrl-ring-ref",
    "event-channel-ctrl",
};
constexpr std::string_view kQueueKeys[] = {"tx-ring-ref", "rx-ring-ref", "event-channel",
                                           "event-channel-tx", "event-channel-rx"};

void check_frontend(FuzzedDataProvider& in) {
  KeyMap m;
  // Usually a well-formed start, so the fuzzer reaches the later rules.
  if (in.ConsumeBool()) {
    m["request-rx-copy"] = "1";
    m["tx-ring-ref"] = "8";
    m["rx-ring-ref"] = "9";
    m["event-channel"] = "5";
  }
  const auto nr = in.ConsumeIntegralInRange(0, 24);
  for (int i = 0; i < nr; ++i) {
    std::string key;
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:
      case 1: key = std::string(in.PickValueInArray(kFrontendKeys)); break;
      case 2:
        key = "queue-" + std::to_string(in.ConsumeIntegralInRange(0, 9)) + "/" +
              std::string(in.PickValueInArray(kQueueKeys));
        break;
      default: key = in.ConsumeRandomLengthString(32); break;
    }
    if (in.ConsumeProbability<float>() < 0.1f)
      m.erase(key);
    else
      m[key] = pick_value(in);
  }
  xenbus::FrontendLimits lim;
  lim.max_queues = in.ConsumeIntegralInRange<std::uint32_t>(0, 8);
  lim.ctrl_ring = in.ConsumeBool();

  std::map<std::string, int> reads;
  const xenbus::KeyReader read = [&](std::string_view k) {
    ++reads[std::string(k)];
    return lookup(m, k);
  };
  const auto got = xenbus::parse_frontend_config(read, lim);
  const auto want = model_frontend(m, lim);
  FUZZ_CHECK(got.has_value() == want.has_value());
  if (got) {
    FUZZ_CHECK(*got == *want);
  } else {
    const auto& e = got.error();
    FUZZ_CHECK(e.error == EINVAL || e.error == ENOENT || e.error == EOPNOTSUPP);
    if (e.error == ENOENT) FUZZ_CHECK(!lookup(m, e.key));
    FUZZ_CHECK(!e.key.empty());
  }
  // Each key is read at most once: a frontend rewriting a key between two reads must not
  // make the backend act on a mix of both.
  for (const auto& [k, n] : reads) FUZZ_CHECK(n == 1);
}

void check_backend(FuzzedDataProvider& in) {
  const DomId fe{in.ConsumeIntegral<std::uint16_t>()};
  const DevId dev{in.ConsumeIntegralInRange<std::uint32_t>(0, 300)};
  KeyMap m;
  if (in.ConsumeBool()) {
    m["frontend-id"] = std::to_string(fe.value());
    m["frontend"] = xenbus::frontend_dir_path(fe, dev);
  }
  constexpr std::string_view kKeys[] = {
      "frontend-id", "frontend", "handle", "vifname",
      "mac",         "mtu",      "rate",   xenbus::kAllowMacSpoofingKey};
  const auto nr = in.ConsumeIntegralInRange(0, 10);
  for (int i = 0; i < nr; ++i) m[std::string(in.PickValueInArray(kKeys))] = pick_value(in);
  const xenbus::KeyReader read = [&](std::string_view k) { return lookup(m, k); };
  const auto got = xenbus::parse_backend_config(read, fe, dev);
  // The model: frontend-id and frontend name exactly this vif; the optional keys are
  // well-formed when present.
  bool ok = model_uint(lookup(m, "frontend-id").value_or("x"), 0xFFFF) == fe.value() &&
            lookup(m, "frontend") == xenbus::frontend_dir_path(fe, dev);
  if (const auto h = lookup(m, "handle")) ok = ok && model_uint(*h, 0xFFFF'FFFF) == dev.value();
  if (const auto v = lookup(m, "vifname")) ok = ok && net::valid_ifname(*v);
  if (const auto v = lookup(m, "mac")) ok = ok && model_mac(*v).has_value();
  if (const auto v = lookup(m, "mtu")) {
    const auto mtu = model_uint(*v, 0xFFFF'FFFF);
    ok = ok && mtu && *mtu >= xenbus::kMinMtu && *mtu <= xenbus::kMaxMtu;
  }
  const auto spoof = lookup(m, xenbus::kAllowMacSpoofingKey);
  if (spoof) ok = ok && (*spoof == "0" || *spoof == "1");
  FUZZ_CHECK(got.has_value() == ok);
  if (got) {
    FUZZ_CHECK(got->frontend_id == fe && got->devid == dev);
    FUZZ_CHECK(got->frontend_path == xenbus::frontend_dir_path(fe, dev));
    FUZZ_CHECK(net::valid_ifname(got->tap_name));
    FUZZ_CHECK(got->mac.has_value() == lookup(m, "mac").has_value());
    FUZZ_CHECK(got->mtu.has_value() == lookup(m, "mtu").has_value());
    FUZZ_CHECK(got->allow_mac_spoofing == (spoof == "1"));
  }
  // B:rate is read apart (read_rate): absent = unlimited, else exactly parse_rate with a
  // non-zero byte count.
  const auto r = xenbus::read_rate(read);
  if (const auto v = lookup(m, "rate")) {
    const auto parsed = xenbus::parse_rate(*v);
    FUZZ_CHECK(r.has_value() == (parsed.has_value() && parsed->bytes != 0));
  } else {
    FUZZ_CHECK(r.has_value() && r->unlimited());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange(0, 2)) {
    case 0: check_scalars(in.ConsumeRemainingBytesAsString()); break;
    case 1: check_frontend(in); break;
    case 2: check_backend(in); break;
  }
  return 0;
}
