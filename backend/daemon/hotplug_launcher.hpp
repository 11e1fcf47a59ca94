// HotplugLauncher: runs vif hotplug scripts for the daemon without blocking its event loop.
//
// Only adopted devices need it: libxl runs `<script> online` itself after InitWait for every
// device it creates, but a daemon restarted under a running guest re-creates the TAP that the
// script once bridged, so it runs the script again, exactly as libxl would (same arguments,
// environment and 40 s limit; common/hotplug). The script writes B:hotplug-status, which the
// vif's xenbus machine waits for as usual. reap() collects outcomes from the manager's timer.
#pragma once

#include <chrono>
#include <string>
#include <system_error>
#include <vector>

#include "common/hotplug/hotplug_script.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::daemon {

class HotplugLauncher {
 public:
  /// `xenstored_path`: given to scripts as XENSTORED_PATH (xensim's per-domain socket), or
  /// empty on real Xen.
  explicit HotplugLauncher(std::string xenstored_path,
                           std::chrono::milliseconds timeout = hotplug::kHotplugTimeout);

  /// Starts `script online type_if=vif` for vif<domid>.<devid>; a run still going for that vif
  /// is killed first. An error when it cannot be started (missing or not executable).
  std::error_code launch(const std::string& script, DomId domid, DevId devid);
  /// A run that failed: timed out (and killed), killed by a signal, or exited non-zero.
  struct Failure {
    DomId domid;
    DevId devid;
    std::string reason;  // "<script> online timed out after 40 s", ...
  };
  /// Logs and forgets the runs that have ended; kills those over their time. Returns the
  /// failed ones: libxl would fail the device then, and a killed script wrote nothing, so
  /// the caller reports the failure in xenstore (hotplug-error, hotplug-status).
  std::vector<Failure> reap();
  [[nodiscard]] std::size_t running() const { return runs_.size(); }

 private:
  struct Run {
    DomId domid;
    DevId devid;
    std::string script;
    hotplug::HotplugProcess process;
  };

  std::string xenstored_path_;
  std::chrono::milliseconds timeout_;
  std::vector<Run> runs_;
};

}  // namespace unetback::daemon
