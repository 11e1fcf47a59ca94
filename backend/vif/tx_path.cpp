#include "backend/vif/tx_path.hpp"

namespace unetback::vif {

TxPath::TxPath(ring::TxBackRing ring, hv::GrantTable& table, PacketSink& sink,
               const TxConfig& config, QueueCounters& counters)
    : core_(ring, table, config, counters) {
  if (config.sw) {
    switch_.emplace(config);
  } else {
    tap_.emplace(sink, config);
  }
}

TxPath::Pass TxPath::process(Clock::time_point now) {
  Pass pass;
  if (!core_.begin_pass(pass)) return pass;
  TxPacket pkt;
  TxCore::Next next{};
  if (switch_) {
    switch_->begin_pass();
    while ((next = core_.next_packet(pass, now, pkt)) == TxCore::Next::packet)
      switch_->stage(core_, pkt);
    switch_->finish(core_, pass, now);
    return pass;
  }
  tap_->begin_pass();
  while ((next = core_.next_packet(pass, now, pkt)) == TxCore::Next::packet)
    tap_->stage(core_, pkt);
  tap_->finish(core_, pass);
  if (next != TxCore::Next::fatal) tap_->record_cost(core_);
  return pass;
}

}  // namespace unetback::vif
