#include "tools/xl/list.hpp"

#include <cstdio>
#include <string>

#include "tools/xl/guest_launcher.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::xl {

namespace ts = toolstack;

int cmd_list(World& w) {
  auto doms = w.xs().directory("/local/domain");
  if (!doms) {
    err("cannot read /local/domain: " + doms.error().message());
    return kExitError;
  }
  std::printf("%-6s %-16s %-6s %-6s %-10s %-12s %-14s %s\n", "domid", "name", "devid", "state",
              "hotplug", "bridge", "tap", "guest");
  for (const auto& d : *doms) {
    auto v = parse_uint(d, 0xfffe);
    if (!v || *v == 0) continue;
    const DomId domid{static_cast<std::uint16_t>(*v)};
    const std::string name = w.read_or("/local/domain/" + d + "/name", "?");
    std::string guest = "-";
    if (const auto pid = w.recorded_guest_pid(domid)) {
      guest = num(static_cast<std::uint64_t>(*pid)) +
              (ts::process_is(static_cast<pid_t>(*pid), kShimName) ? "" : "(gone)");
    }
    const auto vifs = w.vifs_of(domid);
    if (vifs.empty()) {
      std::printf("%-6s %-16s %-6s %-6s %-10s %-12s %-14s %s\n", d.c_str(), name.c_str(), "-", "-",
                  "-", "-", "-", guest.c_str());
    }
    for (const VifRef& vif : vifs) {
      const DevId devid = vif.devid;
      const std::string be = ts::backend_path(vif.backend, domid, devid);
      const std::string tap = w.read_or(be + "/vifname", "vif" + d + "." + num(devid.value()));
      std::string hp = w.read_or(be + "/hotplug-status", "-");
      if (hp.empty()) hp = "(pending)";
      std::printf("%-6s %-16s %-6u %-6s %-10s %-12s %-14s %s\n", d.c_str(), name.c_str(),
                  devid.value(), w.read_or(be + "/state", "?").c_str(), hp.c_str(),
                  w.read_or(be + "/bridge", "-").c_str(), tap.c_str(), guest.c_str());
    }
  }
  return kExitOk;
}

}  // namespace unetback::xl
