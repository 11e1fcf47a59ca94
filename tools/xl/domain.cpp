#include "tools/xl/domain.hpp"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "common/hotplug/hotplug_script.hpp"
#include "tools/xl/guest_launcher.hpp"

namespace unetback::xl {
namespace {

namespace ts = toolstack;
namespace hp = hotplug;

/// How long dom0 waits for a driver domain's `xl devd` to run the script `offline` and remove
/// the backend dir once the vif is Closed, before it removes what is left itself.
constexpr std::chrono::seconds kDriverDomainCleanupTimeout{10};

/// Closes the vif (online=0, state=5) and waits for Closed; false (said so: the teardown goes
/// on all the same, as libxl's) when the backend did not get there.
bool close_or_report(World& w, DomId backend, DomId domid, DevId devid) {
  if (auto ec = ts::close_vif(w.xs(), backend, domid, devid)) {
    err("libxl: error: " + ts::backend_path(backend, domid, devid) +
        ": backend did not reach Closed (6) within " + num(ts::kDestroyTimeout.count()) +
        " s: " + ec.message() + "; tearing down anyway");
    return false;
  }
  return true;
}

/// A vif a driver domain serves: close it, let that domain's devd run the script `offline`
/// and remove the backend dir (the backend domain's duty), then remove the rest (libxl's
/// libxl__xs_path_cleanup of what the driver domain cannot remove).
void remove_remote_vif(World& w, DomId domid, const VifRef& vif) {
  const std::string be = ts::backend_path(vif.backend, domid, vif.devid);
  if (close_or_report(w, vif.backend, domid, vif.devid) && w.hv().domain_exists(vif.backend)) {
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

/// A vif dom0 serves: close it, run the script `offline` here, delete its nodes.
void remove_local_vif(World& w, DomId domid, DevId devid) {
  const std::string be = ts::backend_path(kDom0, domid, devid);
  const std::string script = w.read_or(be + "/script", "");
  // `offline` undoes what `online` did; for a vif whose online run failed or never ran there
  // is nothing to undo, and the device the script would name (e.g. a vifname that was
  // taken) may be someone else's. Read before closing: the backend removes the key.
  const bool went_online = w.read_or(be + "/hotplug-status", "") == "connected";
  (void)close_or_report(w, kDom0, domid, devid);
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

/// The domain's /vm and control nodes and each vif's nodes; false (said why) when one cannot
/// be written.
bool write_domain_nodes(World& w, DomId domid, const std::string& name, const std::string& uuid,
                        const std::vector<ts::VifSpec>& vifs) {
  if (auto ec = ts::add_vm_nodes(w.xs(), domid, name, uuid)) {
    err("cannot write the /vm nodes of domain " + num(domid.value()) + ": " + ec.message());
    return false;
  }
  if (auto ec = ts::add_control_nodes(w.xs(), domid)) {
    err("cannot write the control nodes of domain " + num(domid.value()) + ": " + ec.message());
    return false;
  }
  for (const ts::VifSpec& spec : vifs) {
    if (auto ec = ts::add_vif(w.xs(), spec.backend_id, domid, spec)) {
      err("cannot write the nodes of vif " + num(spec.devid.value()) + ": " + ec.message());
      return false;
    }
  }
  return true;
}

/// The driver domain's own `xl devd` runs the script there (libxl does not run it for a
/// backend in another domain): waits for the outcome it writes; false (said why) unless it
/// is "connected".
bool wait_remote_online(World& w, const std::string& be, const ts::VifSpec& spec) {
  const std::string status = wait_hotplug_status(w, be, hp::kHotplugTimeout);
  if (status == "connected") return true;
  const std::string herr = w.read_or(be + "/hotplug-error", "");
  err("libxl: error: hotplug script " + spec.script + " online for " + be + " in domain " +
      num(spec.backend_id.value()) + ": " +
      (status.empty() ? "no outcome within " + num(hp::kHotplugTimeout.count()) +
                            " s (is `unetback-xl devd` running there?)"
                      : "hotplug-status " + status) +
      (herr.empty() ? "" : ": " + herr));
  return false;
}

/// dom0's hotplug script `online` for the vif; false (said why) when it fails.
bool run_online_script(World& w, DomId domid, const std::string& be, const ts::VifSpec& spec) {
  auto r = hp::run_hotplug_script(w.hotplug_call(spec.script, "online", domid, spec.devid),
                                  hp::kHotplugTimeout);
  const auto why = script_failure(r);
  if (!why) return true;
  const std::string herr = w.read_or(be + "/hotplug-error", "");
  std::string msg = "libxl: error: hotplug script " + spec.script + " online for " + be;
  msg += " " + *why;
  if (!herr.empty()) msg += ": " + herr;
  err(msg);
  return false;
}

/// libxl__wait_device_connection for one vif: InitWait within LIBXL_INIT_TIMEOUT, then the
/// script; false (said why) when the device cannot be added.
bool connect_vif(World& w, DomId domid, const ts::VifSpec& spec) {
  const std::string be = ts::backend_path(spec.backend_id, domid, spec.devid);
  if (ts::wait_for_value(w.xs(), be + "/state", "2", ts::kInitTimeout)) {
    err("libxl: error: unable to add device with path " + be + " (backend state " +
        w.read_or(be + "/state", "missing") + " after " + num(ts::kInitTimeout.count()) +
        " s; is unetbackd running " +
        (spec.backend_id == kDom0 ? std::string("on this world?)")
                                  : "in domain " + num(spec.backend_id.value()) + "?)"));
    return false;
  }
  if (spec.backend_id != kDom0) return wait_remote_online(w, be, spec);
  return run_online_script(w, domid, be, spec);
}

}  // namespace

std::variant<DomId, int> build_domain(World& w, const std::string& name, const std::string& uuid,
                                      const std::vector<ts::VifSpec>& vifs, bool driver_domain) {
  auto created = w.hv().create_domain(name, 0, driver_domain);
  if (!created) {
    err("cannot create domain '" + name + "': " + created.error().message() +
        (created.error() == std::errc::file_exists ? " (name in use)" : ""));
    return kExitError;
  }
  const DomId domid = *created;
  if (!write_domain_nodes(w, domid, name, uuid, vifs)) {
    undo_create(w, domid);
    return kExitError;
  }
  for (const ts::VifSpec& spec : vifs) {
    if (!connect_vif(w, domid, spec)) {
      undo_create(w, domid);
      return kExitDeviceFailed;
    }
  }
  return domid;
}

void remove_all_vifs(World& w, DomId domid) {
  for (const VifRef& vif : w.vifs_of(domid)) {
    if (vif.backend != kDom0) {
      remove_remote_vif(w, domid, vif);
    } else {
      remove_local_vif(w, domid, vif.devid);
    }
  }
  // libxl__xs_path_cleanup also removes the parents the device dirs leave empty.
  const std::string parent = "/local/domain/0/backend/vif/" + num(domid.value());
  rm_if_empty(w.xs(), parent);
  (void)w.xs().rm("/libxl/" + num(domid.value()));
}

void destroy_domain(World& w, DomId domid, bool report) {
  if (auto ec = w.hv().destroy_domain(domid); ec && report && w.hv().domain_exists(domid))
    err("destroy domain " + num(domid.value()) + ": " + ec.message());
  ts::remove_vm_nodes(w.xs(), domid);
  (void)w.xs().rm("/local/domain/" + num(domid.value()));
}

void stop_guest(World& w, DomId domid) {
  if (const pid_t pid = guest_of(w, domid)) {
    if (!ts::terminate_process(pid, std::chrono::seconds(5))) {
      err("guest pid " + num(static_cast<std::uint64_t>(pid)) +
          " did not stop on SIGTERM within 5 s; killed");
    }
  }
  std::error_code ec;
  std::filesystem::remove(w.pid_file(domid), ec);
}

void undo_create(World& w, DomId domid) {
  remove_all_vifs(w, domid);
  stop_guest(w, domid);
  destroy_domain(w, domid, true);
}

}  // namespace unetback::xl
