#include "backend/daemon/daemon_options.hpp"

#include "backend/daemon/tunables.hpp"
#include "backend/xenbus/backend_config.hpp"
#include "common/hv/xenstore.hpp"
#include "common/net/tap_device.hpp"

namespace unetback::daemon {

std::string default_control_path(std::string_view hypervisor) {
  if (hypervisor.starts_with("sim:") && hypervisor.size() > 4)
    return std::string(hypervisor.substr(4)) + "/unetbackd.sock";
  return "/run/unetback/unetbackd.sock";
}

std::string default_lock_path(std::string_view hypervisor, DomId backend) {
  if (hypervisor.starts_with("sim:") && hypervisor.size() > 4) {
    return std::string(hypervisor.substr(4)) + "/unetbackd-dom" + std::to_string(backend.value()) +
           ".lock";
  }
  return "/run/unetbackd.lock";
}

std::variant<DaemonOptions, std::string> parse_daemon_args(std::span<const std::string_view> args) {
  DaemonOptions o;
  std::optional<std::string> control, lock;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    }
    if (!a.starts_with("--")) return "unexpected argument '" + std::string(a) + "'";
    if (a == "--allow-kernel-netback") {
      o.allow_kernel_netback = true;
      continue;
    }
    std::string_view name = a.substr(2);
    std::optional<std::string_view> value;
    if (const auto eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
    static constexpr std::string_view kOwn[] = {"hypervisor", "backend-domid", "control",
                                                "log-level",  "switch-uplink", "lock-file"};
    bool known = find_tunable(name) != nullptr;
    for (auto k : kOwn) known = known || k == name;
    if (!known) return "unknown option --" + std::string(name);
    if (!value) return "--" + std::string(name) + " needs a value";
    if (name == "hypervisor") {
      if (*value != "xen" && !(value->starts_with("sim:") && value->size() > 4))
        return "--hypervisor takes xen or sim:<world-dir>, not '" + std::string(*value) + "'";
      o.hypervisor = *value;
    } else if (name == "backend-domid") {
      const auto d = hv::parse_xs_uint<std::uint16_t>(*value);
      if (!d || *d >= 0x7FF0)
        return "--backend-domid: '" + std::string(*value) + "' is not a domid";
      o.backend_domid = DomId{*d};
    } else if (name == "switch-uplink") {
      const auto eq = value->find('=');
      const std::string_view sw = value->substr(0, eq);
      const std::string_view tap =
          eq == std::string_view::npos ? std::string_view() : value->substr(eq + 1);
      if (!xenbus::valid_switch_name(sw) || !net::valid_ifname(tap)) {
        return "--switch-uplink takes NAME=TAP (a switch name of 1..32 [A-Za-z0-9_.-] and an "
               "interface name), not '" +
               std::string(*value) + "'";
      }
      if (!o.switch_uplinks.emplace(std::string(sw), std::string(tap)).second)
        return "--switch-uplink: switch '" + std::string(sw) + "' given twice";
    } else if (name == "control") {
      if (value->empty()) return "--control needs a path";
      control = *value;
    } else if (name == "lock-file") {
      if (value->empty()) return "--lock-file needs a path";
      lock = *value;
    } else if (name == "log-level") {
      if (*value == "debug") {
        o.log_level = log::Level::debug;
      } else if (*value == "info") {
        o.log_level = log::Level::info;
      } else if (*value == "warn") {
        o.log_level = log::Level::warn;
      } else if (*value == "error") {
        o.log_level = log::Level::error;
      } else {
        return "--log-level takes debug, info, warn or error";
      }
    } else if (const auto* spec = find_tunable(name)) {
      if (auto why = set_tunable(o.tunables, *spec, *value))
        return "--" + std::string(name) + ": " + *why;
      o.explicit_tunables.emplace_back(spec->name);
    }
  }
  if (o.hypervisor.empty()) return std::string("--hypervisor is required (xen or sim:<world-dir>)");
  o.control_path = control ? *control : default_control_path(o.hypervisor);
  o.lock_path = lock ? *lock : default_lock_path(o.hypervisor, o.backend_domid.value_or(kDom0));
  return o;
}

std::string daemon_usage() {
  std::string s =
      "usage: unetbackd --hypervisor xen|sim:<world-dir> [--backend-domid N] [--control PATH]\n"
      "                 [--lock-file PATH] [--log-level debug|info|warn|error]\n"
      "                 [--switch-uplink NAME=TAP ...] [--allow-kernel-netback]\n"
      "                 [--<tunable> VALUE ...]\n"
      "\n"
      "The userspace Xen netback daemon. It serves every vif under\n"
      "/local/domain/<self>/backend/vif, logs to stderr, and stops on SIGTERM or SIGINT after\n"
      "closing every vif (backend state 6). SIGHUP re-reads the tunables from xenstore,\n"
      "SIGUSR1 logs every vif's state and counters, SIGUSR2 and SIGPIPE are ignored. One\n"
      "daemon serves a backend domain: a second one exits 1 before it touches any vif.\n"
      "\n"
      "  --hypervisor xen       the real Xen hypervisor (libxen*, xenstored)\n"
      "  --hypervisor sim:DIR   the xensim world running in DIR\n"
      "  --backend-domid N      xensim: run as domain N (default: dom0)\n"
      "  --control PATH         control socket for unetback-ctl (default\n"
      "                         /run/unetback/unetbackd.sock, or DIR/unetbackd.sock on xensim)\n"
      "  --lock-file PATH       the lock held while serving (default /run/unetbackd.lock, or\n"
      "                         DIR/unetbackd-dom<N>.lock on xensim); xenstore's\n"
      "                         /local/domain/<self>/unetback/owner names the daemon's pid\n"
      "  --log-level LEVEL      debug, info (default), warn or error\n"
      "  --switch-uplink NAME=TAP\n"
      "                         internal switch NAME (vifs with bridge=unetback:NAME) gets the\n"
      "                         uplink TAP named TAP, its port to the host (repeatable)\n"
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
       "     adopts the running vifs)\n";
  return s;
}

}  // namespace unetback::daemon
