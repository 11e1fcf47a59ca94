// unetback-userhop: the user-hop baseline forwarder of `tools/lab.sh bench` (issue 6).
// Two vnet_hdr TAPs joined by one poll/read/write loop: what any userspace backend pays at
// least per packet (two syscalls and one copy in each direction), without rings or grants.
#include <array>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/signalfd.h>
#include <unistd.h>
#include <variant>
#include <vector>

#include "common/net/tap_device.hpp"
#include "common/util/unique_fd.hpp"
#include "tools/userhop/frame_pump.hpp"
#include "tools/userhop/netns_scope.hpp"
#include "tools/userhop/userhop_options.hpp"

namespace {

using unetback::Result;
using unetback::UniqueFd;
using unetback::net::TapConfig;
using unetback::net::TapDevice;
using unetback::userhop::FramePump;
using unetback::userhop::NetnsScope;
using unetback::userhop::PumpCounters;
using unetback::userhop::PumpStatus;
using unetback::userhop::UserhopOptions;

constexpr int kExitSetup = 1;
constexpr int kExitUsage = 2;

// Creates the TAP inside `netns` and brings it up there (set_up uses a socket in the calling
// thread's namespace, so it must run inside the scope too).
Result<TapDevice> make_tap(const std::string& name, const std::string& netns,
                           const UserhopOptions& o) {
  auto scope = NetnsScope::enter(netns);
  if (!scope) return scope.error();
  TapConfig cfg;
  cfg.name = name;
  cfg.vnet_hdr = true;
  if (o.offloads) cfg.offloads = {.csum = true, .tso4 = true, .tso6 = true};
  cfg.mtu = o.mtu;
  auto tap = TapDevice::create(cfg);
  if (!tap) return tap.error();
  if (auto ec = tap->set_up(true)) return ec;
  return tap;
}

void print_counters(std::string_view dir, const PumpCounters& c) {
  std::cout << "userhop " << dir << " frames=" << c.frames << " bytes=" << c.bytes
            << " dropped=" << c.write_dropped << " write_errors=" << c.write_errors
            << " read_errors=" << c.read_errors << "\n";
}

int run(const UserhopOptions& o) {
  // Block the stop signals before anything else so they arrive only through the signalfd.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop, nullptr) < 0) {
    std::perror("unetback-userhop: sigprocmask");
    return kExitSetup;
  }
  UniqueFd sig(::signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sig) {
    std::perror("unetback-userhop: signalfd");
    return kExitSetup;
  }

  auto a = make_tap(o.tap_a, o.netns_a, o);
  if (!a) {
    std::cerr << "unetback-userhop: TAP " << o.tap_a << ": " << a.error().message() << "\n";
    return kExitSetup;
  }
  auto b = make_tap(o.tap_b, o.netns_b, o);
  if (!b) {
    std::cerr << "unetback-userhop: TAP " << o.tap_b << ": " << b.error().message() << "\n";
    return kExitSetup;
  }
  std::array<FramePump, 2> pumps{FramePump(a->fd(), b->fd()), FramePump(b->fd(), a->fd())};
  std::cout << "userhop ready " << o.tap_a << " <-> " << o.tap_b << std::endl;

  std::array<pollfd, 3> pfd{};
  pfd[0] = {.fd = a->fd(), .events = POLLIN, .revents = 0};
  pfd[1] = {.fd = b->fd(), .events = POLLIN, .revents = 0};
  pfd[2] = {.fd = sig.get(), .events = POLLIN, .revents = 0};
  std::array<bool, 2> hot{false, false};  // budget ran out: more frames may be waiting
  int rc = 0;
  for (;;) {
    const int timeout = (hot[0] || hot[1]) ? 0 : -1;
    const int n = ::poll(pfd.data(), pfd.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::perror("unetback-userhop: poll");
      rc = kExitSetup;
      break;
    }
    if (pfd[2].revents != 0) break;
    bool failed = false;
    for (std::size_t d = 0; d < 2; ++d) {
      if (!hot[d] && pfd[d].revents == 0) continue;
      const PumpStatus s = pumps[d].pump(o.budget);
      hot[d] = s == PumpStatus::more;
      if (s == PumpStatus::failed || s == PumpStatus::closed) {
        std::cerr << "unetback-userhop: reading " << (d == 0 ? o.tap_a : o.tap_b)
                  << " failed: " << pumps[d].error().message() << "\n";
        failed = true;
      }
    }
    if (failed) {
      rc = kExitSetup;
      break;
    }
  }
  print_counters("a->b", pumps[0].counters());
  print_counters("b->a", pumps[1].counters());
  std::cout.flush();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = unetback::userhop::parse_userhop_options(args);
  if (auto* msg = std::get_if<std::string>(&parsed)) {
    std::cerr << "unetback-userhop: " << *msg << "\n" << unetback::userhop::userhop_usage();
    return kExitUsage;
  }
  if (std::holds_alternative<unetback::userhop::HelpRequested>(parsed)) {
    std::cout << unetback::userhop::userhop_usage();
    return 0;
  }
  return run(std::get<UserhopOptions>(parsed));
}
