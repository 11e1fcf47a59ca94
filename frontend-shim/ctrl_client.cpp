#include "frontend-shim/ctrl_client.hpp"

#include <cstring>
#include <poll.h>
#include <string>

#include "common/util/log.hpp"

namespace unetback::netfront {

Result<std::unique_ptr<CtrlClient>> CtrlClient::create(hv::GrantSharer& sharer,
                                                       std::unique_ptr<hv::EventChannel> channel,
                                                       DomId backend) {
  std::unique_ptr<CtrlClient> c(new CtrlClient);
  // The ring read-write (the backend writes responses); the data page read-write too, as one
  // grant call: the backend only ever copies from it.
  auto pages = sharer.share(backend, 2, hv::Access::read_write);
  if (!pages) return pages.error();
  c->pages_ = std::move(*pages);
  c->ring_ = ring::CtrlFrontRing::init(c->pages_.page(0));
  c->channel_ = std::move(channel);
  auto port = c->channel_->bind_unbound(backend);
  if (!port) return port.error();
  c->port_ = hv::BoundPort(*c->channel_, *port);
  return c;
}

CtrlClient::~CtrlClient() {
  port_.reset();
}

Result<wire::CtrlResponse> CtrlClient::request(wire::CtrlType type, std::uint32_t d0,
                                               std::uint32_t d1, std::uint32_t d2,
                                               std::chrono::milliseconds timeout) {
  wire::CtrlRequest req{};
  req.id = next_id_++;
  req.type = static_cast<std::uint16_t>(type);
  req.data[0] = d0;
  req.data[1] = d1;
  req.data[2] = d2;
  ring_->put_request(req);
  ++requests_;
  if (ring_->push_requests()) (void)port_.notify();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (ring_->response_prod_overflow()) return std::make_error_code(std::errc::protocol_error);
    if (ring_->unconsumed_responses() != 0) {
      const auto rsp = ring_->take_response();
      if (rsp.id != req.id || rsp.type != req.type)
        return std::make_error_code(std::errc::protocol_error);
      return rsp;
    }
    if (ring_->final_check_for_responses()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::make_error_code(std::errc::timed_out);
    // The event, or at the latest every 10 ms a look at the ring (an event may be lost).
    pollfd p{channel_->fd(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    (void)::poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 10)));
    for (;;) {
      auto pending = channel_->pending();
      if (!pending || !*pending) break;
      (void)channel_->unmask(**pending);
    }
  }
}

std::error_code CtrlClient::expect_success(const Result<wire::CtrlResponse>& r, const char* what) {
  if (!r) {
    log::write(log::Level::warn, "netfront-ctrl", std::string(what) + ": " + r.error().message());
    return r.error();
  }
  if (r->status != XEN_NETIF_CTRL_STATUS_SUCCESS) {
    log::write(log::Level::warn, "netfront-ctrl",
               std::string(what) + ": backend answered status " + std::to_string(r->status));
    return std::make_error_code(std::errc::invalid_argument);
  }
  return {};
}

std::error_code CtrlClient::configure_rss(std::span<const std::uint8_t> key,
                                          std::span<const std::uint32_t> mapping,
                                          std::uint32_t flags, std::chrono::milliseconds timeout) {
  if (key.size() > wire::kPageSize || mapping.size() * 4 > wire::kPageSize)
    return std::make_error_code(std::errc::invalid_argument);
  if (auto ec = expect_success(
          request(wire::CtrlType::set_hash_algorithm,
                  static_cast<std::uint32_t>(wire::HashAlgorithm::toeplitz), 0, 0, timeout),
          "SET_HASH_ALGORITHM"))
    return ec;
  mapping_size_ = ~0u;  // set_mapping sends the size
  if (auto ec = set_mapping(mapping, timeout)) return ec;
  std::memcpy(data_page(), key.data(), key.size());
  if (auto ec = expect_success(request(wire::CtrlType::set_hash_key, data_ref().value(),
                                       static_cast<std::uint32_t>(key.size()), 0, timeout),
                               "SET_HASH_KEY"))
    return ec;
  return expect_success(request(wire::CtrlType::set_hash_flags, flags, 0, 0, timeout),
                        "SET_HASH_FLAGS");
}

std::error_code CtrlClient::set_mapping(std::span<const std::uint32_t> mapping,
                                        std::chrono::milliseconds timeout) {
  if (mapping.size() * 4 > wire::kPageSize)
    return std::make_error_code(std::errc::invalid_argument);
  const auto n = static_cast<std::uint32_t>(mapping.size());
  if (n != mapping_size_) {
    if (auto ec = expect_success(request(wire::CtrlType::set_hash_mapping_size, n, 0, 0, timeout),
                                 "SET_HASH_MAPPING_SIZE"))
      return ec;
    mapping_size_ = n;
  }
  std::memcpy(data_page(), mapping.data(), mapping.size() * 4);
  return expect_success(
      request(wire::CtrlType::set_hash_mapping, data_ref().value(), n, 0, timeout),
      "SET_HASH_MAPPING");
}

}  // namespace unetback::netfront
