// unetback-xl: libxl's part for a xensim world. `create` makes a domain, writes its vifs'
// xenstore nodes as libxl does, waits for the backend's InitWait, runs the hotplug script
// and starts the guest (netfront-shim); `destroy` closes the vifs, runs the script
// `offline`, stops the guest and destroys the domain; `list` shows the world; `save`,
// `restore` and `migrate` suspend a guest, tear its devices and domain down and bring it
// back in a new domain, as libxl's save/restore and a localhost migration do.
// The contract and its timeouts: libxl 4.17's libxl_nic.c and libxl_device.c, as observed in
// the real-Xen lab (docs/design.md, "unetback-xl").
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <poll.h>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <variant>
#include <vector>

#include "common/hotplug/hotplug_script.hpp"
#include "common/hv/hypervisor_spec.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/hv/xen/xen_xenstore.hpp"
#include "common/util/arg_parser.hpp"
#include "common/util/parse_decimal.hpp"
#include "tools/xl/guest_launcher.hpp"
#include "tools/xl/save_image.hpp"
#include "tools/xl/toolstack.hpp"
#include "tools/xl/vif_option.hpp"

namespace unetback {
namespace {

namespace ts = toolstack;
namespace hp = hotplug;
namespace fs = std::filesystem;

// Exit codes (in --help).
constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDeviceFailed = 3;  // as `xl create` when a device cannot be added
constexpr int kExitGuestFailed = 4;

constexpr DomId kDom0{0};
constexpr const char* kShimName = "netfront-shim";

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

void err(const std::string& msg) {
  std::cerr << "unetback-xl: " << msg << "\n";
}

std::string num(std::uint64_t v) {
  return std::to_string(v);
}

std::optional<std::uint32_t> parse_uint(std::string_view s, std::uint32_t max) {
  return parse_decimal<std::uint32_t>(s, 0, max);
}

struct CreateArgs {
  std::string name;
  std::vector<ts::VifSpec> vifs;
  std::optional<std::string> guest_netns;
  std::optional<std::string> address;
  std::optional<std::uint32_t> queues;
  std::optional<std::string> shim;
  bool no_guest = false;
  bool driver_domain = false;  // libxl's driver_domain=1: no vif, no guest program
  std::uint32_t ready_timeout_ms = 20000;
  std::vector<std::string> shim_extra;
};

std::string find_shim(const std::optional<std::string>& explicit_path) {
  if (explicit_path) return *explicit_path;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): a one-shot tool with one thread.
  if (const char* env = std::getenv("UNETBACK_SHIM"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path built = self.parent_path() / ".." / ".." / "frontend-shim" / kShimName;
    if (::access(built.c_str(), X_OK) == 0) return built.lexically_normal().string();
  }
  if (const char* path = std::getenv("PATH")) {  // NOLINT(concurrency-mt-unsafe): as above
    std::string_view rest(path);
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      const fs::path cand = fs::path(rest.substr(0, colon)) / kShimName;
      if (::access(cand.c_str(), X_OK) == 0) return cand.string();
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  return kShimName;
}

/// The xenstore socket of domain `d` in world `dir` (what a process inside it connects to).
std::string xs_socket(const std::string& dir, DomId d) {
  return dir + "/dom" + num(d.value()) + ".sock";
}

/// libxl__xs_path_cleanup's last step: `dir` goes once no device is left in it.
void rm_if_empty(hv::XenStore& xs, const std::string& dir) {
  if (auto left = xs.directory(dir); left && left->empty()) (void)xs.rm(dir);
}

/// One vif of a domain and the domain serving it (dom0, or a driver domain).
struct VifRef {
  DevId devid;
  DomId backend;
};

class World {
 public:
  explicit World(std::string dir)
      : dir_(std::move(dir)), hv_(dir_, hv::HypervisorOptions{}), xs_(hv_.open_xenstore()) {}

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

  /// The vifs of `domid` and the domains serving them: libxl's private copies
  /// (/libxl/<domid>/device/vif/<devid>, with the backend's domid), and any backend dir under
  /// dom0's backend/vif without one.
  std::vector<VifRef> vifs_of(DomId domid) {
    std::vector<VifRef> out;
    auto add = [&out](DevId devid, DomId backend) {
      for (const auto& r : out)
        if (r.devid == devid) return;
      out.push_back(VifRef{devid, backend});
    };
    const std::string priv = "/libxl/" + num(domid.value()) + "/device/vif";
    if (auto dir = xs_->directory(priv)) {
      for (const auto& d : *dir) {
        auto v = parse_uint(d, 0xffff);
        if (!v) continue;
        std::string key = priv;
        key.append("/").append(d).append("/backend-id");
        auto be = parse_uint(read_or(key, "0"), 0xfffe);
        add(DevId{*v}, DomId{static_cast<std::uint16_t>(be.value_or(0))});
      }
    }
    if (auto dir = xs_->directory("/local/domain/0/backend/vif/" + num(domid.value()))) {
      for (const auto& d : *dir)
        if (auto v = parse_uint(d, 0xffff)) add(DevId{*v}, kDom0);
    }
    std::sort(out.begin(), out.end(),
              [](const VifRef& a, const VifRef& b) { return a.devid.value() < b.devid.value(); });
    return out;
  }

  std::string read_or(const std::string& path, const std::string& fallback) {
    auto v = xs_->read(path);
    return v ? *v : fallback;
  }

  /// libxl's get_hotplug_env: `netdev` is the vif's B:gatewaydev ("" without one).
  hp::HotplugCall hotplug_call(const std::string& script, std::string action, DomId domid,
                               DevId devid) {
    const std::string netdev = read_or(ts::backend_path(kDom0, domid, devid) + "/gatewaydev", "");
    return hp::HotplugCall{script, std::move(action), domid, devid, netdev, xs_socket(dir_, kDom0)};
  }

 private:
  std::string dir_;
  hv::SimHypervisor hv_;
  std::unique_ptr<hv::XenStore> xs_;
};

/// How long dom0 waits for a driver domain's `xl devd` to run the script `offline` and remove
/// the backend dir once the vif is Closed, before it removes what is left itself.
constexpr std::chrono::seconds kDriverDomainCleanupTimeout{10};

/// A vif a driver domain serves: close it, let that domain's devd run the script `offline`
/// and remove the backend dir (the backend domain's duty), then remove the rest (libxl's
/// libxl__xs_path_cleanup of what the driver domain cannot remove).
void remove_remote_vif(World& w, DomId domid, const VifRef& vif) {
  const std::string be = ts::backend_path(vif.backend, domid, vif.devid);
  if (auto ec = ts::close_vif(w.xs(), vif.backend, domid, vif.devid)) {
    err("libxl: error: " + be + ": backend did not reach Closed (6) within " +
        num(ts::kDestroyTimeout.count()) + " s: " + ec.message() + "; tearing down anyway");
  } else if (w.hv().domain_exists(vif.backend)) {
    const auto deadline = std::chrono::steady_clock::now() + kDriverDomainCleanupTimeout;
    while (w.xs().read(be + "/state") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (w.xs().read(be + "/state")) {
      err("libxl: warning: " + be + ": the driver domain did not remove it within " +
          num(kDriverDomainCleanupTimeout.count()) + " s (is `unetback-xl devd` running there?)");
    }
  }
  ts::delete_vif_nodes(w.xs(), vif.backend, domid, vif.devid);
  const std::string parent =
      "/local/domain/" + num(vif.backend.value()) + "/backend/vif/" + num(domid.value());
  rm_if_empty(w.xs(), parent);
}

/// libxl's device removal for every vif of `domid`: close, script offline, delete nodes.
void remove_all_vifs(World& w, DomId domid) {
  for (const VifRef& vif : w.vifs_of(domid)) {
    const DevId devid = vif.devid;
    if (vif.backend != kDom0) {
      remove_remote_vif(w, domid, vif);
      continue;
    }
    const std::string be = ts::backend_path(kDom0, domid, devid);
    const std::string script = w.read_or(be + "/script", "");
    // `offline` undoes what `online` did; for a vif whose online run failed or never ran there
    // is nothing to undo, and the device the script would name (e.g. a vifname that was
    // taken) may be someone else's. Read before closing: the backend removes the key.
    const bool went_online = w.read_or(be + "/hotplug-status", "") == "connected";
    if (auto ec = ts::close_vif(w.xs(), kDom0, domid, devid)) {
      err("libxl: error: " + be + ": backend did not reach Closed (6) within " +
          num(ts::kDestroyTimeout.count()) + " s: " + ec.message() + "; tearing down anyway");
    }
    if (!script.empty() && went_online) {
      auto r = hp::run_hotplug_script(w.hotplug_call(script, "offline", domid, devid),
                                      hp::kHotplugTimeout);
      if (!r) {
        err("hotplug script " + script + " offline: " + r.error().message());
      } else if (!r->ok()) {
        err("hotplug script " + script + " offline " + r->describe());
      }
    }
    ts::delete_vif_nodes(w.xs(), kDom0, domid, devid);
  }
  // libxl__xs_path_cleanup also removes the parents the device dirs leave empty.
  const std::string parent = "/local/domain/0/backend/vif/" + num(domid.value());
  rm_if_empty(w.xs(), parent);
  (void)w.xs().rm("/libxl/" + num(domid.value()));
}

/// The domain is gone: as libxl's domain destroy, remove its xenstore home too (xenstored
/// itself only forgets the connection).
void destroy_domain(World& w, DomId domid, bool report) {
  if (auto ec = w.hv().destroy_domain(domid); ec && report && w.hv().domain_exists(domid))
    err("destroy domain " + num(domid.value()) + ": " + ec.message());
  ts::remove_vm_nodes(w.xs(), domid);
  (void)w.xs().rm("/local/domain/" + num(domid.value()));
}

void stop_guest(World& w, DomId domid) {
  const std::string pf = w.pid_file(domid);
  std::ifstream in(pf);
  long pid = 0;
  if (in >> pid && pid > 0 && ts::process_is(static_cast<pid_t>(pid), kShimName)) {
    if (!ts::terminate_process(static_cast<pid_t>(pid), std::chrono::seconds(5))) {
      err("guest pid " + num(static_cast<std::uint64_t>(pid)) +
          " did not stop on SIGTERM within 5 s; killed");
    }
  }
  std::error_code ec;
  fs::remove(pf, ec);
}

/// Undo a failed create: devices, guest, domain (libxl destroys the domain).
void undo_create(World& w, DomId domid) {
  remove_all_vifs(w, domid);
  stop_guest(w, domid);
  destroy_domain(w, domid, true);
}

/// Waits until `be`/hotplug-status is no longer empty (a driver domain's script ran); its
/// value, or "" after `limit`.
std::string wait_hotplug_status(World& w, const std::string& be, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::string v = w.read_or(be + "/hotplug-status", "");
    if (!v.empty() || std::chrono::steady_clock::now() >= deadline) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// libxl's domain build for `create` and `restore`: the domain, its /vm and control nodes
/// and each vif (nodes, InitWait, the hotplug script `online`). The domid, or the exit code
/// (the domain destroyed again).
std::variant<DomId, int> build_domain(World& w, const std::string& name, const std::string& uuid,
                                      const std::vector<ts::VifSpec>& vifs,
                                      bool driver_domain = false) {
  auto created = w.hv().create_domain(name, 0, driver_domain);
  if (!created) {
    err("cannot create domain '" + name + "': " + created.error().message() +
        (created.error() == std::errc::file_exists ? " (name in use)" : ""));
    return kExitError;
  }
  const DomId domid = *created;
  if (auto ec = ts::add_vm_nodes(w.xs(), domid, name, uuid)) {
    err("cannot write the /vm nodes of domain " + num(domid.value()) + ": " + ec.message());
    undo_create(w, domid);
    return kExitError;
  }
  if (auto ec = ts::add_control_nodes(w.xs(), domid)) {
    err("cannot write the control nodes of domain " + num(domid.value()) + ": " + ec.message());
    undo_create(w, domid);
    return kExitError;
  }

  for (const ts::VifSpec& spec : vifs) {
    if (auto ec = ts::add_vif(w.xs(), spec.backend_id, domid, spec)) {
      err("cannot write the nodes of vif " + num(spec.devid.value()) + ": " + ec.message());
      undo_create(w, domid);
      return kExitError;
    }
  }
  // libxl__wait_device_connection: InitWait within LIBXL_INIT_TIMEOUT, then the script.
  for (const ts::VifSpec& spec : vifs) {
    const std::string be = ts::backend_path(spec.backend_id, domid, spec.devid);
    if (ts::wait_for_value(w.xs(), be + "/state", "2", ts::kInitTimeout)) {
      err("libxl: error: unable to add device with path " + be + " (backend state " +
          w.read_or(be + "/state", "missing") + " after " + num(ts::kInitTimeout.count()) +
          " s; is unetbackd running " +
          (spec.backend_id == kDom0 ? std::string("on this world?)")
                                    : "in domain " + num(spec.backend_id.value()) + "?)"));
      undo_create(w, domid);
      return kExitDeviceFailed;
    }
    if (spec.backend_id != kDom0) {
      // The driver domain's own `xl devd` runs the script there (libxl does not run it for a
      // backend in another domain): wait for the outcome it writes.
      const std::string status = wait_hotplug_status(w, be, hp::kHotplugTimeout);
      if (status != "connected") {
        const std::string herr = w.read_or(be + "/hotplug-error", "");
        err("libxl: error: hotplug script " + spec.script + " online for " + be + " in domain " +
            num(spec.backend_id.value()) + ": " +
            (status.empty() ? "no outcome within " + num(hp::kHotplugTimeout.count()) +
                                  " s (is `unetback-xl devd` running there?)"
                            : "hotplug-status " + status) +
            (herr.empty() ? "" : ": " + herr));
        undo_create(w, domid);
        return kExitDeviceFailed;
      }
      continue;
    }
    auto r = hp::run_hotplug_script(w.hotplug_call(spec.script, "online", domid, spec.devid),
                                    hp::kHotplugTimeout);
    if (!r || !r->ok()) {
      const std::string why = !r ? "cannot run: " + r.error().message() : r->describe();
      const std::string herr = w.read_or(be + "/hotplug-error", "");
      std::string msg = "libxl: error: hotplug script " + spec.script + " online for " + be;
      msg += " " + why;
      if (!herr.empty()) msg += ": " + herr;
      err(msg);
      undo_create(w, domid);
      return kExitDeviceFailed;
    }
  }
  return domid;
}

std::optional<DomId> resolve_domain(World& w, const std::string& name_or_id) {
  if (auto v = parse_uint(name_or_id, 0xfffe)) {
    const DomId d{static_cast<std::uint16_t>(*v)};
    return d;
  }
  auto doms = w.xs().directory("/local/domain");
  if (!doms) return std::nullopt;
  for (const auto& d : *doms) {
    auto v = parse_uint(d, 0xfffe);
    if (v && *v != 0 && w.read_or("/local/domain/" + d + "/name", "") == name_or_id)
      return DomId{static_cast<std::uint16_t>(*v)};
  }
  return std::nullopt;
}

int cmd_create(World& w, CreateArgs a) {
  // backend=: the serving domain, by name or domid, must exist now (libxl resolves it too).
  for (ts::VifSpec& spec : a.vifs) {
    if (spec.backend.empty()) continue;
    const auto be = resolve_domain(w, spec.backend);
    if (!be || !w.hv().domain_exists(*be)) {
      err("vif " + num(spec.devid.value()) + ": no such backend domain: " + spec.backend);
      return kExitError;
    }
    spec.backend_id = *be;
  }
  const auto built = build_domain(w, a.name, ts::generate_uuid(), a.vifs, a.driver_domain);
  if (const int* code = std::get_if<int>(&built)) return *code;
  const DomId domid = std::get<DomId>(built);

  if (!a.no_guest && !a.driver_domain) {
    const ts::VifSpec& first = a.vifs.front();
    ts::GuestLaunch launch;
    launch.argv = {find_shim(a.shim),  "--hypervisor", hv::format_sim_spec(w.dir()), "--domid",
                   num(domid.value()), "--devid",      num(first.devid.value())};
    if (a.guest_netns) launch.argv.insert(launch.argv.end(), {"--netns", *a.guest_netns});
    if (a.address) launch.argv.insert(launch.argv.end(), {"--address", *a.address});
    if (a.queues) launch.argv.insert(launch.argv.end(), {"--queues", num(*a.queues)});
    launch.argv.insert(launch.argv.end(), {"--resume-file", w.resume_file(a.name)});
    launch.argv.insert(launch.argv.end(), a.shim_extra.begin(), a.shim_extra.end());
    launch.log_path = w.log_file(domid);
    launch.ready_timeout = std::chrono::milliseconds(a.ready_timeout_ms);
    auto outcome = ts::launch_guest(launch);
    if (auto* f = std::get_if<ts::LaunchFailure>(&outcome)) {
      err("guest of domain " + num(domid.value()) + " did not come up: " + f->message);
      undo_create(w, domid);
      return kExitGuestFailed;
    }
    const auto& g = std::get<ts::LaunchedGuest>(outcome);
    std::ofstream(w.pid_file(domid)) << g.pid << "\n";
    std::cerr << g.ready_line << " (pid " << g.pid << ")\n";
  }
  std::cout << "domid " << domid.value() << std::endl;
  return kExitOk;
}

int cmd_destroy(World& w, const std::string& target) {
  const auto domid = resolve_domain(w, target);
  if (!domid || *domid == kDom0) {
    err("no such domain: " + target);
    return kExitError;
  }
  const bool exists = w.hv().domain_exists(*domid);
  const bool has_vifs = !w.vifs_of(*domid).empty();
  if (!exists && !has_vifs && !fs::exists(w.pid_file(*domid))) {
    err("no such domain: " + target);
    return kExitError;
  }
  remove_all_vifs(w, *domid);
  stop_guest(w, *domid);
  destroy_domain(w, *domid, true);
  return w.hv().domain_exists(*domid) ? kExitError : kExitOk;
}

int cmd_list(World& w) {
  auto doms = w.xs().directory("/local/domain");
  if (!doms) {
    err("cannot read /local/domain: " + doms.error().message());
    return kExitError;
  }
  std::printf("%-6s %-16s %-6s %-6s %-10s %-12s %-14s %s\n", "domid", "name", "devid", "state",
              "hotplug", "bridge", "tap", "guest");
  for (const auto& d : *doms) {
    auto v = parse_uint(d, 0xfffe);
    if (!v || *v == 0) continue;
    const DomId domid{static_cast<std::uint16_t>(*v)};
    const std::string name = w.read_or("/local/domain/" + d + "/name", "?");
    std::string guest = "-";
    std::ifstream in(w.pid_file(domid));
    long pid = 0;
    if (in >> pid) {
      guest = num(static_cast<std::uint64_t>(pid)) +
              (ts::process_is(static_cast<pid_t>(pid), kShimName) ? "" : "(gone)");
    }
    const auto vifs = w.vifs_of(domid);
    if (vifs.empty()) {
      std::printf("%-6s %-16s %-6s %-6s %-10s %-12s %-14s %s\n", d.c_str(), name.c_str(), "-", "-",
                  "-", "-", "-", guest.c_str());
    }
    for (const VifRef& vif : vifs) {
      const DevId devid = vif.devid;
      const std::string be = ts::backend_path(vif.backend, domid, devid);
      const std::string tap = w.read_or(be + "/vifname", "vif" + d + "." + num(devid.value()));
      std::string hp = w.read_or(be + "/hotplug-status", "-");
      if (hp.empty()) hp = "(pending)";
      std::printf("%-6s %-16s %-6u %-6s %-10s %-12s %-14s %s\n", d.c_str(), name.c_str(),
                  devid.value(), w.read_or(be + "/state", "?").c_str(), hp.c_str(),
                  w.read_or(be + "/bridge", "-").c_str(), tap.c_str(), guest.c_str());
    }
  }
  return kExitOk;
}

/// The guest process of `domid` (its pid file, checked to be a netfront-shim), or 0.
pid_t guest_of(World& w, DomId domid) {
  std::ifstream in(w.pid_file(domid));
  long pid = 0;
  if (in >> pid && pid > 0 && ts::process_is(static_cast<pid_t>(pid), kShimName))
    return static_cast<pid_t>(pid);
  return 0;
}

/// The first of `vifs` that create would refuse, as "vif N: why"; nullopt if there is none.
std::optional<std::string> vifs_error(const std::vector<ts::VifSpec>& vifs) {
  for (const ts::VifSpec& spec : vifs)
    if (auto why = ts::vif_spec_error(spec)) return "vif " + num(spec.devid.value()) + ": " + *why;
  return std::nullopt;
}

/// libxl's save up to the image: the guest suspends (control/shutdown), its devices are
/// removed while it is quiet, it lets its domain go, the domain is destroyed. The image, or
/// nullopt (said why) with the domain left running when the guest never acknowledged.
std::optional<ts::SavedDomain> suspend_domain(World& w, DomId domid) {
  ts::SavedDomain saved;
  const std::string home = "/local/domain/" + num(domid.value());
  saved.name = w.read_or(home + "/name", "");
  const std::string vm = w.read_or(home + "/vm", "");
  saved.uuid = w.read_or(vm + "/uuid", "");
  if (saved.uuid.empty()) saved.uuid = ts::generate_uuid();
  saved.guest_pid = guest_of(w, domid);
  if (saved.name.empty() || saved.guest_pid == 0) {
    err("domain " + num(domid.value()) + " has no running guest to suspend");
    return std::nullopt;
  }
  for (const VifRef& vif : w.vifs_of(domid)) {
    const DevId devid = vif.devid;
    auto spec = ts::read_vif_spec(w.xs(), domid, devid);
    if (!spec) {
      err("vif " + num(devid.value()) + " of domain " + num(domid.value()) +
          " has no libxl configuration to save");
      return std::nullopt;
    }
    saved.vifs.push_back(std::move(*spec));
  }
  if (saved.vifs.empty()) {
    err("domain " + num(domid.value()) + " has no vif to save");
    return std::nullopt;
  }
  // What restore would refuse is refused now, while the guest still runs.
  if (auto why = vifs_error(saved.vifs)) {
    err("domain " + num(domid.value()) + " has " + *why + ": not suspended");
    return std::nullopt;
  }
  // libxl__domain_suspend_device_model / _common: the PV guest's way, through xenstore.
  const std::string req = home + "/control/shutdown";
  if (auto ec = w.xs().write(req, "suspend")) {
    err("cannot write " + req + ": " + ec.message());
    return std::nullopt;
  }
  if (ts::wait_for_value(w.xs(), req, "", ts::kSuspendAckTimeout)) {
    (void)w.xs().write(req, "");  // libxl cancels the request it made
    err("guest of domain " + num(domid.value()) + " did not acknowledge the suspend request in " +
        num(ts::kSuspendAckTimeout.count()) + " s (was it started with --resume-file?)");
    return std::nullopt;
  }
  // libxl__destroy_domid after the save: the devices, then the domain.
  remove_all_vifs(w, domid);
  const auto deadline = std::chrono::steady_clock::now() + ts::kSuspendReleaseTimeout;
  while (w.hv().domain_exists(domid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (w.hv().domain_exists(domid)) {
    // Destroying a domain kills the process running it: the guest would be lost.
    err("guest of domain " + num(domid.value()) + " did not let its domain go within " +
        num(ts::kSuspendReleaseTimeout.count()) + " s of its devices' removal");
    return std::nullopt;
  }
  destroy_domain(w, domid, true);
  std::error_code ec;
  fs::remove(w.pid_file(domid), ec);
  return saved;
}

/// libxl's restore: the domain built again, the guest resumed in it. Prints "domid N". Its vifs
/// pass create's checks first: a save image is a file, and what it says is not trusted more than
/// a --vif option.
int resume_domain(World& w, const ts::SavedDomain& saved) {
  if (auto why = vifs_error(saved.vifs)) {
    err("the saved domain '" + saved.name + "' has " + *why + ": not restored");
    return kExitError;
  }
  if (!ts::process_is(saved.guest_pid, kShimName)) {
    err("the saved guest (pid " + num(static_cast<std::uint64_t>(saved.guest_pid)) +
        ") is not running any more: nothing to restore");
    return kExitError;
  }
  const auto built = build_domain(w, saved.name, saved.uuid, saved.vifs);
  if (const int* code = std::get_if<int>(&built)) return *code;
  const DomId domid = std::get<DomId>(built);
  // The resumed domain's start info: its new identity, then the unpause.
  const std::string rf = w.resume_file(saved.name);
  {
    std::ofstream out(rf + ".tmp", std::ios::trunc);
    out << "domid " << domid.value() << "\n";
    if (!out.flush()) {
      err("cannot write " + rf + ".tmp");
      undo_create(w, domid);
      return kExitError;
    }
  }
  std::error_code ec;
  fs::rename(rf + ".tmp", rf, ec);
  if (ec || ::kill(saved.guest_pid, SIGUSR1) != 0) {
    err("cannot resume the guest (pid " + num(static_cast<std::uint64_t>(saved.guest_pid)) +
        "): " + (ec ? ec : std::error_code(errno, std::generic_category())).message());
    undo_create(w, domid);
    return kExitGuestFailed;
  }
  std::ofstream(w.pid_file(domid)) << saved.guest_pid << "\n";
  const std::string fe = ts::frontend_path(domid, saved.vifs.front().devid);
  if (ts::wait_for_value(w.xs(), fe + "/state", "4", std::chrono::milliseconds(20000))) {
    err("guest of domain " + num(domid.value()) + " did not connect " + fe + " after resuming " +
        "(frontend state " + w.read_or(fe + "/state", "missing") + ")");
    undo_create(w, domid);
    return kExitGuestFailed;
  }
  std::cout << "domid " << domid.value() << std::endl;
  return kExitOk;
}

std::optional<DomId> running_domain(World& w, const std::string& target) {
  const auto domid = resolve_domain(w, target);
  if (!domid || *domid == kDom0 || !w.hv().domain_exists(*domid)) {
    err("no such domain: " + target);
    return std::nullopt;
  }
  return domid;
}

int cmd_save(World& w, const std::string& target, const std::string& file) {
  const auto domid = running_domain(w, target);
  if (!domid) return kExitError;
  auto saved = suspend_domain(w, *domid);
  if (!saved) return kExitError;
  auto text = ts::format_save_image(*saved);
  std::ofstream out(file, std::ios::trunc);
  if (!text || !(out << *text) || !out.flush()) {
    err("cannot write the save file " + file + " (the guest stays suspended, pid " +
        num(static_cast<std::uint64_t>(saved->guest_pid)) + ")");
    return kExitError;
  }
  std::cerr << "Saving to " << file << ": domain " << domid->value() << " suspended, guest pid "
            << saved->guest_pid << "\n";
  return kExitOk;
}

int cmd_restore(World& w, const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    err("cannot read the save file " + file);
    return kExitError;
  }
  auto saved = ts::parse_save_image(text.str());
  if (!saved) {
    err(file + " is not a save file of unetback-xl save");
    return kExitError;
  }
  return resume_domain(w, *saved);
}

int cmd_migrate(World& w, const std::string& target) {
  const auto domid = running_domain(w, target);
  if (!domid) return kExitError;
  auto saved = suspend_domain(w, *domid);
  if (!saved) return kExitError;
  return resume_domain(w, *saved);
}

/// `xl devd` inside a driver domain: on its own xenstore connection it watches the vifs it
/// serves (/local/domain/<self>/backend/vif) and runs their hotplug scripts there, as libxl's
/// device events handler does: `online` once the backend is in InitWait with online=1 and no
/// hotplug-status yet, `offline` once the vif is Closed with online=0 (or its dir is gone),
/// after which it removes the backend dir, which only the backend's domain may do.
class Devd {
 public:
  Devd(const std::string& world, DomId self)
      : self_(self),
        sock_(xs_socket(world, self)),
        root_("/local/domain/" + num(self.value()) + "/backend/vif"),
        xs_(sock_) {}

  int run() {
    auto watch = hv::XsWatch::add(xs_, root_, "devd");
    if (!watch) {
      err("devd: cannot watch " + root_ + ": " + watch.error().message());
      return kExitError;
    }
    std::cerr << "unetback-xl devd: serving the hotplug scripts of " << root_ << "\n";
    while (stop_requested == 0) {
      while (xs_.read_watch()) {
      }
      if (auto ec = xs_.connection_error()) {
        // The domain was destroyed (its xenstore connection with it), as xl devd dies with
        // its domain.
        std::cerr << "unetback-xl devd: xenstore connection gone (" << ec.message()
                  << "): exiting\n";
        return kExitOk;
      }
      scan();
      pollfd pfd{xs_.watch_fd(), POLLIN, 0};
      (void)::poll(&pfd, 1, 200);
    }
    return kExitOk;
  }

  static inline volatile std::sig_atomic_t stop_requested = 0;

 private:
  struct Online {
    std::string script, netdev;
  };
  using Key = std::pair<std::uint16_t, std::uint32_t>;  // frontend domid, devid

  std::string read_or(const std::string& path, const std::string& fallback) {
    auto v = xs_.read(path);
    return v ? *v : fallback;
  }
  std::string be_path(const Key& k) const {
    return root_ + "/" + num(k.first) + "/" + num(k.second);
  }

  void scan() {
    std::vector<Key> present;
    if (auto fronts = xs_.directory(root_)) {
      for (const auto& f : *fronts) {
        auto fd = parse_uint(f, 0xfffe);
        if (!fd) continue;
        if (auto devs = xs_.directory(root_ + "/" + f)) {
          for (const auto& d : *devs) {
            if (auto dv = parse_uint(d, 0xffff))
              present.emplace_back(static_cast<std::uint16_t>(*fd), *dv);
          }
        }
      }
    }
    for (const Key& k : present) {
      const std::string be = be_path(k);
      const std::string state = read_or(be + "/state", "");
      const std::string online = read_or(be + "/online", "");
      if (!online_.contains(k) && !failed_.contains(k) && state == "2" && online == "1" &&
          read_or(be + "/hotplug-status", "x").empty()) {
        bring_online(k);
      } else if (online_.contains(k) && online == "0" && state == "6") {
        take_offline(k);
      }
    }
    // A vif whose dir went before we saw it Closed (dom0 removed it): offline all the same.
    std::vector<Key> gone;
    for (const auto& [k, o] : online_)
      if (std::find(present.begin(), present.end(), k) == present.end()) gone.push_back(k);
    for (const Key& k : gone) take_offline(k);
    std::erase_if(failed_, [&](const Key& k) {
      return std::find(present.begin(), present.end(), k) == present.end();
    });
  }

  hp::HotplugCall call(const Key& k, const Online& o, std::string action) const {
    return hp::HotplugCall{o.script,        std::move(action), DomId{k.first},
                           DevId{k.second}, o.netdev,          sock_};
  }

  void bring_online(const Key& k) {
    const std::string be = be_path(k);
    Online o{read_or(be + "/script", ""), read_or(be + "/gatewaydev", "")};
    if (o.script.empty()) {
      failed_.insert(k);
      (void)xs_.write(be + "/hotplug-error", "no script");
      (void)xs_.write(be + "/hotplug-status", "error");
      return;
    }
    auto r = hp::run_hotplug_script(call(k, o, "online"), hp::kHotplugTimeout);
    if (!r || !r->ok()) {
      const std::string why = !r ? "cannot run: " + r.error().message() : r->describe();
      err("devd: hotplug script " + o.script + " online for " + be + " " + why);
      failed_.insert(k);
      // The script writes its own error on failure; one that could not even run cannot.
      if (read_or(be + "/hotplug-status", "").empty()) {
        (void)xs_.write(be + "/hotplug-error", o.script + " " + why);
        (void)xs_.write(be + "/hotplug-status", "error");
      }
      return;
    }
    std::cerr << "unetback-xl devd: " << o.script << " online for " << be << "\n";
    online_.emplace(k, std::move(o));
  }

  void take_offline(const Key& k) {
    const std::string be = be_path(k);
    const Online o = online_.at(k);
    online_.erase(k);
    auto r = hp::run_hotplug_script(call(k, o, "offline"), hp::kHotplugTimeout);
    if (!r || !r->ok()) {
      err("devd: hotplug script " + o.script + " offline for " + be + " " +
          (!r ? "cannot run: " + r.error().message() : r->describe()));
    } else {
      std::cerr << "unetback-xl devd: " << o.script << " offline for " << be << "\n";
    }
    (void)xs_.rm(be);
    const std::string parent = root_ + "/" + num(k.first);
    rm_if_empty(xs_, parent);
  }

  DomId self_;
  std::string sock_, root_;
  hv::LibXenStore xs_;
  std::map<Key, Online> online_;
  std::set<Key> failed_;
};

int cmd_devd(const std::string& dir, const std::string& target) {
  DomId self{};
  {
    World w(dir);  // dom0's view, to find the domain
    const auto d = resolve_domain(w, target);
    if (!d || *d == kDom0 || !w.hv().domain_exists(*d)) {
      err("no such domain: " + target);
      return kExitError;
    }
    self = *d;
  }
  std::signal(SIGTERM, [](int) { Devd::stop_requested = 1; });
  std::signal(SIGINT, [](int) { Devd::stop_requested = 1; });
  Devd devd(dir, self);
  return devd.run();
}

int usage_error(const std::string& msg) {
  err(msg);
  std::cerr << "Try 'unetback-xl --help'.\n";
  return kExitUsage;
}

int run(std::vector<std::string_view> args) {
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
  const std::string_view cmd = rest.front();
  std::error_code ec;
  const std::string dir = fs::absolute(*world, ec).lexically_normal().string();

  if (cmd == "list") {
    if (rest.size() != 1) return usage_error("list takes no arguments");
    World w(dir);
    return cmd_list(w);
  }
  if (cmd == "destroy") {
    if (rest.size() != 2) return usage_error("destroy NAME|DOMID");
    World w(dir);
    return cmd_destroy(w, std::string(rest[1]));
  }
  if (cmd == "save") {
    if (rest.size() != 3) return usage_error("save NAME|DOMID FILE");
    World w(dir);
    return cmd_save(w, std::string(rest[1]), std::string(rest[2]));
  }
  if (cmd == "restore") {
    if (rest.size() != 2) return usage_error("restore FILE");
    World w(dir);
    return cmd_restore(w, std::string(rest[1]));
  }
  if (cmd == "devd") {
    if (rest.size() != 2) return usage_error("devd NAME|DOMID");
    return cmd_devd(dir, std::string(rest[1]));
  }
  if (cmd == "migrate") {
    // Real xl wants a host; only this one is reachable in a xensim world.
    if (rest.size() != 2 && !(rest.size() == 3 && rest[2] == "localhost"))
      return usage_error("migrate NAME|DOMID [localhost]");
    World w(dir);
    return cmd_migrate(w, std::string(rest[1]));
  }
  if (cmd != "create") return usage_error("unknown command '" + std::string(cmd) + "'");

  static constexpr cli::OptionSpec kCreateOptions[] = {
      cli::valued("vif", "a SPEC"),     cli::valued("guest-netns", "a name"),
      cli::valued("address", "a CIDR"), cli::valued("queues", "1..64"),
      cli::valued("shim", "a path"),    cli::flag("no-guest"),
      cli::flag("driver-domain"),       cli::valued("ready-timeout-ms", "1..600000")};
  CreateArgs a;
  std::uint32_t next_devid = 0;
  const std::span<const std::string_view> create_args(rest);
  cli::ArgParser create(create_args.subspan(1), kCreateOptions, {.double_dash = true});
  while (const auto opt = create.next()) {
    const std::string_view value = opt->value;
    if (opt->kind == cli::Arg::Kind::end_of_options) {
      a.shim_extra.assign(create.rest().begin(), create.rest().end());
      break;
    }
    if (opt->is("vif")) {
      auto parsed = ts::parse_vif_option(value, DevId{next_devid});
      if (auto* e = std::get_if<ts::VifOptionError>(&parsed)) return usage_error(e->message);
      auto spec = std::get<ts::VifSpec>(parsed);
      for (const auto& other : a.vifs) {
        if (other.devid == spec.devid)
          return usage_error("two vifs with devid " + num(spec.devid.value()));
      }
      spec.script = hp::resolve_script_path(spec.script);
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
  World w(dir);
  return cmd_create(w, std::move(a));
}

}  // namespace
}  // namespace unetback

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return unetback::run(std::move(args));
  } catch (const unetback::SetupError& e) {
    unetback::err(e.what());
    return unetback::kExitError;
  } catch (const std::exception& e) {
    unetback::err(std::string("error: ") + e.what());
    return unetback::kExitError;
  }
}
