// CtrlClient: the frontend side of a vif's control ring (netif.h "Control ring"), driven the
// way win-xenvif's controller.c drives it: one request at a time, each answered (or given up)
// within a timeout before the next is sent.
//
// It owns the ring page and one data page (both granted to the backend; the data page
// read-only: netif.h allows it, and the backend only copies from it), and an unbound event
// channel for the backend to bind. configure_rss() is win-xenvif's RSS sequence:
// SET_HASH_ALGORITHM(Toeplitz), SET_HASH_MAPPING_SIZE, SET_HASH_MAPPING, SET_HASH_KEY (40
// bytes), SET_HASH_FLAGS.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "common/hv/event_channel.hpp"
#include "common/hv/grant_sharer.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/result.hpp"
#include "common/wire/netif.hpp"

namespace unetback::netfront {

/// win-xenvif's per-request wait.
inline constexpr std::chrono::milliseconds kCtrlTimeout{5000};

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

  /// Sends one request and waits for its response: timed_out if none arrives in time,
  /// protocol_error if the backend answers another id or overruns the ring.
  Result<wire::CtrlResponse> request(wire::CtrlType type, std::uint32_t d0 = 0,
                                     std::uint32_t d1 = 0, std::uint32_t d2 = 0,
                                     std::chrono::milliseconds timeout = kCtrlTimeout);

  /// win-xenvif's RSS sequence (above). Errors: a request's error, or invalid_argument when
  /// the backend refused a step (its status logged).
  std::error_code configure_rss(std::span<const std::uint8_t> key,
                                std::span<const std::uint32_t> mapping, std::uint32_t flags,
                                std::chrono::milliseconds timeout = kCtrlTimeout);
  /// A new table while traffic runs: SET_HASH_MAPPING_SIZE (if the size changes), then
  /// SET_HASH_MAPPING.
  std::error_code set_mapping(std::span<const std::uint32_t> mapping,
                              std::chrono::milliseconds timeout = kCtrlTimeout);

  [[nodiscard]] std::uint64_t requests() const { return requests_; }

 private:
  CtrlClient() = default;
  std::error_code expect_success(const Result<wire::CtrlResponse>& r, const char* what);

  hv::SharedPages pages_;  // [0] the ring, [1] the data page
  std::unique_ptr<hv::EventChannel> channel_;
  hv::BoundPort port_;
  std::optional<ring::CtrlFrontRing> ring_;
  std::uint16_t next_id_ = 0;
  std::uint32_t mapping_size_ = 0;
  std::uint64_t requests_ = 0;
};

}  // namespace unetback::netfront
