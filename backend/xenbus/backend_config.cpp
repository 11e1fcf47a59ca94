#include "backend/xenbus/backend_config.hpp"

#include <algorithm>
#include <cerrno>

#include "common/hv/xenstore.hpp"
#include "common/net/tap_device.hpp"

namespace unetback::xenbus {
namespace {

std::string dom(DomId d) {
  return std::to_string(d.value());
}

}  // namespace

std::string backend_dir_path(DomId self, DomId frontend, DevId devid) {
  return "/local/domain/" + dom(self) + "/backend/vif/" + dom(frontend) + "/" +
         std::to_string(devid.value());
}

std::string frontend_dir_path(DomId frontend, DevId devid) {
  return "/local/domain/" + dom(frontend) + "/device/vif/" + std::to_string(devid.value());
}

std::string error_node_path(DomId self, DomId frontend, DevId devid) {
  return "/local/domain/" + dom(self) + "/error/backend/vif/" + dom(frontend) + "/" +
         std::to_string(devid.value()) + "/error";
}

std::optional<Rate> parse_rate(std::string_view s) {
  const auto comma = s.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  // parse_xs_uint refuses empty parts, signs, spaces, a second comma and overflow.
  const auto bytes = hv::parse_xs_uint<std::uint64_t>(s.substr(0, comma));
  const auto usecs = hv::parse_xs_uint<std::uint64_t>(s.substr(comma + 1));
  if (!bytes || !usecs) return std::nullopt;
  return Rate{*bytes, *usecs};
}

Result<Rate, KeyError> read_rate(const KeyReader& read) {
  const auto raw = read("rate");
  if (!raw) return Rate{};
  const auto r = parse_rate(*raw);
  if (!r) return KeyError{"rate", "not \"<bytes>,<usecs>\"", EINVAL};
  // Linux takes "0,<usecs>" and never refills: TX stops for good once the first credit is
  // spent (xl writes it for rates that round to zero, e.g. 1Mb/s@1us). Refused here, and
  // the caller treats it as netback treats a rate it cannot parse.
  if (r->bytes == 0)
    return KeyError{"rate", "is 0 bytes per interval: TX would never resume", EINVAL};
  return *r;
}

Result<BackendConfig, KeyError> parse_backend_config(const KeyReader& read, DomId frontend,
                                                     DevId devid) {
  BackendConfig cfg;
  cfg.frontend_id = frontend;
  cfg.devid = devid;

  {
    const auto raw = read("frontend-id");
    if (!raw) return KeyError{"frontend-id", "missing", ENOENT};
    const auto id = hv::parse_xs_uint<std::uint16_t>(*raw);
    if (!id) return KeyError{"frontend-id", "not a domain id", EINVAL};
    if (DomId{*id} != frontend)
      return KeyError{"frontend-id", "names domain " + *raw + ", not " + dom(frontend), EINVAL};
  }
  {
    const auto raw = read("frontend");
    if (!raw) return KeyError{"frontend", "missing", ENOENT};
    const std::string expected = frontend_dir_path(frontend, devid);
    if (*raw != expected)
      return KeyError{"frontend", "is \"" + *raw + "\", not " + expected, EPERM};
    cfg.frontend_path = expected;
  }
  if (const auto raw = read("handle")) {
    const auto h = hv::parse_xs_uint<std::uint32_t>(*raw);
    if (!h || *h != devid.value())
      return KeyError{"handle", "is not the device id " + std::to_string(devid.value()), EINVAL};
  }
  // The name libxl passes to the hotplug script as $vif, vifname or not: as with the kernel
  // netback, the script (vif-common.sh) renames vif<domid>.<devid> to B:vifname itself, and
  // refuses a name that is taken.
  cfg.tap_name = "vif" + dom(frontend) + "." + std::to_string(devid.value());
  if (const auto raw = read("vifname")) {
    if (!net::valid_ifname(*raw)) return KeyError{"vifname", "not a valid interface name", EINVAL};
    cfg.vifname = *raw;
  }
  if (const auto raw = read("mac")) {
    auto mac = net::parse_mac(*raw);
    if (!mac) return KeyError{"mac", "not xx:xx:xx:xx:xx:xx", EINVAL};
    cfg.mac = *mac;
  }
  if (const auto raw = read("mtu")) {
    const auto m = hv::parse_xs_uint<std::uint32_t>(*raw);
    if (!m || *m < kMinMtu || *m > kMaxMtu) {
      return KeyError{"mtu",
                      "not a decimal " + std::to_string(kMinMtu) + ".." + std::to_string(kMaxMtu),
                      EINVAL};
    }
    cfg.mtu = *m;
  }
  if (const auto raw = read("bridge"); raw && raw->starts_with(kSwitchPrefix)) {
    const std::string_view name = std::string_view(*raw).substr(kSwitchPrefix.size());
    if (!valid_switch_name(name))
      return KeyError{"bridge", "unetback:<name> needs a name of 1..32 [A-Za-z0-9_.-]", EINVAL};
    cfg.switch_name = std::string(name);
  }
  auto spoof = read_bool_key(read, kAllowMacSpoofingKey, false);
  if (!spoof) return spoof.error();
  cfg.allow_mac_spoofing = *spoof;
  return cfg;
}

bool valid_switch_name(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

}  // namespace unetback::xenbus
