// unetbackd's command line, parsed purely (no exit(), no printing) so it can be tested.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "backend/vif/vif_handle.hpp"
#include "common/hv/hypervisor_spec.hpp"
#include "common/util/log.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::daemon {

/// Exit codes, as `unetbackd --help` documents them.
inline constexpr int kExitOk = 0;     // stopped cleanly (SIGTERM/SIGINT), or --help
inline constexpr int kExitSetup = 1;  // setup failed (hypervisor missing, socket in use, ...)
inline constexpr int kExitUsage = 2;  // bad command line
inline constexpr int kExitXenstoreLost = 3;  // the xenstore connection died: restart me
/// Handed every vif over to a successor (SIGUSR2, --takeover): the TAPs and records stay.
inline constexpr int kExitHandedOver = 4;

struct DaemonOptions {
  hv::HypervisorSpec hypervisor;       // --hypervisor xen or sim:<world-dir>
  std::optional<DomId> backend_domid;  // xensim: register as this domain (default dom0)
  std::string control_path;            // control::default_control_path(hypervisor) unless given
  std::string lock_path;               // default_lock_path(hypervisor, domid) unless given
  log::Level log_level = log::Level::info;
  vif::Tunables tunables;                      // the defaults with --<tunable> applied
  std::vector<std::string> explicit_tunables;  // names given on the command line
  /// --switch-uplink NAME=TAP (repeatable): internal switch NAME exists from the start with
  /// uplink TAP TAP (the switch's port to the host).
  std::map<std::string, std::string> switch_uplinks;
  /// --allow-kernel-netback: start on Xen although xen_netback is loaded (kernel_netback.hpp).
  bool allow_kernel_netback = false;
  /// Where the vifs' records live (vif_record.hpp): /run/unetback on Xen,
  /// <world-dir>/unetbackd-dom<N>-state on xensim; --state-dir "" disables adoption.
  std::string state_dir;
  /// --takeover: ask the daemon holding the lock to hand over (SIGUSR2) and wait for the lock.
  bool takeover = false;
  bool help = false;
};

/// The lock that lets one daemon serve a backend domain: `/run/unetbackd.lock` for "xen"
/// (one backend domain per host), `<world-dir>/unetbackd-dom<N>.lock` for "sim:<dir>" (a
/// world may hold several backend domains).
[[nodiscard]] std::string default_lock_path(const hv::HypervisorSpec& hypervisor, DomId backend);

/// The default state directory (see DaemonOptions::state_dir).
[[nodiscard]] std::string default_state_dir(const hv::HypervisorSpec& hypervisor, DomId backend);

/// The options, or the message explaining what is wrong (exit kExitUsage).
[[nodiscard]] std::variant<DaemonOptions, std::string> parse_daemon_args(
    std::span<const std::string_view> args);

/// The --help text.
[[nodiscard]] std::string daemon_usage();

}  // namespace unetback::daemon
