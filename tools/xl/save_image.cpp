#include "tools/xl/save_image.hpp"

#include <algorithm>
#include <map>

#include "common/util/parse_decimal.hpp"

namespace unetback::toolstack {
namespace {

constexpr std::string_view kMagic = "unetback-xl-save 1";

std::errc invalid() {
  return std::errc::invalid_argument;
}

bool has_newline(std::string_view v) {
  return v.find('\n') != std::string_view::npos;
}

}  // namespace

Result<std::string> format_save_image(const SavedDomain& saved) {
  std::string out(kMagic);
  out += '\n';
  auto line = [&out](const std::string& key, const std::string& value) {
    if (has_newline(value)) return false;
    out += key + ' ' + value + '\n';
    return true;
  };
  bool ok = line("name", saved.name) && line("uuid", saved.uuid) &&
            line("guest-pid", std::to_string(saved.guest_pid));
  for (const VifSpec& v : saved.vifs) {
    const std::string p = "vif " + std::to_string(v.devid.value()) + " ";
    ok = ok && line(p + "mac", v.mac) && line(p + "script", v.script) &&
         line(p + "trusted", v.trusted ? "1" : "0");
    if (!v.bridge.empty()) ok = ok && line(p + "bridge", v.bridge);
    if (v.vifname) ok = ok && line(p + "vifname", *v.vifname);
    if (v.ip) ok = ok && line(p + "ip", *v.ip);
    if (v.gatewaydev) ok = ok && line(p + "gatewaydev", *v.gatewaydev);
    if (v.rate) ok = ok && line(p + "rate", *v.rate);
    if (v.mtu) ok = ok && line(p + "mtu", std::to_string(*v.mtu));
  }
  if (!ok) return invalid();
  return out;
}

Result<SavedDomain> parse_save_image(std::string_view text) {
  SavedDomain saved;
  bool have_pid = false;
  std::map<std::uint32_t, VifSpec> vifs;
  std::map<std::uint32_t, bool> vif_has_mac;
  bool first = true;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (nl == std::string_view::npos) return invalid();  // every line ends with one
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (first) {
      if (line != kMagic) return invalid();
      first = false;
      continue;
    }
    const auto sp = line.find(' ');
    if (sp == std::string_view::npos) return invalid();
    const std::string_view key = line.substr(0, sp);
    std::string_view value = line.substr(sp + 1);
    if (key == "name") {
      saved.name = std::string(value);
    } else if (key == "uuid") {
      saved.uuid = std::string(value);
    } else if (key == "guest-pid") {
      const auto pid = parse_decimal<std::uint32_t>(value, 0, 0x3fffffff);
      if (!pid) return invalid();
      saved.guest_pid = static_cast<pid_t>(*pid);
      have_pid = true;
    } else if (key == "vif") {
      const auto sp2 = value.find(' ');
      if (sp2 == std::string_view::npos) return invalid();
      const auto devid = parse_decimal<std::uint32_t>(value.substr(0, sp2), 0, 0xffff);
      if (!devid) return invalid();
      value.remove_prefix(sp2 + 1);
      const auto sp3 = value.find(' ');
      if (sp3 == std::string_view::npos) return invalid();
      const std::string_view field = value.substr(0, sp3);
      const std::string v(value.substr(sp3 + 1));
      VifSpec& spec = vifs[*devid];
      spec.devid = DevId{*devid};
      if (field == "mac") {
        spec.mac = v;
        vif_has_mac[*devid] = true;
      } else if (field == "script") {
        spec.script = v;
      } else if (field == "trusted") {
        if (v != "0" && v != "1") return invalid();
        spec.trusted = v == "1";
      } else if (field == "bridge") {
        spec.bridge = v;
      } else if (field == "vifname") {
        spec.vifname = v;
      } else if (field == "ip") {
        spec.ip = v;
      } else if (field == "gatewaydev") {
        spec.gatewaydev = v;
      } else if (field == "rate") {
        spec.rate = v;
      } else if (field == "mtu") {
        const auto mtu = parse_decimal<std::uint32_t>(v, 68, 65535);
        if (!mtu) return invalid();
        spec.mtu = *mtu;
      } else {
        return invalid();
      }
    } else {
      return invalid();
    }
  }
  if (first || saved.name.empty() || !have_pid || vifs.empty()) return invalid();
  for (auto& [devid, spec] : vifs) {
    if (!vif_has_mac[devid]) return invalid();
    saved.vifs.push_back(std::move(spec));
  }
  return saved;
}

}  // namespace unetback::toolstack
