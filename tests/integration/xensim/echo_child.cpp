#include "tests/integration/xensim/echo_child.hpp"

#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/event_wait.hpp"
#include "tests/integration/xensim/xensim_process.hpp"

namespace unetback::test {

int echo_main(int ctrl, const std::string& world_dir, int rounds) {
  using namespace std::chrono_literals;
  hv::HypervisorOptions o;
  o.role = hv::Role::frontend;
  o.name = "echo";
  hv::SimHypervisor hv(world_dir, o);
  auto ch = hv.open_event_channel();
  auto port = ch->bind_unbound(kDom0);
  if (!port) return 10;
  send_line(ctrl, std::to_string(hv.self().value()) + " " + std::to_string(port->value()));
  int seen = 0;
  while (seen < rounds) {
    auto p = wait_event(*ch, 30s);
    if (!p) break;
    ++seen;
    (void)ch->unmask(*p);
    (void)ch->notify(*p);
  }
  send_line(ctrl, "seen " + std::to_string(seen));
  return recv_line(ctrl, 30s) ? 0 : 11;
}

}  // namespace unetback::test
