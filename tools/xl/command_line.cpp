#include "tools/xl/command_line.hpp"

#include <filesystem>
#include <iostream>
#include <system_error>
#include <utility>

#include "common/hotplug/hotplug_script.hpp"
#include "common/util/arg_parser.hpp"
#include "common/util/parse_decimal.hpp"
#include "tools/xl/vif_option.hpp"
#include "tools/xl/world.hpp"

namespace unetback::xl {
namespace {

constexpr std::string_view kUsage = R"(usage: unetback-xl --world DIR COMMAND ...

libxl's role for a xensim world (DIR is where `xensim --dir DIR` runs).

  create NAME --vif SPEC [--vif SPEC]... [--guest-netns NS] [--address CIDR]
              [--queues N] [--shim PATH] [--no-guest] [--ready-timeout-ms N] [-- SHIM ARGS...]
  create NAME --driver-domain
      Creates domain NAME, writes each vif's backend/frontend nodes as libxl does, waits up
      to 10 s for the backend's InitWait (state 2), runs the vif's hotplug script
      `<script> online type_if=vif` (40 s limit), then starts the guest: netfront-shim
      --hypervisor sim:DIR --domid N --devid D [--netns NS] [--address CIDR] [--queues N]
      [SHIM ARGS] in its own session, logging to DIR/guest-N.log, its pid in DIR/guest-N.pid.
      Waits for its ready line and prints "domid N". The guest drives the first vif.
      SPEC (xl's vif syntax): mac=xx:xx:..,bridge=BR,script=PATH,rate=10Mb/s@50ms,
      vifname=NAME,mtu=N,ip=ADDR[ ADDR...],gatewaydev=DEV,devid=N,trusted=0|1. A script name
      without '/' is looked up in /etc/xen/scripts (libxl's default is vif-bridge). vifname:
      the backend's TAP is made as vif<domid>.<devid> and the script renames it (as with the
      kernel netback). ip and gatewaydev are for vif-route (gatewaydev reaches the script
      as $netdev, as libxl passes it). Also writes libxl's /vm/<uuid> nodes (uuid, name).
      backend=NAME|DOMID: a driver domain serves the vif (its backend dir is
      /local/domain/<that>/backend/vif/N/D); its `unetback-xl devd` runs the script there and
      create waits (40 s) for the hotplug-status it writes.
      --driver-domain (libxl's driver_domain=1): a domain with no vif and no guest program,
      which backends join (unetbackd --backend-domid N) to serve other domains' vifs.
  destroy NAME|DOMID
      For each vif: online=0 + state=5, wait up to 10 s for Closed (6), run the script
      `offline` (only for a vif whose `online` run succeeded: hotplug-status=connected;
      a driver domain's devd runs it there, and dom0 waits up to 10 s for it to remove the
      backend dir), delete the nodes; then SIGTERM the guest and destroy the domain and its
      /vm node. Destroying a driver domain kills every backend process in it.
  list
      Domains with their vifs: devid, backend state, hotplug-status, bridge, TAP, guest pid.
  save NAME|DOMID FILE
      As `xl save`: writes control/shutdown=suspend and waits up to 10 s for the guest's
      acknowledgement (""), removes each vif as destroy does (the suspended guest does not
      answer), waits up to 10 s for the guest to let its domain go, destroys the domain and
      writes FILE: the name, uuid, each vif's configuration (libxl's private copy) and the
      guest's pid. The guest process stays, suspended: it is the domain's memory image
      (create starts every guest with --resume-file DIR/guest-NAME.resume).
  restore FILE
      As `xl restore`: creates the domain again (a new domid, the same name, uuid and vifs),
      adds the vifs as create does, then resumes the guest: writes "domid N" to its resume
      file (DIR/guest-NAME.resume) and sends it SIGUSR1. Waits for the first vif's frontend
      to be Connected (4) again and prints "domid N".
  devd NAME|DOMID
      `xl devd` of a driver domain: on that domain's xenstore connection, runs the hotplug
      scripts of the vifs it serves (online at InitWait, offline once Closed, then removes
      the backend dir). Run it in the driver domain's network namespace; it exits on
      SIGTERM, or when the domain is destroyed.
  migrate NAME|DOMID [localhost]
      A localhost migration: save and restore in one go, without a file; the old domain is
      destroyed and the guest carries on in a new one. Prints "domid N".

Options: --world DIR (required), --help.
The netfront-shim binary: --shim, else $UNETBACK_SHIM, else ../../frontend-shim/netfront-shim
next to this program (the build tree), else netfront-shim in $PATH.

Exit codes: 0 success; 1 error (world not reachable, unknown domain, a guest that did not
              acknowledge the suspend, a bad save file, ...); 2 usage error;
            3 a device could not be added (backend not in InitWait within 10 s, or the
              hotplug script failed; the domain is destroyed again, as `xl create` does);
            4 the guest did not come up or did not resume (the domain is destroyed again).
)";

}  // namespace

int usage_error(const std::string& msg) {
  err(msg);
  std::cerr << "Try 'unetback-xl --help'.\n";
  return kExitUsage;
}

std::variant<CommandLine, int> parse_command_line(std::vector<std::string_view> args) {
  static constexpr cli::OptionSpec kOptions[] = {cli::kHelp, cli::valued("world", "DIR")};
  std::optional<std::string> world;
  std::vector<std::string_view> rest;
  cli::ArgParser parser(args, kOptions);
  while (const auto a = parser.next()) {
    if (a->is("help")) {
      std::cout << kUsage;
      return kExitOk;
    }
    if (a->is("world")) {
      world = std::string(a->value);
    } else {  // the command: it and what follows are its own
      rest.push_back(a->value);
      rest.insert(rest.end(), parser.rest().begin(), parser.rest().end());
      break;
    }
  }
  if (const auto& e = parser.error()) return usage_error(e->message());
  if (!world) return usage_error("--world DIR is required");
  if (rest.empty())
    return usage_error("missing command (create, destroy, list, save, restore, migrate, devd)");
  std::error_code ec;
  std::string dir = std::filesystem::absolute(*world, ec).lexically_normal().string();
  return CommandLine{std::move(dir), std::move(rest)};
}

std::variant<CreateArgs, int> parse_create_args(std::span<const std::string_view> args) {
  static constexpr cli::OptionSpec kCreateOptions[] = {
      cli::valued("vif", "a SPEC"),     cli::valued("guest-netns", "a name"),
      cli::valued("address", "a CIDR"), cli::valued("queues", "1..64"),
      cli::valued("shim", "a path"),    cli::flag("no-guest"),
      cli::flag("driver-domain"),       cli::valued("ready-timeout-ms", "1..600000")};
  CreateArgs a;
  std::uint32_t next_devid = 0;
  cli::ArgParser create(args, kCreateOptions, {.double_dash = true});
  while (const auto opt = create.next()) {
    const std::string_view value = opt->value;
    if (opt->kind == cli::Arg::Kind::end_of_options) {
      a.shim_extra.assign(create.rest().begin(), create.rest().end());
      break;
    }
    if (opt->is("vif")) {
      auto parsed = toolstack::parse_vif_option(value, DevId{next_devid});
      if (auto* e = std::get_if<toolstack::VifOptionError>(&parsed)) return usage_error(e->message);
      auto spec = std::get<toolstack::VifSpec>(parsed);
      for (const auto& other : a.vifs) {
        if (other.devid == spec.devid)
          return usage_error("two vifs with devid " + num(spec.devid.value()));
      }
      spec.script = hotplug::resolve_script_path(spec.script);
      next_devid = spec.devid.value() + 1;
      a.vifs.push_back(std::move(spec));
    } else if (opt->is("guest-netns")) {
      a.guest_netns = std::string(value);
    } else if (opt->is("address")) {
      a.address = std::string(value);
    } else if (opt->is("queues")) {
      a.queues = parse_decimal<std::uint32_t>(value, 1, 64);
      if (!a.queues) return usage_error("--queues needs 1..64");
    } else if (opt->is("shim")) {
      a.shim = std::string(value);
    } else if (opt->is("no-guest")) {
      a.no_guest = true;
    } else if (opt->is("driver-domain")) {
      a.driver_domain = true;
    } else if (opt->is("ready-timeout-ms")) {
      auto t = parse_decimal<std::uint32_t>(value, 1, 600000);
      if (!t) return usage_error("--ready-timeout-ms needs 1..600000");
      a.ready_timeout_ms = *t;
    } else if (!value.starts_with("-") && a.name.empty()) {
      a.name = std::string(value);
    } else {
      return usage_error("create: unexpected '" + std::string(value) + "'");
    }
  }
  if (const auto& e = create.error()) {
    if (e->kind == cli::ArgError::Kind::unknown_option)
      return usage_error("create: unexpected '" + e->option + "'");
    return usage_error(e->message());
  }
  if (a.name.empty()) return usage_error("create needs a domain NAME");
  if (a.driver_domain && !a.vifs.empty())
    return usage_error("create --driver-domain takes no --vif (its backends serve other domains)");
  if (a.vifs.empty() && !a.driver_domain) return usage_error("create needs at least one --vif");
  return a;
}

}  // namespace unetback::xl
