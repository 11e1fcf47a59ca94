// Netfront: a userspace xen-netfront. It connects to a vif backend the way Linux's
// xen-netfront does (xen-netfront.c) and runs the data path of every queue:
//
//   connect():  wait (bounded) for the backend's state InitWait (2); read feature-rx-copy
//               (required), multi-queue-max-queues, feature-split-event-channels,
//               feature-sg/gso/ipv6-csum; grant the rings and buffers, allocate unbound event
//               channels for the backend, post a full ring of RX buffers; then write, in ONE
//               transaction, every key plus state=4 (Linux skips Initialised).
//   disconnect(): state 5, wait (bounded) for the backend to close, unbind the ports and
//               revoke every grant (a grant the backend still holds is revoked later, when it
//               lets go), state 6. begin_disconnect()/finish_disconnect() are its halves
//               for an event loop, which waits on its own xenstore watch.
//
// Usable synchronously from a test (send/poll/handle_event are plain calls) and from an
// event loop (event_fd(q) is readable when the queue's event channel has an event; then
// call handle_event(q) and poll(q)).
//
// Single-threaded per queue; connect/disconnect from the same thread as the data path.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "common/hv/hypervisor.hpp"
#include "frontend-shim/ctrl_client.hpp"
#include "frontend-shim/netfront_queue.hpp"
#include "frontend-shim/netfront_types.hpp"
#include "frontend-shim/xenbus_keys.hpp"

namespace unetback::netfront {

class Netfront {
 public:
  /// Frontend role: `hv` grants our pages (hv.grant_sharer()) and must outlive this object.
  /// Opens a xenstore connection; throws SetupError if that fails or `opts` is invalid.
  Netfront(hv::Hypervisor& hv, NetfrontOptions opts);
  /// Disconnects without waiting for the backend.
  ~Netfront();
  Netfront(const Netfront&) = delete;
  Netfront& operator=(const Netfront&) = delete;

  /// Errors: timed_out (backend never reached InitWait), no_such_device (no
  /// feature-rx-copy), already_connected, or the xenstore/grant/event-channel error.
  std::error_code connect(std::chrono::milliseconds timeout);
  /// begin_disconnect(), a wait (bounded) for the backend to follow, finish_disconnect().
  void disconnect(std::chrono::milliseconds wait_for_backend = std::chrono::seconds(1));
  /// The two halves of disconnect() for an event loop that waits on its own watch: Closing
  /// (5), the data path stops (connected() is false, closing() true); then, once
  /// backend_closing() or the caller gave up, the ports unbound, every grant revoked and
  /// Closed (6).
  void begin_disconnect();
  void finish_disconnect();
  /// netfront_resume's xennet_disconnect_backend: the rings, ports and grants go without a
  /// word to xenstore (a suspended guest says nothing; the toolstack removes the device).
  void drop_rings();
  /// The backend's state reads Closing or later, or its directory is gone.
  [[nodiscard]] bool backend_closing();
  [[nodiscard]] bool connected() const { return !queues_.empty() && !closing_; }
  [[nodiscard]] bool closing() const { return closing_; }

  [[nodiscard]] std::uint32_t num_queues() const {
    return static_cast<std::uint32_t>(queues_.size());
  }
  /// Linux netfront's xennet_xdp_set, in two halves around the backend's answer: begin writes
  /// F:state=Reconfiguring (7) and then F:xdp-headroom (Linux's order); once the backend's
  /// state reads Reconfigured (8), end writes F:state=Connected (4). Errors: not_connected,
  /// not_supported (no feature-xdp-headroom), invalid_argument (above kMaxXdpHeadroom), or
  /// the xenstore error. The RX parser honours each response's offset whatever was asked.
  std::error_code begin_xdp_headroom_change(std::uint32_t headroom);
  std::error_code end_xdp_headroom_change();
  /// The headroom last asked for (0 when the backend offers none).
  [[nodiscard]] std::uint32_t xdp_headroom() const { return xdp_headroom_; }

