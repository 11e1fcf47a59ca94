// SimGuest: a well-behaved guest of a xensim world, in the test's own process: its domain (a
// frontend-role SimHypervisor), the userspace Netfront as its driver, and a PacketSocket on its
// TAP `vif<domid>.0` (the host side). The backend fixtures (tests/root/backend, the hostile
// suite) pass their traffic through it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "frontend-shim/netfront.hpp"
#include "tests/support/packet_socket.hpp"
#include "tests/support/wait.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::test {

/// Dom0 of the xensim world at `world_dir`, as the backend (and the toolstack) in this process
/// open it: a backend-role SimHypervisor.
inline std::unique_ptr<hv::SimHypervisor> open_backend_dom0(const std::string& world_dir) {
  hv::HypervisorOptions be;
  be.role = hv::Role::backend;
  return std::make_unique<hv::SimHypervisor>(world_dir, be);
}

struct SimGuest {
  std::unique_ptr<hv::SimHypervisor> hv;
  DomId dom{};
  std::unique_ptr<netfront::Netfront> netfront;
  PacketSocket sock;

  /// Opens the domain `name` in the xensim world at `world_dir`.
  void open_domain(const std::string& world_dir, const std::string& name) {
    hv::HypervisorOptions fe;
    fe.role = hv::Role::frontend;
    fe.name = name;
    hv = std::make_unique<hv::SimHypervisor>(world_dir, fe);
    dom = hv->self();
  }

  [[nodiscard]] std::string tap_name() const { return "vif" + std::to_string(dom.value()) + ".0"; }
  /// The backend directory of its vif 0 (dom0 the backend).
  [[nodiscard]] std::string be_path() const {
    return toolstack::backend_path(kDom0, dom, DevId{0});
  }

  /// The Netfront made and connected (its vif must be in the store, the backend in InitWait).
  std::error_code connect(const netfront::NetfrontOptions& opts, std::chrono::milliseconds t) {
    netfront = std::make_unique<netfront::Netfront>(*hv, opts);
    return netfront->connect(t);
  }

  /// The packet socket on its TAP; false if it could not be opened.
  bool open_packet_socket(bool vnet_hdr = false) {
    sock = PacketSocket::open(tap_name(), vnet_hdr);
    return sock.valid();
  }

  /// Polls the Netfront until a packet arrives; nullopt once `t` passed without one.
  std::optional<netfront::RxPacket> receive(std::chrono::milliseconds t) {
    std::vector<netfront::RxPacket> got;
    const bool arrived = wait_until(
        [&] {
          netfront->handle_event();
          return netfront->poll(got) > 0;
        },
        t, std::chrono::milliseconds(1));
    if (!arrived) return std::nullopt;
    return std::move(got.front());
  }
};

}  // namespace unetback::test
