// unetback-xl's command line: the --help text (docs/man/unetback-xl.1.scd says the same), the
// global options up to the command, the usage errors, and `create`'s options.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tools/xl/toolstack.hpp"

namespace unetback::xl {

/// Prints `msg` and a pointer to --help on stderr; kExitUsage.
int usage_error(const std::string& msg);

/// The global options and the command with its arguments.
struct CommandLine {
  std::string world_dir;                  ///< --world DIR, absolute
  std::vector<std::string_view> command;  ///< the command's name, then its arguments; not empty
};

/// `args` (argv without the program) parsed; or the exit code to leave with: kExitOk after
/// printing --help, kExitUsage after a usage error.
[[nodiscard]] std::variant<CommandLine, int> parse_command_line(std::vector<std::string_view> args);

struct CreateArgs {
  std::string name;
  std::vector<toolstack::VifSpec> vifs;
  std::optional<std::string> guest_netns;
  std::optional<std::string> address;
  std::optional<std::uint32_t> queues;
  std::optional<std::string> shim;
  bool no_guest = false;
  bool driver_domain = false;  // libxl's driver_domain=1: no vif, no guest program
  std::uint32_t ready_timeout_ms = 20000;
  std::vector<std::string> shim_extra;
};

/// `create`'s arguments (what follows the word `create`) parsed; or kExitUsage after a usage
/// error.
[[nodiscard]] std::variant<CreateArgs, int> parse_create_args(
    std::span<const std::string_view> args);

}  // namespace unetback::xl