  /// What was negotiated at connect.
  [[nodiscard]] const BackendFeatures& backend_features() const { return backend_; }
  [[nodiscard]] bool split_event_channels() const { return split_; }
  [[nodiscard]] DomId backend_domid() const { return backend_id_; }
  [[nodiscard]] const std::string& frontend_dir() const { return fe_dir_; }
  [[nodiscard]] const std::string& backend_dir() const { return be_dir_; }

  // --- data path (queue 0 by default). Errors: not_connected, invalid_argument (no such
  // queue), io_error (the queue is broken), resource_unavailable_try_again (busy: fewer than
  // 19 free slots, or out of ids/pages; process responses and retry), message_size,
  // not_supported (GSO type not negotiated). ---

  /// Sends one linear frame, split over slots like Linux.
  Result<TxSendInfo> send(std::span<const std::byte> frame, const TxMeta& meta = {},
                          QueueId q = {});
  /// A buffer of granted pages for a frame of `len` bytes (write or readv into it).
  Result<TxBuffer> alloc_tx_buffer(std::size_t len, QueueId q = {});
  /// Sends a frame built in a TxBuffer: zerocopy or copy, as the PendingLimiter decides.
  /// On busy the buffer is left with the caller.
  Result<TxSendInfo> send(TxBuffer&& buffer, const TxMeta& meta = {}, QueueId q = {});
  /// Sends `data` over exactly the given slot layout (for backend scenario tests: tiny first
  /// slots, zero-size slots, more than 18 slots). The first request's size is the total
  /// unless `first_size` says otherwise. Not subject to the 19-free-slots stop rule.
  Result<TxSendInfo> send_raw(std::span<const RawTxSlot> slots, std::span<const std::byte> data,
                              const TxMeta& meta = {}, std::optional<std::uint16_t> first_size = {},
                              QueueId q = {});

  /// Collects up to rx_budget received packets into `out` (appended); refills per seed 002.
  std::size_t poll(std::vector<RxPacket>& out, QueueId q = {});
  /// The same, each packet given to `sink` where it lies (NetfrontQueue::poll(RxSink&)).
  std::size_t poll(RxSink& sink, QueueId q = {});
  /// The queue's event-channel fd (-1 for no such queue).
  [[nodiscard]] int event_fd(QueueId q = {}) const;
  /// Consumes the queue's pending events, processes TX responses, unmasks.
  EventKinds handle_event(QueueId q = {});
  /// Processes TX responses without an event (polling mode).
  void process_tx_responses(QueueId q = {});

  [[nodiscard]] NetfrontStats stats() const;
  [[nodiscard]] NetfrontStats stats(QueueId q) const;
  /// The control ring (nullptr unless ctrl_ring was asked for and the backend offers one).
  [[nodiscard]] CtrlClient* ctrl() const { return ctrl_.get(); }
  /// The queue itself (nullptr if none), for tests and ring dumps.
  [[nodiscard]] NetfrontQueue* queue(QueueId q) const;

 private:
  std::error_code write_state(XenbusState s);
  /// Blocks until B:state is `want` (at_least: `want` or later, or the backend dir gone) or
  /// `deadline` passes (timed_out): a watch on the node and a wait on the watch fd, no polling.
  std::error_code wait_backend_state(XenbusState want,
                                     std::chrono::steady_clock::time_point deadline, bool at_least);

  hv::Hypervisor& hv_;
  NetfrontOptions opts_;
  std::unique_ptr<hv::XenStore> xs_;
  std::string fe_dir_, be_dir_;
  DomId backend_id_{};
  BackendFeatures backend_;
  bool split_ = false;
  std::vector<std::shared_ptr<NetfrontQueue>> queues_;
  std::unique_ptr<CtrlClient> ctrl_;
  std::uint32_t xdp_headroom_ = 0;
  bool closing_ = false;
};

}  // namespace unetback::netfront
