#include "backend/daemon/daemon_options.hpp"

#include <iterator>

#include "backend/daemon/tunables.hpp"
#include "backend/xenbus/backend_config.hpp"
#include "common/control/protocol.hpp"
#include "common/hv/xenstore.hpp"
#include "common/net/tap_device.hpp"
#include "common/util/arg_parser.hpp"

namespace unetback::daemon {

std::string default_state_dir(const hv::HypervisorSpec& hypervisor, DomId backend) {
  if (const auto* dir = hv::sim_world_dir(hypervisor))
    return *dir + "/unetbackd-dom" + std::to_string(backend.value()) + "-state";
  return "/run/unetback";
}

std::string default_lock_path(const hv::HypervisorSpec& hypervisor, DomId backend) {
  if (const auto* dir = hv::sim_world_dir(hypervisor))
    return *dir + "/unetbackd-dom" + std::to_string(backend.value()) + ".lock";
  return "/run/unetbackd.lock";
}

std::variant<DaemonOptions, std::string> parse_daemon_args(std::span<const std::string_view> args) {
  static constexpr cli::OptionSpec kOwn[] = {
      cli::kHelp,
      cli::flag("allow-kernel-netback"),
      cli::valued("hypervisor"),
      cli::valued("backend-domid"),
      cli::valued("control"),
      cli::valued("log-level"),
      cli::valued("switch-uplink"),
      cli::valued("lock-file"),
      cli::valued("state-dir"),
      cli::flag("takeover"),
  };
  std::vector<cli::OptionSpec> options(std::begin(kOwn), std::end(kOwn));
  for (const auto& spec : tunable_specs()) options.push_back(cli::valued(spec.name));
  DaemonOptions o;
  std::optional<hv::HypervisorSpec> hypervisor;
  std::optional<std::string> control, lock, state_dir;
  cli::ArgParser parser(args, options, {.positionals = false});
  while (const auto a = parser.next()) {
    const std::string_view value = a->value;
    if (a->is("help")) {
      o.help = true;
      return o;
    }
    if (a->is("allow-kernel-netback")) {
      o.allow_kernel_netback = true;
    } else if (a->is("takeover")) {
      o.takeover = true;
    } else if (a->is("state-dir")) {
      state_dir = value;
    } else if (a->is("hypervisor")) {
      hypervisor = hv::parse_hypervisor_spec(value);
      if (!hypervisor)
        return "--hypervisor takes xen or sim:<world-dir>, not '" + std::string(value) + "'";
    } else if (a->is("backend-domid")) {
      const auto d = hv::parse_domid(value);
      if (!d) return "--backend-domid: '" + std::string(value) + "' is not a domid";
      o.backend_domid = *d;
    } else if (a->is("switch-uplink")) {
      const auto eq = value.find('=');
      const std::string_view sw = value.substr(0, eq);
      const std::string_view tap =
          eq == std::string_view::npos ? std::string_view() : value.substr(eq + 1);
      if (!xenbus::valid_switch_name(sw) || !net::valid_ifname(tap)) {
        return "--switch-uplink takes NAME=TAP (a switch name of 1..32 [A-Za-z0-9_.-] and an "
               "interface name), not '" +
               std::string(value) + "'";
      }
      if (!o.switch_uplinks.emplace(std::string(sw), std::string(tap)).second)
        return "--switch-uplink: switch '" + std::string(sw) + "' given twice";
    } else if (a->is("control")) {
      if (value.empty()) return "--control needs a path";
      control = value;
    } else if (a->is("lock-file")) {
      if (value.empty()) return "--lock-file needs a path";
      lock = value;
    } else if (a->is("log-level")) {
      const auto level = log::parse_level(value);
      if (!level) return "--log-level takes debug, info, warn or error";
      o.log_level = *level;
    } else if (const auto* spec = find_tunable(a->name)) {
      if (auto why = set_tunable(o.tunables, *spec, value))
        return "--" + std::string(a->name) + ": " + *why;
      o.explicit_tunables.emplace_back(spec->name);
    }
  }
  if (const auto& e = parser.error()) return e->message();
  if (!hypervisor) return std::string("--hypervisor is required (xen or sim:<world-dir>)");
  o.hypervisor = *hypervisor;
  o.control_path = control ? *control : control::default_control_path(o.hypervisor);
  o.lock_path = lock ? *lock : default_lock_path(o.hypervisor, o.backend_domid.value_or(kDom0));
  o.state_dir =
      state_dir ? *state_dir : default_state_dir(o.hypervisor, o.backend_domid.value_or(kDom0));
  return o;
}

std::string daemon_usage() {
  std::string s =
      "usage: unetbackd --hypervisor xen|sim:<world-dir> [--backend-domid N] [--control PATH]\n"
      "                 [--lock-file PATH] [--log-level debug|info|warn|error]\n"
      "                 [--switch-uplink NAME=TAP ...] [--allow-kernel-netback]\n"
      "                 [--state-dir DIR] [--takeover] [--<tunable> VALUE ...]\n"
      "\n"
      "The userspace Xen netback daemon. It serves every vif under\n"
      "/local/domain/<self>/backend/vif, logs to stderr, and stops on SIGTERM or SIGINT after\n"
      "closing every vif (backend state 6). SIGHUP re-reads the tunables from xenstore,\n"
      "SIGUSR1 logs every vif's state and counters, SIGUSR2 hands every vif over to a\n"
      "successor (the guests stay Connected) and exits 4. One daemon serves a backend\n"
      "domain: a second one exits 1 before it touches any vif, unless --takeover.\n"
      "\n"
      "  --hypervisor xen       the real Xen hypervisor (libxen*, xenstored)\n"
      "  --hypervisor sim:DIR   the xensim world running in DIR\n"
      "  --backend-domid N      xensim: serve as driver domain N, made by unetback-xl create\n"
      "                         NAME --driver-domain (default: dom0)\n"
      "  --control PATH         control socket for unetback-ctl (default\n"
      "                         /run/unetback/unetbackd.sock, or DIR/unetbackd.sock on xensim)\n"
      "  --lock-file PATH       the lock held while serving (default /run/unetbackd.lock, or\n"
      "                         DIR/unetbackd-dom<N>.lock on xensim); xenstore's\n"
      "                         /local/domain/<self>/unetback/owner names the daemon's pid\n"
      "  --log-level LEVEL      debug, info (default), warn or error\n"
      "  --switch-uplink NAME=TAP\n"
      "                         internal switch NAME (vifs with bridge=unetback:NAME) gets the\n"
      "                         uplink TAP named TAP, its port to the host (repeatable)\n"
      "  --state-dir DIR        the vifs' state records (default /run/unetback, or\n"
      "                         DIR/unetbackd-dom<N>-state on xensim; \"\" for none): a daemon\n"
      "                         started after a crash or a handover adopts every vif whose\n"
      "                         record validates, without the frontend leaving Connected\n"
      "  --takeover             signal the daemon holding the lock (SIGUSR2), wait for it to\n"
      "                         hand over, then adopt its vifs\n"
      "  --allow-kernel-netback start on Xen although the kernel netback is loaded\n"
      "                         (/sys/module/xen_netback); without it unetbackd refuses, as\n"
      "                         the two would race for every vif\n"
      "\n"
      "Tunables (xenstore /local/domain/<self>/unetback/<name>; a value given here replaces\n"
      "the one in xenstore, other keys keep a valid stored value or get the default):\n";
  const vif::Tunables defaults;
  for (const auto& spec : tunable_specs()) {
    std::string line = "  --" + std::string(spec.name) + " ";
    if (spec.choices.empty()) {
      line += std::to_string(spec.min) + ".." + std::to_string(spec.max);
    } else {
      for (std::size_t i = spec.choices.size(); i-- > 0;)
        line += std::string(spec.choices[i]) + (i > 0 ? "|" : "");
    }
    line.resize(std::max<std::size_t>(line.size() + 1, 38), ' ');
    s += line + std::string(spec.help) + " (default " + format_tunable(defaults, spec) + ")\n";
  }
  s += "\n"
       "Exit status:\n"
       "  0  stopped cleanly (SIGTERM/SIGINT), or --help\n"
       "  1  setup failed (hypervisor or xenstore missing, control socket in use, another\n"
       "     unetbackd serves this backend domain, the kernel netback is loaded, ...)\n"
       "  2  bad command line\n"
       "  3  the xenstore connection was lost (a supervisor restarts the daemon, which\n"
       "     adopts the running vifs)\n"
       "  4  handed every vif over to a successor (SIGUSR2, or SIGTERM during a systemd\n"
       "     restart of the unit)\n";
  return s;
}

}  // namespace unetback::daemon
