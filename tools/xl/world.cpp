#include "tools/xl/world.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <utility>

#include "common/util/parse_decimal.hpp"
#include "tools/xl/guest_launcher.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::xl {

namespace ts = toolstack;

void err(const std::string& msg) {
  std::cerr << "unetback-xl: " << msg << "\n";
}

std::optional<std::uint32_t> parse_uint(std::string_view s, std::uint32_t max) {
  return parse_decimal<std::uint32_t>(s, 0, max);
}

std::string read_or(hv::XenStore& xs, const std::string& path, const std::string& fallback) {
  auto v = xs.read(path);
  return v ? *v : fallback;
}

std::string xs_socket(const std::string& dir, DomId d) {
  return dir + "/dom" + num(d.value()) + ".sock";
}

void rm_if_empty(hv::XenStore& xs, const std::string& dir) {
  if (auto left = xs.directory(dir); left && left->empty()) (void)xs.rm(dir);
}

std::optional<std::string> script_failure(const Result<hotplug::HotplugOutcome>& outcome) {
  if (!outcome) return "cannot run: " + outcome.error().message();
  if (!outcome->ok()) return outcome->describe();
  return std::nullopt;
}

World::World(std::string dir)
    : dir_(std::move(dir)), hv_(dir_, hv::HypervisorOptions{}), xs_(hv_.open_xenstore()) {}

std::optional<long> World::recorded_guest_pid(DomId d) const {
  std::ifstream in(pid_file(d));
  long pid = 0;
  if (in >> pid) return pid;
  return std::nullopt;
}

std::vector<VifRef> World::vifs_of(DomId domid) {
  std::vector<VifRef> out;
  auto add = [&out](DevId devid, DomId backend) {
    for (const auto& r : out)
      if (r.devid == devid) return;
    out.push_back(VifRef{devid, backend});
  };
  const std::string priv = "/libxl/" + num(domid.value()) + "/device/vif";
  if (auto dir = xs_->directory(priv)) {
    for (const auto& d : *dir) {
      auto v = parse_uint(d, 0xffff);
      if (!v) continue;
      std::string key = priv;
      key.append("/").append(d).append("/backend-id");
      auto be = parse_uint(read_or(key, "0"), 0xfffe);
      add(DevId{*v}, DomId{static_cast<std::uint16_t>(be.value_or(0))});
    }
  }
  if (auto dir = xs_->directory("/local/domain/0/backend/vif/" + num(domid.value()))) {
    for (const auto& d : *dir)
      if (auto v = parse_uint(d, 0xffff)) add(DevId{*v}, kDom0);
  }
  std::sort(out.begin(), out.end(),
            [](const VifRef& a, const VifRef& b) { return a.devid.value() < b.devid.value(); });
  return out;
}

hotplug::HotplugCall World::hotplug_call(const std::string& script, std::string action, DomId domid,
                                         DevId devid) {
  const std::string netdev = read_or(ts::backend_path(kDom0, domid, devid) + "/gatewaydev", "");
  return hotplug::HotplugCall{script, std::move(action),     domid, devid,
                              netdev, xs_socket(dir_, kDom0)};
}

std::optional<DomId> resolve_domain(World& w, const std::string& name_or_id) {
  if (auto v = parse_uint(name_or_id, 0xfffe)) {
    const DomId d{static_cast<std::uint16_t>(*v)};
    return d;
  }
  auto doms = w.xs().directory("/local/domain");
  if (!doms) return std::nullopt;
  for (const auto& d : *doms) {
    auto v = parse_uint(d, 0xfffe);
    if (v && *v != 0 && w.read_or("/local/domain/" + d + "/name", "") == name_or_id)
      return DomId{static_cast<std::uint16_t>(*v)};
  }
  return std::nullopt;
}

std::optional<DomId> running_domain(World& w, const std::string& target) {
  const auto domid = resolve_domain(w, target);
  if (!domid || *domid == kDom0 || !w.hv().domain_exists(*domid)) {
    err("no such domain: " + target);
    return std::nullopt;
  }
  return domid;
}

pid_t guest_of(World& w, DomId domid) {
  const auto pid = w.recorded_guest_pid(domid);
  if (pid && *pid > 0 && ts::process_is(static_cast<pid_t>(*pid), kShimName))
    return static_cast<pid_t>(*pid);
  return 0;
}

}  // namespace unetback::xl
