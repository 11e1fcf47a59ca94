// SwitchRegistry: the daemon's internal switches by name.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/vif/vswitch.hpp"

namespace unetback::vif {

/// The daemon's switches by name: made on first use and kept while a vif (or the daemon's
/// --switch-uplink declaration) holds them.
class SwitchRegistry {
 public:
  /// `uplinks`: switch name -> uplink TAP name; those switches exist from the start.
  explicit SwitchRegistry(const std::map<std::string, std::string>& uplinks = {});
  std::shared_ptr<VSwitch> get(const std::string& name);

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<VSwitch>> switches_;
  std::vector<std::shared_ptr<VSwitch>> declared_;
};

}  // namespace unetback::vif
