#include "tools/xl/create_destroy.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>
#include <unistd.h>
#include <variant>

#include "common/hv/hypervisor_spec.hpp"
#include "tools/xl/domain.hpp"
#include "tools/xl/guest_launcher.hpp"

namespace unetback::xl {
namespace {

namespace ts = toolstack;
namespace fs = std::filesystem;

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

/// Starts the guest of `domid` on its first vif and records its pid; kExitOk, or
/// kExitGuestFailed (said why) with the domain destroyed again.
int start_guest(World& w, DomId domid, const CreateArgs& a) {
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
  return kExitOk;
}

}  // namespace

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
    if (const int code = start_guest(w, domid, a); code != kExitOk) return code;
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

}  // namespace unetback::xl
