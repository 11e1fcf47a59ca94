// A guest domain that offers dom0 an event channel, as a netfront does before its backend
// binds: created by the toolstack, claimed by this process (a frontend-role SimHypervisor),
// with one port allocated unbound for dom0.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "common/hv/sim/sim_hypervisor.hpp"

namespace unetback::test {

struct OfferingGuest {
  DomId id{};
  std::unique_ptr<hv::SimHypervisor> hv;
  std::unique_ptr<hv::EventChannel> channel;
  Port offered{};
};

/// Creates domain `name` through `toolstack` (dom0) in the world at `dir` and claims it.
/// Throws std::runtime_error saying which step failed.
inline OfferingGuest offering_guest(hv::SimHypervisor& toolstack, const std::string& dir,
                                    const std::string& name) {
  OfferingGuest g;
  auto id = toolstack.create_domain(name);
  if (!id) throw std::runtime_error("create " + name + ": " + id.error().message());
  hv::HypervisorOptions o;
  o.role = hv::Role::frontend;
  o.domid = *id;
  g.id = *id;
  g.hv = std::make_unique<hv::SimHypervisor>(dir, o);
  g.channel = g.hv->open_event_channel();
  auto port = g.channel->bind_unbound(kDom0);
  if (!port) throw std::runtime_error(name + " offers no port: " + port.error().message());
  g.offered = *port;
  return g;
}

}  // namespace unetback::test
