#include "backend/vif/switch_registry.hpp"

#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::vif {

namespace {

[[noreturn]] void uplink_failed(const std::string& name, const std::string& tap,
                                std::error_code ec) {
  throw SetupError("switch " + name + ": cannot create uplink TAP " + tap + ": " + ec.message());
}

}  // namespace

SwitchRegistry::SwitchRegistry(const std::map<std::string, std::string>& uplinks) {
  for (const auto& [name, tap] : uplinks) {
    auto sw = std::make_shared<VSwitch>(name);
    if (auto ec = sw->attach_uplink(tap)) uplink_failed(name, tap, ec);
    switches_.emplace(name, sw);
    declared_.push_back(std::move(sw));
  }
}

std::shared_ptr<VSwitch> SwitchRegistry::get(const std::string& name) {
  const std::lock_guard lock(mu_);
  if (auto sw = switches_[name].lock()) return sw;
  auto sw = std::make_shared<VSwitch>(name);
  switches_[name] = sw;
  log::write(log::Level::info, "switch " + name, "created");
  return sw;
}

}  // namespace unetback::vif
