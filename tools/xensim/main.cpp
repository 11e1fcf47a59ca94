// xensim: a software hypervisor for machines without Xen. One process runs the hypervisor
// broker (DIR/hv.sock: domains, memory, grant tables, event channels) and xenstored
// (DIR/dom<N>.sock) on one io_context. See --help.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <variant>
#include <vector>

#include "common/util/arg_parser.hpp"
#include "common/util/log.hpp"
#include "common/util/parse_decimal.hpp"
#include "tools/xensim/broker.hpp"
#include "tools/xensim/domain_registry.hpp"
#include "tools/xensim/xenstore/server.hpp"

namespace {

using namespace unetback;

constexpr int kExitOk = 0;
constexpr int kExitSetup = 1;
constexpr int kExitUsage = 2;

constexpr std::string_view kUsage =
    R"(usage: xensim --dir DIR [--frames N] [--grant-entries N] [--verbose]

A software hypervisor: runs Xen "domains" as processes on a machine without Xen.

  --dir DIR            the world directory (created if needed). xensim listens on
                       DIR/hv.sock (hypervisor broker) and DIR/dom<N>.sock (xenstored, one
                       socket per domain: XENSTORED_PATH=DIR/dom0.sock for dom0 tools),
                       and writes DIR/xensim.pid.
  --frames N           default memory of a domain, in 4 KiB frames (default 32768)
  --grant-entries N    grant-table size of a domain, in v1 entries (default 16384)
  --verbose            log domain and connection events to stderr
  --help               this text

Prints "xensim ready dir=DIR pid=PID" on stdout once both sockets accept connections, then
runs until SIGTERM or SIGINT, when it removes its sockets and pid file.

Exit status: 0 after SIGTERM/SIGINT, 1 setup failure (directory, socket in use, another
xensim running on DIR), 2 usage error.
)";

struct Options {
  std::filesystem::path dir;
  xensim::RegistryConfig registry;
  bool verbose = false;
};

struct HelpRequested {};

/// The options, --help, or what is wrong with the command line.
std::variant<Options, HelpRequested, std::string> parse_args(
    std::span<const std::string_view> args) {
  static constexpr cli::OptionSpec kOptions[] = {
      cli::kHelp, cli::flag("verbose"), cli::valued("dir", "a directory"),
      cli::valued("frames", "a number of frames"), cli::valued("grant-entries", "a number")};
  Options o;
  cli::ArgParser parser(args, kOptions, {.positionals = false});
  while (const auto a = parser.next()) {
    const std::string_view value = a->value;
    if (a->is("help")) return HelpRequested{};
    if (a->is("verbose")) {
      o.verbose = true;
    } else if (a->is("dir")) {
      if (value.empty()) return std::string("--dir needs a directory");
      o.dir = std::string(value);
    } else if (a->is("frames")) {
      const auto n = parse_decimal<std::uint32_t>(value, 1, o.registry.max_frames);
      if (!n) return "--frames takes 1.." + std::to_string(o.registry.max_frames);
      o.registry.default_frames = *n;
    } else if (a->is("grant-entries")) {
      const auto n = parse_decimal<std::uint32_t>(value, 1);
      if (!n) return std::string("--grant-entries takes a positive number");
      o.registry.grant_entries = *n;
    }
  }
  if (const auto& e = parser.error()) return e->message();
  if (o.dir.empty()) return std::string("--dir is required");
  return o;
}

/// Tells xenstored about the broker's domains.
class XenstoreDomains final : public xensim::DomainListener {
 public:
  explicit XenstoreDomains(xensim::XenstoreServer& xs) : xs_(xs) {}
  void domain_introduced(DomId id, std::string_view name) override {
    xs_.introduce_domain(id, name);
  }
  void domain_released(DomId id) override { xs_.release_domain(id); }

 private:
  xensim::XenstoreServer& xs_;
};

int run(const Options& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) throw SetupError("cannot create " + o.dir.string() + ": " + ec.message());
  const auto dir = std::filesystem::absolute(o.dir);
  // Before xenstored touches DIR/dom0.sock: a second xensim must not steal the first's sockets.
  if (xensim::Broker::answers(dir / "hv.sock"))
    throw SetupError("another xensim is already running on " + (dir / "hv.sock").string());

  boost::asio::io_context io;
  // Order matters for teardown: the broker goes first (its domUs die and are released to
  // xenstored), then xenstored closes its sockets.
  xensim::XenstoreServer xs(io, dir);
  XenstoreDomains listener(xs);
  xensim::DomainRegistry registry(listener, o.registry);
  xs.introduce_domain(kDom0, "Domain-0");
  xensim::Broker broker(io, dir / "hv.sock", registry);

  const auto pid_file = dir / "xensim.pid";
  {
    std::ofstream pf(pid_file);
    pf << ::getpid() << '\n';
    if (!pf) throw SetupError("cannot write " + pid_file.string());
  }

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](const boost::system::error_code&, int) { io.stop(); });

  std::cout << "xensim ready dir=" << dir.string() << " pid=" << ::getpid() << std::endl;
  io.run();
  std::filesystem::remove(pid_file, ec);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = parse_args(args);
  if (std::holds_alternative<HelpRequested>(parsed)) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (const auto* why = std::get_if<std::string>(&parsed)) {
    std::cerr << "xensim: " << *why << '\n' << kUsage;
    return kExitUsage;
  }
  const auto* opts = std::get_if<Options>(&parsed);
  if (opts == nullptr) return kExitUsage;  // not reached: help and errors are handled above
  log::set_level(opts->verbose ? log::Level::info : log::Level::warn);
  try {
    return run(*opts);
  } catch (const SetupError& e) {
    std::cerr << "xensim: " << e.what() << '\n';
    return kExitSetup;
  } catch (const std::exception& e) {
    std::cerr << "xensim: " << e.what() << '\n';
    return kExitSetup;
  }
}
