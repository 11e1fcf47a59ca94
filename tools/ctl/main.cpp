// unetback-ctl: talks to unetbackd's control socket. Prints tables, the raw JSON (--json) or
// the counters for Prometheus (stats --prometheus), or serves those over HTTP (metrics).
// Exit status: 0 ok, 1 the daemon refused the request or is not reachable, 2 bad command line.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <sys/signalfd.h>
#include <thread>
#include <variant>
#include <vector>

#include "common/control/protocol.hpp"
#include "common/control/request.hpp"
#include "common/hv/hypervisor_spec.hpp"
#include "common/util/arg_parser.hpp"
#include "common/util/parse_decimal.hpp"
#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"
#include "tools/ctl/ctl_client.hpp"
#include "tools/ctl/ctl_format.hpp"
#include "tools/ctl/json_value.hpp"
#include "tools/ctl/metrics_server.hpp"
#include "tools/ctl/prometheus.hpp"

namespace {

using namespace unetback;

constexpr std::string_view kUsage =
    "usage: unetback-ctl [--control PATH | --world DIR] [--json] COMMAND\n"
    "\n"
    "  list                 vifs: xenbus state, TAP, connected, carrier, queues\n"
    "  stats [D/V]          per-queue counters (every vif, or domain D's device V)\n"
    "  stats --prometheus [D/V]\n"
    "                       the same in the Prometheus text format (labels vif, domid,\n"
    "                       devid, queue), e.g. for node_exporter's textfile collector\n"
    "  rings D/V            per-queue TX/RX ring indices\n"
    "  tunables             daemon-wide tunables, values in force and ranges\n"
    "  get NAME             one tunable\n"
    "  set NAME VALUE       change a tunable (validated by the daemon; applies to vifs that\n"
    "                       connect afterwards)\n"
    "  status               the daemon: version, pid, program file, when it started, vifs\n"
    "  upgrade              the daemon starts its program file again (a new binary installed\n"
    "                       there) as its successor, serving until the successor asks for\n"
    "                       the handover; the successor takes every vif over (the guests\n"
    "                       stay Connected) and becomes systemd's main process. Waits until\n"
    "                       it serves (30 s at most) and prints how long it took\n"
    "  metrics [--listen ADDR:PORT|unix:PATH] [--interval SECONDS] [--header-timeout SECONDS]\n"
    "                       serve the Prometheus metrics over HTTP at /metrics (default\n"
    "                       127.0.0.1:9469, which every local user can read; unix:PATH is a\n"
    "                       socket of mode 0600; other paths 404, 503 while the daemon is not\n"
    "                       reachable) until SIGTERM/SIGINT. The daemon is asked at most once\n"
    "                       per --interval (default 1 s); clients are served side by side, each\n"
    "                       dropped if its request head takes longer than --header-timeout\n"
    "                       (default 2 s)\n"
    "\n"
    "  --control PATH       the daemon's control socket (default /run/unetback/unetbackd.sock)\n"
    "  --world DIR          the xensim world's daemon (DIR/unetbackd.sock)\n"
    "  --json               print the daemon's JSON reply as it is\n"
    "\n"
    "Exit status: 0 ok, 1 request refused or daemon not reachable (metrics: the address\n"
    "cannot be bound), 2 bad command line.\n";

constexpr std::string_view kDefaultMetricsAddress = "127.0.0.1:9469";

int usage_error(const std::string& msg) {
  std::cerr << "unetback-ctl: " << msg << "\n" << kUsage;
  return 2;
}

/// One request's parsed reply, or why there is none (an error reply included).
std::variant<ctl::JsonValue, std::string> ask(
    const std::string& path, const std::string& line,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto client = ctl::CtlClient::connect(path);
  if (!client) return "cannot connect to " + path + ": " + client.error().message();
  auto reply = client->request(line, timeout);
  if (!reply) return "no reply on " + path + ": " + reply.error().message();
  std::string error;
  auto doc = ctl::parse_json(*reply, &error);
  if (!doc) return "malformed reply (" + error + ")";
  if (const auto* e = doc->get(control::kErrorKey)) return e->text();
  return std::move(*doc);
}

/// One `stats` request as Prometheus text, or why not.
ctl::MetricsFetch fetch_metrics(const std::string& path, const std::string& line) {
  auto r = ask(path, line, std::chrono::seconds(3));
  if (const auto* doc = std::get_if<ctl::JsonValue>(&r))
    return {true, ctl::format_prometheus(*doc)};
  return {false, *std::get_if<std::string>(&r)};
}

/// `upgrade`: asks for it, then polls `status` until an image that started after the request
/// answers: another pid, the successor that took the vifs over (a daemon from before the
/// successor process, 2026-12-03, executes itself again instead: the same pid). The daemon's
/// `upgrade_error` (its successor could not start or ended first; it serves on) is a failure.
int upgrade_in_place(const std::string& path, bool json) {
  using Clock = std::chrono::steady_clock;
  auto before = ask(path, "status");
  if (auto* why = std::get_if<std::string>(&before)) {
    std::cerr << "unetback-ctl: " << *why << "\n";
    return 1;
  }
  const auto text_of = [](const ctl::JsonValue* f) { return f != nullptr ? f->text() : ""; };
  const auto& was = *std::get_if<ctl::JsonValue>(&before);  // not the error: returned above
  const std::string started = text_of(was.get("started"));
  const std::string pid = text_of(was.get("pid"));
  // An earlier upgrade's failure is no news: only one that names another successor counts.
  const std::string error_before = text_of(was.get("upgrade_error"));
  const auto t0 = Clock::now();
  if (auto r = ask(path, "upgrade"); auto* why = std::get_if<std::string>(&r)) {
    // The daemon may go before its reply is read: only a refusal is an error.
    if (why->rfind("upgrade:", 0) == 0 || why->find("unknown request") != std::string::npos) {
      std::cerr << "unetback-ctl: " << *why << "\n";
      return 1;
    }
  }
  const auto deadline = t0 + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    auto now = ask(path, "status");
    if (auto* doc = std::get_if<ctl::JsonValue>(&now)) {
      const auto* st = doc->get("started");
      const auto* p = doc->get("pid");
      if (const auto* e = doc->get("upgrade_error"); e != nullptr && st != nullptr &&
                                                     st->text() == started && !e->text().empty() &&
                                                     e->text() != error_before) {
        std::cerr << "unetback-ctl: the upgrade failed: " << e->text() << "; the daemon (pid "
                  << pid << ") serves on\n";
        return 1;
      }
      if (st != nullptr && st->text() != started) {
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        const bool same = p != nullptr && p->text() == pid;
        if (json) {
          std::cout << "{\"upgraded\":true,\"same_pid\":" << (same ? "true" : "false")
                    << ",\"serving_after_ms\":" << ms << ",\"pid\":" << ctl::field(*doc, "pid")
                    << ",\"previous_pid\":" << pid << ",\"started\":\""
                    << ctl::field(*doc, "started") << "\"}\n";
        } else {
          std::cout << (same ? "upgraded in place (the same pid): "
                             : "upgraded: pid " + pid + " handed over to its successor: ")
                    << ctl::format_reply("status", *doc) << "serving again after " << ms << " ms\n";
        }
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::cerr << "unetback-ctl: unetbackd did not serve again within 30 s of the upgrade request\n";
  return 1;
}

/// `metrics`: serves scrapes until SIGTERM or SIGINT, then removes its Unix socket (if it
/// made one) and exits 0.
int serve_metrics(const std::string& path, std::string_view address,
                  std::chrono::milliseconds interval, const ctl::ServeOptions& options) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  const UniqueFd stop(::signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!stop || ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    std::cerr << "unetback-ctl: signalfd: " << last_errno().message() << "\n";
    return 1;
  }
  auto server = ctl::MetricsServer::listen(address);
  if (!server) {
    std::cerr << "unetback-ctl: cannot listen on " << address << ": " << server.error().message()
              << "\n";
    return 1;
  }
  std::cout << "unetback-ctl metrics: serving GET /metrics on " << server->address()
            << " for unetbackd on " << path << std::endl;
  const ctl::MetricsSource source =
      ctl::snapshot_source([&path] { return fetch_metrics(path, "stats"); }, interval);
  if (const auto ec = server->serve(source, options, stop.get())) {
    std::cerr << "unetback-ctl: serving " << server->address() << ": " << ec.message() << "\n";
    return 1;
  }
  return 0;
}

/// A duration given in whole seconds (min..3600) on the command line.
std::optional<std::chrono::milliseconds> seconds_option(std::string_view text, unsigned min) {
  const auto v = parse_decimal<unsigned>(text, min, 3600);
  if (!v) return std::nullopt;
  return std::chrono::seconds(*v);
}

}  // namespace

int main(int argc, char** argv) {
  static constexpr cli::OptionSpec kOptions[] = {cli::kHelp,
                                                 cli::flag("json"),
                                                 cli::flag("prometheus"),
                                                 cli::valued("listen", "ADDR:PORT"),
                                                 cli::valued("interval", "SECONDS"),
                                                 cli::valued("header-timeout", "SECONDS"),
                                                 cli::valued("control"),
                                                 cli::valued("world")};
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  std::string path = control::default_control_path(hv::XenSpec{});
  bool json = false, prometheus = false;
  std::optional<std::string> listen;
  std::optional<std::chrono::milliseconds> interval, header_timeout;
  std::vector<std::string> words;
  cli::ArgParser parser(args, kOptions);
  while (const auto a = parser.next()) {
    if (a->is("help")) {
      std::cout << kUsage;
      return 0;
    }
    if (a->is("json")) {
      json = true;
    } else if (a->is("prometheus")) {
      prometheus = true;
    } else if (a->is("listen")) {
      listen = a->value;
    } else if (a->is("interval") || a->is("header-timeout")) {
      const unsigned min = a->is("interval") ? 0 : 1;
      const auto d = seconds_option(a->value, min);
      if (!d) {
        return usage_error("--" + std::string(a->name) + " takes whole seconds, " +
                           std::to_string(min) + "..3600");
      }
      (a->is("interval") ? interval : header_timeout) = d;
    } else if (a->is("control")) {
      path = a->value;
    } else if (a->is("world")) {
      if (a->value.empty()) return usage_error("--world needs a directory");
      path = control::default_control_path(hv::SimSpec{std::string(a->value)});
    } else {
      words.emplace_back(a->value);
    }
  }
  if (const auto& e = parser.error()) return usage_error(e->message());
  if (words.empty()) return usage_error("no command");
  const std::string& cmd = words[0];
  // The daemon's requests, and `metrics`, which this tool serves itself.
  static constexpr control::VerbSpec kMetrics{"metrics", 0, 0};
  const control::VerbSpec* verb = cmd == kMetrics.name ? &kMetrics : control::find_verb(cmd);
  if (verb == nullptr) return usage_error("unknown command " + cmd);
  if (words.size() - 1 < verb->min_args || words.size() - 1 > verb->max_args)
    return usage_error("wrong number of arguments for " + cmd);
  if (prometheus && cmd != "stats") return usage_error("--prometheus goes with stats only");
  if (prometheus && json) return usage_error("--prometheus and --json exclude each other");
  if ((listen || interval || header_timeout) && cmd != "metrics")
    return usage_error("--listen, --interval and --header-timeout go with metrics only");
  std::string line;
  for (const auto& w : words) {
    if (w.find_first_of(" \t\n\r") != std::string::npos)
      return usage_error("arguments cannot contain blanks: '" + w + "'");
    line += (line.empty() ? "" : " ") + w;
  }

  if (cmd == "metrics") {
    // A scraper that hangs up must cost an EPIPE on its connection only (send() also says
    // MSG_NOSIGNAL).
    std::signal(SIGPIPE, SIG_IGN);
    ctl::ServeOptions options;
    if (header_timeout) options.header_timeout = *header_timeout;
    return serve_metrics(path, listen ? *listen : kDefaultMetricsAddress,
                         interval.value_or(std::chrono::seconds(1)), options);
  }

  if (cmd == "upgrade") return upgrade_in_place(path, json);

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
  if (const auto* e = doc->get(control::kErrorKey)) {
    std::cerr << "unetback-ctl: " << e->text() << "\n";
    return 1;
  }
  if (json) {
    std::cout << *reply << "\n";
  } else if (prometheus) {
    std::cout << ctl::format_prometheus(*doc);
  } else {
    std::cout << ctl::format_reply(cmd, *doc);
  }
  return 0;
}
