// netfront-shim: a userspace netfront acting as a guest domain (see shim_usage()).
#include <csignal>
#include <iostream>
#include <string_view>
#include <vector>

#include "common/hv/hypervisor.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"
#include "frontend-shim/guest_netdev.hpp"
#include "frontend-shim/shim_loop.hpp"
#include "frontend-shim/shim_options.hpp"

using namespace unetback;

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = shim::parse_shim_options(args);
  if (std::holds_alternative<shim::HelpRequested>(parsed)) {
    std::cout << shim::shim_usage();
    return shim::kExitClean;
  }
  if (const auto* bad = std::get_if<shim::UsageError>(&parsed)) {
    std::cerr << "netfront-shim: " << bad->message << "\n\n" << shim::shim_usage();
    return shim::kExitUsage;
  }
  auto opts = std::get<shim::ShimOptions>(std::move(parsed));
  log::set_level(opts.log_level);
  std::signal(SIGPIPE, SIG_IGN);

  // Enter the namespace first, while this is the only thread: the TAP, its address and every
  // netlink/ioctl socket must be created in it (the hypervisor's sockets are filesystem
  // sockets or devices, unaffected).
  if (opts.netns) {
    if (auto ec = shim::enter_netns(*opts.netns)) {
      log::write(log::Level::error, "netfront-shim",
                 "enter netns /run/netns/" + *opts.netns + ": " + ec.message());
      return shim::kExitSetupFailure;
    }
  }

  std::unique_ptr<hv::Hypervisor> hv;
  try {
    hv::HypervisorOptions ho;
    ho.role = hv::Role::frontend;
    ho.domid = opts.domid;
    ho.name = opts.name;
    hv = hv::open_hypervisor(opts.hypervisor, ho);
  } catch (const SetupError& e) {
    log::write(log::Level::error, "netfront-shim", e.what());
    return shim::kExitSetupFailure;
  }
  // A resumed guest claims the domain the toolstack made for it (unetback-xl restore).
  const auto spec = opts.hypervisor;
  auto reopen = [spec](DomId domid) {
    hv::HypervisorOptions ho;
    ho.role = hv::Role::frontend;
    ho.domid = domid;
    return hv::open_hypervisor(spec, ho);
  };
  int code = shim::kExitSetupFailure;
  {
    shim::ShimLoop loop(std::move(hv), reopen, std::move(opts), std::cout);
    code = loop.run();
  }
  return code;
}
