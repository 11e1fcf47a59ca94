// xensim: a software hypervisor for machines without Xen. One process runs the hypervisor
// broker (DIR/hv.sock: domains, memory, grant tables, event channels) and xenstored
// (DIR/dom<N>.sock) on one io_context. See --help.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "common/util/log.hpp"
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

std::optional<std::uint32_t> parse_count(std::string_view s) {
  std::uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v == 0) return std::nullopt;
  return v;
}

std::optional<Options> parse_args(int argc, char** argv, bool& help) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::optional<std::string_view> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string_view(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      help = true;
      return o;
    }
    if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--dir") {
      auto v = value();
      if (!v || v->empty()) return std::nullopt;
      o.dir = std::string(*v);
    } else if (a == "--frames" || a == "--grant-entries") {
      auto v = value();
      auto n = v ? parse_count(*v) : std::nullopt;
      if (!n) return std::nullopt;
      if (a == "--frames") {
        if (*n > o.registry.max_frames) return std::nullopt;
        o.registry.default_frames = *n;
      } else {
        o.registry.grant_entries = *n;
      }
    } else {
      return std::nullopt;
    }
  }
  if (o.dir.empty()) return std::nullopt;
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
  bool help = false;
  auto opts = parse_args(argc, argv, help);
  if (help) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (!opts) {
    std::cerr << kUsage;
    return kExitUsage;
  }
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
