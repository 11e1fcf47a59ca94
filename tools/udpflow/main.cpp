// unetback-udpflow: a UDP packet-rate tool for the issue-7 experiments (see udpflow_usage()).
#include <atomic>
#include <csignal>
#include <iostream>
#include <string_view>
#include <vector>

#include "tools/udpflow/flow_report.hpp"
#include "tools/udpflow/udp_receiver.hpp"
#include "tools/udpflow/udp_sender.hpp"
#include "tools/udpflow/udpflow_options.hpp"

using namespace unetback::udpflow;

namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);  // safe to store from a signal handler

void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
}

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked poll returns EINTR and the loop sees the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = parse_udpflow_args(args);
  if (std::holds_alternative<HelpRequested>(parsed)) {
    std::cout << udpflow_usage();
    return kExitOk;
  }
  if (const auto* bad = std::get_if<UsageError>(&parsed)) {
    std::cerr << "unetback-udpflow: " << bad->message << "\n\n" << udpflow_usage();
    return kExitUsage;
  }
  install_stop_signals();
  if (const auto* s = std::get_if<SendOptions>(&parsed)) {
    auto r = run_send(*s, g_stop);
    if (!r) {
      std::cerr << "unetback-udpflow: send to " << s->to.text << ":" << s->port << ": "
                << r.error().message() << "\n";
      return kExitFailure;
    }
    std::cout << format_send(*r, s->json) << std::endl;
    return kExitOk;
  }
  const auto& o = std::get<RecvOptions>(parsed);
  auto r = run_recv(o, g_stop);
  if (!r) {
    std::cerr << "unetback-udpflow: receive on port " << o.port << ": " << r.error().message()
              << "\n";
    return kExitFailure;
  }
  std::cout << format_recv(r->report, o.json) << std::endl;
  if (!r->got_first && !g_stop.load()) {
    std::cerr << "unetback-udpflow: no packet on port " << o.port << " within " << o.wait << " s\n";
    return kExitFailure;
  }
  return kExitOk;
}
