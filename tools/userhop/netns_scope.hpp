// NetnsScope: enters a named network namespace (/run/netns/NAME, as `ip netns add` makes)
// for the calling thread and returns to the previous one when destroyed.
//
// TapDevice::create and set_up act in the calling thread's namespace, so a TAP created and
// brought up inside the scope lives in that namespace; its fd keeps working after we leave.
#pragma once

#include <string>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::userhop {

class NetnsScope {
 public:
  /// An empty name enters nothing (the scope is a no-op).
  [[nodiscard]] static Result<NetnsScope> enter(const std::string& name);

  NetnsScope(NetnsScope&&) noexcept = default;
  NetnsScope& operator=(NetnsScope&&) = delete;
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;
  /// Returns to the saved namespace. Failing to would leave the thread creating the next
  /// TAP in the wrong namespace, so that aborts.
  ~NetnsScope();

 private:
  explicit NetnsScope(UniqueFd saved) : saved_(std::move(saved)) {}
  UniqueFd saved_;  // the namespace to return to; invalid: nothing was entered
};

}  // namespace unetback::userhop
