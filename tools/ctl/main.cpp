// unetback-ctl: talks to unetbackd's control socket. Prints tables, or the raw JSON (--json).
// Exit status: 0 ok, 1 the daemon refused the request or is not reachable, 2 bad command line.
#include <cerrno>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "backend/daemon/daemon_options.hpp"
#include "tools/ctl/ctl_client.hpp"
#include "tools/ctl/ctl_format.hpp"
#include "tools/ctl/json_value.hpp"

namespace {

using namespace unetback;

constexpr std::string_view kUsage =
    "usage: unetback-ctl [--control PATH | --world DIR] [--json] COMMAND\n"
    "\n"
    "  list                 vifs: xenbus state, TAP, connected, carrier, queues\n"
    "  stats [D/V]          per-queue counters (every vif, or domain D's device V)\n"
    "  rings D/V            per-queue TX/RX ring indices\n"
    "  tunables             daemon-wide tunables, values in force and ranges\n"
    "  get NAME             one tunable\n"
    "  set NAME VALUE       change a tunable (validated by the daemon; applies to vifs that\n"
    "                       connect afterwards)\n"
    "\n"
    "  --control PATH       the daemon's control socket (default /run/unetback/unetbackd.sock)\n"
    "  --world DIR          the xensim world's daemon (DIR/unetbackd.sock)\n"
    "  --json               print the daemon's JSON reply as it is\n"
    "\n"
    "Exit status: 0 ok, 1 request refused or daemon not reachable, 2 bad command line.\n";

int usage_error(const std::string& msg) {
  std::cerr << "unetback-ctl: " << msg << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = daemon::default_control_path("xen");
  bool json = false;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--json") {
      json = true;
    } else if (a == "--control" || a == "--world") {
      if (i + 1 >= argc) return usage_error(std::string(a) + " needs a value");
      const std::string v = argv[++i];
      path = a == "--control" ? v : daemon::default_control_path("sim:" + v);
    } else if (a.starts_with("--")) {
      return usage_error("unknown option " + std::string(a));
    } else {
      words.emplace_back(a);
    }
  }
  if (words.empty()) return usage_error("no command");
  const std::string& cmd = words[0];
  struct Arity {
    const char* name;
    std::size_t min, max;
  };
  static constexpr Arity kCommands[] = {{"list", 0, 0},     {"stats", 0, 1}, {"rings", 1, 1},
                                        {"tunables", 0, 0}, {"get", 1, 1},   {"set", 2, 2}};
  bool known = false;
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    known = true;
    if (words.size() - 1 < c.min || words.size() - 1 > c.max)
      return usage_error("wrong number of arguments for " + cmd);
  }
  if (!known) return usage_error("unknown command " + cmd);
  std::string line;
  for (const auto& w : words) {
    if (w.find_first_of(" \t\n\r") != std::string::npos)
      return usage_error("arguments cannot contain blanks: '" + w + "'");
    line += (line.empty() ? "" : " ") + w;
  }

  auto client = ctl::CtlClient::connect(path);
  if (!client) {
    const auto ec = client.error();
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::connection_refused) {
      std::cerr << "unetback-ctl: unetbackd is not running (nothing listens on " << path << ": "
                << ec.message() << ")\n";
    } else {
      std::cerr << "unetback-ctl: cannot connect to " << path << ": " << ec.message() << "\n";
    }
    return 1;
  }
  auto reply = client->request(line);
  if (!reply) {
    std::cerr << "unetback-ctl: no reply from unetbackd on " << path << ": "
              << reply.error().message() << "\n";
    return 1;
  }
  std::string error;
  auto doc = ctl::parse_json(*reply, &error);
  if (!doc) {
    std::cerr << "unetback-ctl: malformed reply (" << error << "): " << *reply << "\n";
    return 1;
  }
  if (const auto* e = doc->get("error")) {
    std::cerr << "unetback-ctl: " << e->text() << "\n";
    return 1;
  }
  if (json) {
    std::cout << *reply << "\n";
  } else {
    std::cout << ctl::format_reply(cmd, *doc);
  }
  return 0;
}
