// CtrlClient: the frontend side of a vif's control ring (netif.h "Control ring"), driven the
// way win-xenvif's controller.c drives it: one request at a time, each answered (or given up)
// within a timeout before the next is sent.
//
// It owns the ring page and one data page (both granted to the backend; the data page
// read-only: netif.h allows it, and the backend only copies from it), and an unbound event
// channel for the backend to bind. Nothing here waits: send() puts a request on the ring and
// notifies the backend, take_response() looks whether its answer is there. The shim's
// CtrlRunner (frontend-shim/ctrl_runner.hpp) waits for the channel's fd in the event loop and
// runs a sequence of steps, e.g. rss_steps(): win-xenvif's RSS sequence,
// SET_HASH_ALGORITHM(Toeplitz), SET_HASH_MAPPING_SIZE, SET_HASH_MAPPING, SET_HASH_KEY (40
// bytes), SET_HASH_FLAGS.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/hv/event_channel.hpp"
#include "common/hv/grant_sharer.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/result.hpp"
#include "common/wire/netif.hpp"

namespace unetback::netfront {

/// win-xenvif's per-request wait.
inline constexpr std::chrono::milliseconds kCtrlTimeout{5000};

/// One request of a control sequence: what it stages in the data page (at offset 0: a key
/// or a mapping table), then the request itself.
struct CtrlStep {
  wire::CtrlType type = wire::CtrlType::invalid;
  std::uint32_t d0 = 0, d1 = 0, d2 = 0;
  std::vector<std::byte> data;  ///< copied to the data page just before the request goes
  std::string_view name;        ///< for the log, e.g. "SET_HASH_KEY"
};

/// Thrown by nothing: every failure is a value. A request that the backend answered with a
/// status other than SUCCESS comes back as that response (the caller decides).
class CtrlClient {
 public:
  static Result<std::unique_ptr<CtrlClient>> create(hv::GrantSharer& sharer,
                                                    std::unique_ptr<hv::EventChannel> channel,
                                                    DomId backend);
  ~CtrlClient();
  CtrlClient(const CtrlClient&) = delete;
  CtrlClient& operator=(const CtrlClient&) = delete;

  /// For the frontend's keys: ctrl-ring-ref, event-channel-ctrl.
  [[nodiscard]] GrantRef ring_ref() const { return pages_.ref(0); }
  [[nodiscard]] Port port() const { return port_.port(); }
  /// The page keys and mapping tables are staged in (offset 0 of it: netif.h).
  [[nodiscard]] std::byte* data_page() const { return pages_.page(1); }
  [[nodiscard]] GrantRef data_ref() const { return pages_.ref(1); }
  /// Readable when the backend has notified the channel (an answer may be on the ring).
  [[nodiscard]] int event_fd() const { return channel_->fd(); }

  /// Stages the step's data and puts its request on the ring; the backend is notified if it
  /// asked to be. device_or_resource_busy while an earlier request is unanswered (and not
  /// abandoned), no_buffer_space when abandoned requests fill the ring, invalid_argument
  /// for data larger than the page.
  std::error_code send(const CtrlStep& step);
  /// The answer to the request in flight, if it is on the ring; never waits. The channel's
  /// pending events are taken first, so the fd is readable again only on a new notify.
  /// Answers to abandoned requests are skipped. protocol_error if the backend answers
  /// another request or overruns the ring (the request is then over too).
  std::optional<Result<wire::CtrlResponse>> take_response();
  /// Gives up on the request in flight (its timeout): its late answer will be skipped.
  void abandon();
  [[nodiscard]] bool in_flight() const { return in_flight_.has_value(); }

  /// win-xenvif's RSS sequence (above); invalid_argument if the key or the mapping does not
  /// fit in the data page.
  Result<std::vector<CtrlStep>> rss_steps(std::span<const std::uint8_t> key,
                                          std::span<const std::uint32_t> mapping,
                                          std::uint32_t flags) const;
  /// A new table while traffic runs: SET_HASH_MAPPING_SIZE (if the size differs from the
  /// last one the backend took), then SET_HASH_MAPPING.
  Result<std::vector<CtrlStep>> mapping_steps(std::span<const std::uint32_t> mapping) const;

  [[nodiscard]] std::uint64_t requests() const { return requests_; }

 private:
  CtrlClient() = default;
  std::vector<CtrlStep> append_mapping(std::vector<CtrlStep> steps,
                                       std::span<const std::uint32_t> mapping,
                                       bool with_size) const;

  hv::SharedPages pages_;  // [0] the ring, [1] the data page
  std::unique_ptr<hv::EventChannel> channel_;
  hv::BoundPort port_;
  std::optional<ring::CtrlFrontRing> ring_;
  std::uint16_t next_id_ = 0;
  std::optional<wire::CtrlRequest> in_flight_;
  std::vector<std::uint16_t> abandoned_;       ///< ids given up on, oldest first
  std::optional<std::uint32_t> mapping_size_;  ///< the last SET_HASH_MAPPING_SIZE answered SUCCESS
  std::uint64_t requests_ = 0;
};

}  // namespace unetback::netfront
