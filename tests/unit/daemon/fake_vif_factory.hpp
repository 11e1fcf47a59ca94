// FakeVifFactory: a VifFactory whose vifs record what the manager and BackendXenbus do to them
// (a journal shared by every vif, "5/0 connect 1"), keep the state a real vif would have (TAP,
// connected), report canned counters and ring indices, and can be marked disabled as a data
// path would. The factory knows which vifs are alive, so tests see creation and destruction.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "backend/daemon/backend_manager.hpp"
#include "backend/vif/vif_handle.hpp"

namespace unetback::testing {

class FakeVifFactory;

class FakeVif final : public vif::VifHandle {
 public:
  FakeVif(FakeVifFactory& factory, DomId frontend, DevId devid, vif::Tunables t);
  ~FakeVif() override;

  std::error_code create_tap(const xenbus::BackendConfig& be) override {
    note("create_tap " + be.tap_name);
    tap = be.tap_name;
    return {};
  }
  void destroy_tap() override {
    note("destroy_tap");
    tap.clear();
  }
  std::error_code connect(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig&,
                          const xenbus::Rate&) override {
    return rings_up("connect", fe);
  }
  // With the factory's `adopts` set, takes any device over (the real vif checks its state
  // record): the rings are up at once. Otherwise refuses as a vif without a record does, and
  // the device reconnects (the script runs again).
  std::error_code adopt(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be,
                        const xenbus::Rate& rate) override;
  void disconnect() override {
    note("disconnect");
    connected = false;
    queues = 0;
  }
  void rate_changed(const xenbus::Rate&) override { note("rate_changed"); }
  void multicast_control_changed(bool) override { note("multicast_control_changed"); }
  void mac_spoofing_changed(bool) override { note("mac_spoofing_changed"); }
  void xdp_headroom_changed(std::uint32_t) override { note("xdp_headroom_changed"); }

  [[nodiscard]] vif::VifReport report() const override {
    vif::VifReport r;
    r.frontend = frontend_;
    r.devid = devid_;
    r.tap_name = tap;
    r.connected = connected;
    r.carrier = connected;
    for (std::uint32_t q = 0; q < queues; ++q) {
      vif::QueueReport qr;
      qr.queue = QueueId{q};
      qr.counters = {{"rx_packets", 100 + q}, {"tx_packets", 200 + q}};
      qr.tx_ring = {10, 11, 9, 10, 10, 9};
      qr.rx_ring = {20 + q, 21, 19, 20, 20, 19};
      r.queues.push_back(std::move(qr));
    }
    return r;
  }
  [[nodiscard]] bool disabled() const override { return disabled_flag.load(); }

  std::atomic<bool> disabled_flag{false};
  std::string tap;
  bool connected = false;
  std::uint32_t queues = 0;
  vif::Tunables tunables;

 private:
  void note(const std::string& what);
  std::error_code rings_up(const std::string& how, const xenbus::FrontendConfig& fe) {
    note(how + " " + std::to_string(fe.queues.size()));
    queues = static_cast<std::uint32_t>(fe.queues.size());
    connected = true;
    return {};
  }
  FakeVifFactory& factory_;
  DomId frontend_;
  DevId devid_;
};

class FakeVifFactory final : public vif::VifFactory {
 public:
  std::unique_ptr<vif::VifHandle> make_vif(DomId frontend, DevId devid,
                                           const vif::Tunables& t) override {
    ++made;
    journal.push_back(daemon::format_vif_id({frontend, devid}) + " made");
    return std::make_unique<FakeVif>(*this, frontend, devid, t);
  }

  /// The live vif for `id`, or nullptr.
  FakeVif* find(DomId d, DevId v) {
    const auto it = live.find({d, v});
    return it == live.end() ? nullptr : it->second;
  }

  std::map<daemon::VifId, FakeVif*> live;
  std::vector<std::string> journal;
  bool adopts = false;  // FakeVif::adopt takes the rings over (else: operation_not_supported)
  int made = 0;
  int destroyed = 0;
};

inline FakeVif::FakeVif(FakeVifFactory& factory, DomId frontend, DevId devid, vif::Tunables t)
    : tunables(t), factory_(factory), frontend_(frontend), devid_(devid) {
  factory_.live[{frontend, devid}] = this;
}

inline std::error_code FakeVif::adopt(const xenbus::FrontendConfig& fe,
                                      const xenbus::BackendConfig& be, const xenbus::Rate& rate) {
  if (!factory_.adopts) return vif::VifHandle::adopt(fe, be, rate);
  return rings_up("adopt", fe);
}

inline FakeVif::~FakeVif() {
  factory_.live.erase({frontend_, devid_});
  ++factory_.destroyed;
  note("destroyed");
}

inline void FakeVif::note(const std::string& what) {
  factory_.journal.push_back(daemon::format_vif_id({frontend_, devid_}) + " " + what);
}

}  // namespace unetback::testing
