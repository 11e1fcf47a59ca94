#include "tests/integration/xensim/granter_child.hpp"

#include <map>
#include <sstream>

#include "common/hv/sim/sim_grant_sharer.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/xensim_process.hpp"

namespace unetback::test {

int granter_main(int ctrl, const std::string& world_dir, const std::string& name) {
  hv::HypervisorOptions opts;
  opts.role = hv::Role::frontend;
  opts.name = name;
  hv::SimHypervisor hv(world_dir, opts);
  auto& sharer = hv.sim_grant_sharer();
  std::map<int, hv::SharedPages> sets;
  int next_set = 0;
  send_line(ctrl, "domid " + std::to_string(hv.self().value()));
  for (;;) {
    auto line = recv_line(ctrl, std::chrono::seconds(60));
    if (!line) return 2;
    std::istringstream in(*line);
    std::string cmd;
    in >> cmd;
    if (cmd == "exit") return 0;
    if (cmd == "share") {
      std::size_t count = 0;
      std::string access;
      unsigned peer = 0;
      in >> count >> access >> peer;
      auto pages = sharer.share(DomId{static_cast<std::uint16_t>(peer)}, count,
                                access == "ro" ? hv::Access::read_only : hv::Access::read_write);
      if (!pages) {
        send_line(ctrl, "error " + pages.error().message());
        continue;
      }
      std::string reply = "refs " + std::to_string(next_set);
      for (std::size_t i = 0; i < pages->count(); ++i) {
        const std::uint32_t ref = pages->ref(i).value();
        for (std::uint32_t off = 0; off < hv::kPageSize; ++off)
          pages->page(i)[off] = std::byte{pattern_byte(ref, off)};
        reply += " " + std::to_string(ref);
      }
      sets.emplace(next_set++, std::move(*pages));
      send_line(ctrl, reply);
    } else if (cmd == "inuse") {
      std::uint32_t ref = 0;
      in >> ref;
      send_line(ctrl, sharer.in_use(GrantRef{ref}) == hv::GrantUse::in_use ? "in_use" : "unused");
    } else if (cmd == "release") {
      int set = 0;
      in >> set;
      sets.erase(set);
      send_line(ctrl, "deferred " + std::to_string(sharer.deferred_count()));
    } else if (cmd == "retry") {
      send_line(ctrl, "deferred " + std::to_string(sharer.retry_deferred()));
    } else if (cmd == "byte") {
      int set = 0;
      std::size_t index = 0, offset = 0;
      in >> set >> index >> offset;
      send_line(ctrl, "byte " + std::to_string(
                                    std::to_integer<unsigned>(sets.at(set).page(index)[offset])));
    } else {
      send_line(ctrl, "error unknown command");
    }
  }
}

}  // namespace unetback::test
