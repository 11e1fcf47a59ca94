// unetback-xl: libxl's part for a xensim world. `create` makes a domain, writes its vifs'
// xenstore nodes as libxl does, waits for the backend's InitWait, runs the hotplug script
// and starts the guest (netfront-shim); `destroy` closes the vifs, runs the script
// `offline`, stops the guest and destroys the domain; `list` shows the world; `save`,
// `restore` and `migrate` suspend a guest, tear its devices and domain down and bring it
// back in a new domain, as libxl's save/restore and a localhost migration do; `devd` runs a
// driver domain's hotplug scripts there.
// The contract and its timeouts: libxl 4.17's libxl_nic.c and libxl_device.c, as observed in
// the real-Xen lab (docs/design.md, "unetback-xl").
//
// This file is the dispatcher: the command line (command_line.hpp) to the command's file
// (create_destroy, list, save_restore, devd), with each command's count of arguments.
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/util/result.hpp"
#include "tools/xl/command_line.hpp"
#include "tools/xl/create_destroy.hpp"
#include "tools/xl/devd.hpp"
#include "tools/xl/list.hpp"
#include "tools/xl/save_restore.hpp"
#include "tools/xl/world.hpp"

namespace unetback::xl {
namespace {

int run(std::vector<std::string_view> args) {
  auto parsed = parse_command_line(std::move(args));
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const auto& [dir, rest] = std::get<CommandLine>(parsed);
  const std::string_view cmd = rest.front();

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

  auto create = parse_create_args(std::span<const std::string_view>(rest).subspan(1));
  if (const int* code = std::get_if<int>(&create)) return *code;
  World w(dir);
  return cmd_create(w, std::move(std::get<CreateArgs>(create)));
}

}  // namespace
}  // namespace unetback::xl

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return unetback::xl::run(std::move(args));
  } catch (const unetback::SetupError& e) {
    unetback::xl::err(e.what());
    return unetback::xl::kExitError;
  } catch (const std::exception& e) {
    unetback::xl::err(std::string("error: ") + e.what());
    return unetback::xl::kExitError;
  }
}
