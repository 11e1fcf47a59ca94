#include "tools/xl/save_restore.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "tools/xl/domain.hpp"
#include "tools/xl/guest_launcher.hpp"
#include "tools/xl/save_image.hpp"
#include "tools/xl/toolstack.hpp"
#include "tools/xl/vif_option.hpp"

namespace unetback::xl {
namespace {

namespace ts = toolstack;
namespace fs = std::filesystem;

/// The first of `vifs` that create would refuse, as "vif N: why"; nullopt if there is none.
std::optional<std::string> vifs_error(const std::vector<ts::VifSpec>& vifs) {
  for (const ts::VifSpec& spec : vifs)
    if (auto why = ts::vif_spec_error(spec)) return "vif " + num(spec.devid.value()) + ": " + *why;
  return std::nullopt;
}

/// What the image of `domid` holds: its name, uuid, guest pid and each vif's configuration;
/// nullopt (said why) when there is no guest or vif to save, or a vif restore would refuse.
std::optional<ts::SavedDomain> saved_config(World& w, DomId domid) {
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
  return saved;
}

/// libxl__domain_suspend_device_model / _common: the PV guest's way, through xenstore. True
/// once the guest acknowledged; false (said why, the request cancelled) otherwise.
bool request_suspend(World& w, DomId domid) {
  const std::string req = "/local/domain/" + num(domid.value()) + "/control/shutdown";
  if (auto ec = w.xs().write(req, "suspend")) {
    err("cannot write " + req + ": " + ec.message());
    return false;
  }
  if (ts::wait_for_value(w.xs(), req, "", ts::kSuspendAckTimeout)) {
    (void)w.xs().write(req, "");  // libxl cancels the request it made
    err("guest of domain " + num(domid.value()) + " did not acknowledge the suspend request in " +
        num(ts::kSuspendAckTimeout.count()) + " s (was it started with --resume-file?)");
    return false;
  }
  return true;
}

/// libxl__destroy_domid after the save: the devices, then the domain once the suspended guest
/// let it go; false (said why, the domain kept) when it does not.
bool release_domain(World& w, DomId domid) {
  remove_all_vifs(w, domid);
  const auto deadline = std::chrono::steady_clock::now() + ts::kSuspendReleaseTimeout;
  while (w.hv().domain_exists(domid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (w.hv().domain_exists(domid)) {
    // Destroying a domain kills the process running it: the guest would be lost.
    err("guest of domain " + num(domid.value()) + " did not let its domain go within " +
        num(ts::kSuspendReleaseTimeout.count()) + " s of its devices' removal");
    return false;
  }
  destroy_domain(w, domid, true);
  std::error_code ec;
  fs::remove(w.pid_file(domid), ec);
  return true;
}

/// libxl's save up to the image: the guest suspends (control/shutdown), its devices are
/// removed while it is quiet, it lets its domain go, the domain is destroyed. The image, or
/// nullopt (said why) with the domain left running when the guest never acknowledged.
std::optional<ts::SavedDomain> suspend_domain(World& w, DomId domid) {
  auto saved = saved_config(w, domid);
  if (!saved || !request_suspend(w, domid) || !release_domain(w, domid)) return std::nullopt;
  return saved;
}

/// The resumed domain's start info: its new identity in the resume file, then the unpause
/// (SIGUSR1); waits for the guest to connect its first vif again. kExitOk and "domid N"
/// printed, or the exit code (said why) with the new domain destroyed again.
int resume_guest(World& w, DomId domid, const ts::SavedDomain& saved) {
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
  return resume_guest(w, std::get<DomId>(built), saved);
}

}  // namespace

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

}  // namespace unetback::xl
