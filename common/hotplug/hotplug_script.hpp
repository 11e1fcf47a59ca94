// Runs a vif hotplug script the way libxl does (libxl_linux.c get_hotplug_env and
// libxl_device.c device_hotplug): `<script> online|offline type_if=vif`, the caller's
// environment plus script, XENBUS_TYPE, XENBUS_PATH (relative to the backend domain's home),
// XENBUS_BASE_PATH, netdev and vif=vif<domid>.<devid>, under LIBXL_HOTPLUG_TIMEOUT (the script's
// process group is killed when it runs over). For the xensim world we add XENSTORED_PATH so the
// script's xenstore-read/-write reach xensim's xenstored instead of a real one.
//
// Two callers: unetback-xl (libxl's role: runs the script and waits) and unetbackd, which runs
// it again for a device it adopts after a restart (the TAP the script bridged died with the
// previous daemon) and must not block its event loop meanwhile: HotplugProcess::poll().
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hotplug {

/// libxl's LIBXL_HOTPLUG_TIMEOUT.
inline constexpr std::chrono::seconds kHotplugTimeout{40};

struct HotplugCall {
  std::string script;  ///< absolute path
  std::string action;  ///< "online" or "offline"
  DomId domid{};
  DevId devid{};
  std::string netdev;          ///< libxl's gatewaydev ("" unless set)
  std::string xenstored_path;  ///< DIR/dom0.sock for xensim; empty: leave the variable alone
};

struct HotplugOutcome {
  enum class Kind : std::uint8_t { exited, signalled, timed_out };
  Kind kind = Kind::exited;
  int code = 0;  ///< exit status, or the signal
  [[nodiscard]] bool ok() const { return kind == Kind::exited && code == 0; }
  [[nodiscard]] std::string describe() const;
};

/// "KEY=value" entries libxl adds to the script's environment (in this order).
[[nodiscard]] std::vector<std::string> hotplug_environment(const HotplugCall& call);

/// The script's argv: script, action, "type_if=vif".
[[nodiscard]] std::vector<std::string> hotplug_argv(const HotplugCall& call);

/// A running script (stdout and stderr go to our stderr, stdin is /dev/null) in a process group
/// of its own. The destructor kills the group and reaps it if it is still running.
class HotplugProcess {
 public:
  /// An error only when it could not be started (fork, or the script is not executable).
  [[nodiscard]] static Result<HotplugProcess> spawn(const HotplugCall& call,
                                                    std::chrono::milliseconds timeout);
  HotplugProcess(HotplugProcess&& o) noexcept;
  HotplugProcess& operator=(HotplugProcess&& o) noexcept;
  HotplugProcess(const HotplugProcess&) = delete;
  HotplugProcess& operator=(const HotplugProcess&) = delete;
  ~HotplugProcess();

  /// Non-blocking: the outcome once the script has exited, or once its time is up (then its
  /// group is killed first); nullopt while it runs. Returns the outcome once, then nullopt.
  [[nodiscard]] std::optional<HotplugOutcome> poll();
  /// Blocks until poll() has an outcome.
  [[nodiscard]] HotplugOutcome wait();
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  HotplugProcess(pid_t pid, std::chrono::steady_clock::time_point deadline)
      : pid_(pid), deadline_(deadline) {}
  void kill_and_reap();

  pid_t pid_ = -1;  // -1 once reaped
  std::chrono::steady_clock::time_point deadline_;
};

/// Runs the script and waits at most `timeout`. An error only when it could not be started.
[[nodiscard]] Result<HotplugOutcome> run_hotplug_script(const HotplugCall& call,
                                                        std::chrono::milliseconds timeout);

/// libxl resolves a relative script name against its script dir; we keep that for a bare
/// name and resolve a name with a '/' against the current directory (so a checkout's
/// tools/hotplug/vif-unetback works). The result is absolute.
[[nodiscard]] std::string resolve_script_path(const std::string& script);

inline constexpr const char* kXenScriptDir = "/etc/xen/scripts";

}  // namespace unetback::hotplug
