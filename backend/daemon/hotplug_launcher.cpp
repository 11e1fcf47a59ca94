#include "backend/daemon/hotplug_launcher.hpp"

#include <algorithm>

#include "common/util/log.hpp"

namespace unetback::daemon {
namespace {

constexpr std::string_view kHotplugLog = "hotplug";

std::string vif_name(DomId domid, DevId devid) {
  return "vif" + std::to_string(domid.value()) + "." + std::to_string(devid.value());
}

}  // namespace

HotplugLauncher::HotplugLauncher(std::string xenstored_path, std::chrono::milliseconds timeout)
    : xenstored_path_(std::move(xenstored_path)), timeout_(timeout) {}

std::error_code HotplugLauncher::launch(const std::string& script, DomId domid, DevId devid) {
  std::erase_if(runs_, [&](const Run& r) { return r.domid == domid && r.devid == devid; });
  const hotplug::HotplugCall call{script, "online", domid, devid, "", xenstored_path_};
  auto p = hotplug::HotplugProcess::spawn(call, timeout_);
  if (!p) return p.error();
  log::write(log::Level::info, kHotplugLog,
             vif_name(domid, devid) + ": running " + script + " online (pid " +
                 std::to_string(p->pid()) + ")");
  runs_.push_back(Run{domid, devid, script, std::move(*p)});
  return {};
}

std::vector<HotplugLauncher::Failure> HotplugLauncher::reap() {
  std::vector<Failure> failed;
  std::erase_if(runs_, [&](Run& r) {
    const auto outcome = r.process.poll();
    if (!outcome) return false;
    std::string what = r.script + " online " + outcome->describe();
    if (outcome->kind == hotplug::HotplugOutcome::Kind::timed_out)
      what += " after " + std::to_string(timeout_.count()) + " ms (killed)";
    log::write(outcome->ok() ? log::Level::info : log::Level::error, kHotplugLog,
               vif_name(r.domid, r.devid) + ": " + what);
    if (!outcome->ok()) failed.push_back(Failure{r.domid, r.devid, what});
    return true;
  });
  return failed;
}

}  // namespace unetback::daemon
