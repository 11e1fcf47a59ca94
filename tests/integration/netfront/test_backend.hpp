// A minimal vif backend for netfront integration tests, run in the test process as dom0 of
// a xensim world: it plays the toolstack (device directories), advertises features, maps
// the rings, binds the event channels, answers TX by grant-copying the data out, and fills
// RX requests netback-style (slot 0 data, extras after it, response i at request i's index).
// Synchronous: every call does its work at once; nothing here waits unbounded.
#pragma once

#include <chrono>
#include <gtest/gtest.h>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/ring/shared_ring.hpp"
#include "frontend-shim/rx_response_parser.hpp"

namespace unetback::test {

struct BackendAdvert {
  bool rx_copy = true;
  std::optional<std::uint32_t> max_queues;
  bool split = true;
  bool sg = true, gso_tcpv4 = true, gso_tcpv6 = true, ipv6_csum = true;
  bool ctrl_ring = false;  ///< feature-ctrl-ring
};

/// One TX packet as the backend received it.
struct TxGot {
  std::vector<std::byte> bytes;
  std::vector<wire::TxRequest> requests;  // data requests, in order (the extra excluded)
  std::optional<wire::ExtraInfo> extra;   // the first extra
  std::vector<wire::ExtraInfo> extras;    // every extra, in chain order (FLAG_MORE)
  bool copy_ok = true;
};

class TestBackend {
 public:
  TestBackend(hv::SimHypervisor& dom0, DomId frontend, DevId devid = DevId{0});
  ~TestBackend();

  [[nodiscard]] const std::string& be_dir() const { return be_dir_; }
  [[nodiscard]] const std::string& fe_dir() const { return fe_dir_; }
  [[nodiscard]] hv::XenStore& xs() { return *xs_; }

  /// libxl's part: both directories with their permissions, state 1 on both sides.
  void create_device();
  /// Netback's probe: feature keys, then state=2 (InitWait).
  void advertise(const BackendAdvert& a);
  void set_state(int state);
  /// The frontend's state, or -1.
  int frontend_state();
  /// Waits (bounded) until the frontend's state is `state`.
  bool wait_frontend_state(int state, std::chrono::milliseconds timeout);
  /// The frontend directory's keys and values (one level, plus queue-N/ children).
  std::map<std::string, std::string> frontend_keys();

  /// Maps the rings of queue `q` and binds its event channels (as netback on Connected).
  ::testing::AssertionResult attach(std::uint32_t q = 0);
  /// Unmaps the rings and unbinds (netback on the frontend's Closing).
  void detach();

  // --- TX (guest -> host) ---
  std::uint32_t tx_pending_requests() { return tx_->unconsumed_requests(); }
  /// Takes one packet's requests, grant-copies its data and answers every slot OKAY (or
  /// `status`). If `hold_map`, the first slot's grant stays mapped until release_held().
  std::optional<TxGot> receive_tx(bool hold_map = false, std::int16_t status = NETIF_RSP_OKAY,
                                  bool respond = true);
  /// Answers an arbitrary response (for hostile-backend tests) and pushes it.
  void raw_tx_response(std::uint16_t id, std::int16_t status);
  void push_tx();
  void release_held() {
    held_.clear();
    held_refs_.clear();
  }
  [[nodiscard]] const std::vector<GrantRef>& held_refs() const { return held_refs_; }

  // --- RX (host -> guest) ---
  [[nodiscard]] RingIdx rx_req_prod() const { return rx_->req_prod(); }
  std::uint32_t rx_available() { return rx_->unconsumed_requests(); }
  /// Whether `n` RX requests are posted; if not, asks for a kick on the next one (req_event),
  /// as netback does when a packet waits for buffers.
  bool rx_requests_available(std::uint32_t n) { return rx_->requests_available(n); }
  /// Delivers one frame netback-style; false if not enough requests are posted. The first
  /// slot holds at most `first_slot` bytes (a backend may cut it short), the others a page.
  bool deliver_rx(std::span<const std::byte> frame, std::optional<netfront::RxGso> gso = {},
                  wire::RxFlags flags = {}, std::uint16_t first_slot = wire::kPageSize);
  /// Consumes one request per response and writes the given responses as they are (ids
  /// set to the request's unless `ids_as_given`); pushes them.
  bool deliver_raw_rx(std::vector<wire::RxResponse> responses, bool ids_as_given = false);
  /// Makes the RX response producer claim far more responses than requests exist.
  void corrupt_rx_rsp_prod(std::uint32_t extra);

  // --- the control ring ---
  /// Maps ctrl-ring-ref and binds event-channel-ctrl (netback's connect_ctrl_ring).
  ::testing::AssertionResult attach_ctrl();
  /// The next control request, if the frontend has put one on the ring.
  std::optional<wire::CtrlRequest> take_ctrl();
  /// The next control request within `timeout` (looked for every millisecond), or nothing.
  std::optional<wire::CtrlRequest> wait_ctrl(std::chrono::milliseconds timeout);
  /// Answers `req` with `status` (data 0) and notifies if the frontend asked for it.
  void answer_ctrl(const wire::CtrlRequest& req,
                   std::uint32_t status = XEN_NETIF_CTRL_STATUS_SUCCESS);
  /// `len` bytes at the start of the frontend's granted page `ref` (grant-copied).
  std::vector<std::byte> read_granted(GrantRef ref, std::size_t len);

  /// Counts the events this backend received so far on its ports (and unmasks them).
  std::uint32_t drain_events();

  hv::EventChannel& channel() { return *channel_; }

 private:
  void notify_tx();
  void notify_rx();

  hv::SimHypervisor& dom0_;
  DomId fe_;
  DevId devid_;
  std::unique_ptr<hv::XenStore> xs_;
  std::string be_dir_, fe_dir_;
  std::unique_ptr<hv::EventChannel> channel_;
  hv::BoundPort tx_port_, rx_port_, ctrl_port_;
  hv::MappedGrants tx_ring_page_, rx_ring_page_, ctrl_ring_page_;
  std::optional<ring::CtrlBackRing> ctrl_;
  std::optional<ring::TxBackRing> tx_;
  std::optional<ring::RxBackRing> rx_;
  std::vector<hv::MappedGrants> held_;
  std::vector<GrantRef> held_refs_;
};

}  // namespace unetback::test
