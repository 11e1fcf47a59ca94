#include "tools/xl/vif_option.hpp"

#include <charconv>
#include <limits>
#include <vector>

#include "common/net/frame.hpp"
#include "common/net/tap_device.hpp"
#include "common/util/parse_decimal.hpp"
#include "tools/xl/rate.hpp"

namespace unetback::toolstack {
namespace {

std::vector<std::string> split_items(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    out.emplace_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool parse_u32(std::string_view s, std::uint32_t& out) {
  const auto v = parse_decimal<std::uint32_t>(s, 0, std::numeric_limits<std::uint32_t>::max());
  if (v) out = *v;
  return v.has_value();
}

constexpr std::uint32_t kMaxDevid = 255;
constexpr std::uint32_t kMinMtu = 68, kMaxMtu = 65535;
constexpr std::string_view kDevidRule = "devid must be 0..255";
constexpr std::string_view kMtuRule = "mtu must be 68..65535";

}  // namespace

std::optional<std::string> vif_spec_error(const VifSpec& spec) {
  if (spec.devid.value() > kMaxDevid) return std::string(kDevidRule);
  if (!net::parse_mac(spec.mac)) return "mac must be xx:xx:xx:xx:xx:xx";
  if (spec.script.empty()) return "empty script";
  if (spec.rate) {
    auto r = parse_vif_rate(*spec.rate);
    if (!r) return "rate=" + *spec.rate + ": " + vif_rate_error_text(r.error());
  }
  if (spec.vifname && !net::valid_ifname(*spec.vifname))
    return "invalid vifname '" + *spec.vifname + "'";
  if (spec.mtu && (*spec.mtu < kMinMtu || *spec.mtu > kMaxMtu)) return std::string(kMtuRule);
  if (spec.ip && spec.ip->empty()) return "empty ip";
  if (spec.gatewaydev && !net::valid_ifname(*spec.gatewaydev))
    return "invalid gatewaydev '" + *spec.gatewaydev + "'";
  return std::nullopt;
}

std::variant<VifSpec, VifOptionError> parse_vif_option(std::string_view text, DevId default_devid) {
  VifSpec spec;
  spec.devid = default_devid;
  auto fail = [&](const std::string& why) {
    return VifOptionError{"--vif '" + std::string(text) + "': " + why};
  };
  std::vector<std::string> items = split_items(text);
  // libxl's raw rate "<bytes>,<usecs>" contains the list separator: a bare number right
  // after rate= belongs to it.
  for (std::size_t i = 0; i + 1 < items.size(); ++i) {
    if (items[i].starts_with("rate=") && items[i + 1].find('=') == std::string::npos &&
        !items[i + 1].empty()) {
      items[i] += "," + items[i + 1];
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    }
  }
  // The keys' syntax here; what a value may be is vif_spec_error's, after the last key.
  for (const std::string& item : items) {
    if (item.empty()) continue;  // "mac=…," is fine for xl too
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) return fail("'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    if (key == "mac") {
      spec.mac = value;
    } else if (key == "bridge") {
      spec.bridge = value;
    } else if (key == "script") {
      spec.script = value;
    } else if (key == "rate") {
      // xl's syntax becomes libxl's "<bytes>,<usecs>" here, the form a vif keeps.
      auto r = parse_vif_rate(value);
      if (!r) return fail("rate=" + value + ": " + vif_rate_error_text(r.error()));
      spec.rate = format_vif_rate(*r);
    } else if (key == "vifname") {
      spec.vifname = value;
    } else if (key == "mtu") {
      std::uint32_t mtu = 0;
      if (!parse_u32(value, mtu)) return fail(std::string(kMtuRule));
      spec.mtu = mtu;
    } else if (key == "ip") {
      spec.ip = value;
    } else if (key == "gatewaydev") {
      spec.gatewaydev = value;
    } else if (key == "devid") {
      std::uint32_t d = 0;
      if (!parse_u32(value, d)) return fail(std::string(kDevidRule));
      spec.devid = DevId{d};
    } else if (key == "backend") {
      if (value.empty()) return fail("empty backend (a domain name or domid)");
      spec.backend = value;
    } else if (key == "trusted") {
      if (value != "0" && value != "1") return fail("trusted must be 0 or 1");
      spec.trusted = value == "1";
    } else {
      return fail("unknown key '" + key + "'");
    }
  }
  if (auto why = vif_spec_error(spec)) return fail(*why);
  return spec;
}

}  // namespace unetback::toolstack
