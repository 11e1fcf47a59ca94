// What every unetback-xl command shares: the exit codes, the diagnostics, and the World: a
// xensim world's directory, dom0's hypervisor and xenstore connections to it, the guest files
// kept in it (pid, log and resume files), the vifs of a domain and how a domain is named.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "common/hotplug/hotplug_script.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/hv/xenstore.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::xl {

// Exit codes (in --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitDeviceFailed = 3;  // as `xl create` when a device cannot be added
inline constexpr int kExitGuestFailed = 4;

inline constexpr const char* kShimName = "netfront-shim";

/// Prints "unetback-xl: `msg`" on stderr.
void err(const std::string& msg);

[[nodiscard]] inline std::string num(std::uint64_t v) {
  return std::to_string(v);
}

[[nodiscard]] std::optional<std::uint32_t> parse_uint(std::string_view s, std::uint32_t max);

/// The value at `path`, or `fallback` when it cannot be read.
[[nodiscard]] std::string read_or(hv::XenStore& xs, const std::string& path,
                                  const std::string& fallback);

/// The xenstore socket of domain `d` in world `dir` (what a process inside it connects to).
[[nodiscard]] std::string xs_socket(const std::string& dir, DomId d);

/// libxl__xs_path_cleanup's last step: `dir` goes once no device is left in it.
void rm_if_empty(hv::XenStore& xs, const std::string& dir);

/// Why a hotplug script's run failed ("cannot run: …" or its outcome), or nullopt when it
/// succeeded.
[[nodiscard]] std::optional<std::string> script_failure(
    const Result<hotplug::HotplugOutcome>& outcome);

/// One vif of a domain and the domain serving it (dom0, or a driver domain).
struct VifRef {
  DevId devid;
  DomId backend;
};

class World {
 public:
  explicit World(std::string dir);

  [[nodiscard]] const std::string& dir() const { return dir_; }
  hv::SimHypervisor& hv() { return hv_; }
  hv::XenStore& xs() { return *xs_; }
  [[nodiscard]] std::string pid_file(DomId d) const {
    return dir_ + "/guest-" + num(d.value()) + ".pid";
  }
  [[nodiscard]] std::string log_file(DomId d) const {
    return dir_ + "/guest-" + num(d.value()) + ".log";
  }
  /// Where a resumed guest finds its new domid (--resume-file): named by the domain's name,
  /// which a save and restore keep.
  [[nodiscard]] std::string resume_file(const std::string& name) const {
    return dir_ + "/guest-" + name + ".resume";
  }

  /// The pid written in the pid file of `d`'s guest, as written (the process may be gone);
  /// nullopt without one.
  [[nodiscard]] std::optional<long> recorded_guest_pid(DomId d) const;

  /// The vifs of `domid` and the domains serving them: libxl's private copies
  /// (/libxl/<domid>/device/vif/<devid>, with the backend's domid), and any backend dir under
  /// dom0's backend/vif without one.
  std::vector<VifRef> vifs_of(DomId domid);

  std::string read_or(const std::string& path, const std::string& fallback) {
    return xl::read_or(*xs_, path, fallback);
  }

  /// libxl's get_hotplug_env: `netdev` is the vif's B:gatewaydev ("" without one).
  hotplug::HotplugCall hotplug_call(const std::string& script, std::string action, DomId domid,
                                    DevId devid);

 private:
  std::string dir_;
  hv::SimHypervisor hv_;
  std::unique_ptr<hv::XenStore> xs_;
};

/// The domain `name_or_id` names: a domid as written (whether or not it exists), else the
/// domU of that name; nullopt when there is none.
std::optional<DomId> resolve_domain(World& w, const std::string& name_or_id);

/// The running domU `target` names; nullopt (said "no such domain") for dom0 or none.
std::optional<DomId> running_domain(World& w, const std::string& target);

/// The guest process of `domid` (its pid file, checked to be a netfront-shim), or 0.
pid_t guest_of(World& w, DomId domid);

}  // namespace unetback::xl
