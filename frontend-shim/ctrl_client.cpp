#include "frontend-shim/ctrl_client.hpp"

#include <algorithm>
#include <cstring>

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

std::error_code CtrlClient::send(const CtrlStep& step) {
  if (in_flight_) return std::make_error_code(std::errc::device_or_resource_busy);
  if (step.data.size() > wire::kPageSize) return std::make_error_code(std::errc::invalid_argument);
  if (ring_->full()) return std::make_error_code(std::errc::no_buffer_space);
  if (!step.data.empty()) std::memcpy(data_page(), step.data.data(), step.data.size());
  wire::CtrlRequest req{};
  req.id = next_id_++;
  req.type = static_cast<std::uint16_t>(step.type);
  req.data[0] = step.d0;
  req.data[1] = step.d1;
  req.data[2] = step.d2;
  ring_->put_request(req);
  ++requests_;
  in_flight_ = req;
  if (ring_->push_requests()) (void)port_.notify();
  return {};
}

std::optional<Result<wire::CtrlResponse>> CtrlClient::take_response() {
  for (;;) {
    auto pending = channel_->pending();
    if (!pending || !*pending) break;
    (void)channel_->unmask(**pending);
  }
  if (!in_flight_) return std::nullopt;
  // The ring, then (nothing there) rsp_event armed for the next answer and a last look: the
  // backend notifies only past rsp_event.
  while (ring_->final_check_for_responses()) {
    if (ring_->response_prod_overflow()) {
      in_flight_.reset();
      return std::make_error_code(std::errc::protocol_error);
    }
    const auto rsp = ring_->take_response();
    if (!abandoned_.empty() && rsp.id == abandoned_.front()) {
      abandoned_.erase(abandoned_.begin());  // a late answer to a request we gave up on
      continue;
    }
    const wire::CtrlRequest req = *in_flight_;
    in_flight_.reset();
    if (rsp.id != req.id || rsp.type != req.type)
      return std::make_error_code(std::errc::protocol_error);
    if (rsp.status == XEN_NETIF_CTRL_STATUS_SUCCESS &&
        req.type == static_cast<std::uint16_t>(wire::CtrlType::set_hash_mapping_size))
      mapping_size_ = req.data[0];
    return rsp;
  }
  return std::nullopt;
}

void CtrlClient::abandon() {
  if (!in_flight_) return;
  abandoned_.push_back(in_flight_->id);
  in_flight_.reset();
}

std::vector<CtrlStep> CtrlClient::append_mapping(std::vector<CtrlStep> steps,
                                                 std::span<const std::uint32_t> mapping,
                                                 bool with_size) const {
  const auto n = static_cast<std::uint32_t>(mapping.size());
  if (with_size)
    steps.push_back({wire::CtrlType::set_hash_mapping_size, n, 0, 0, {}, "SET_HASH_MAPPING_SIZE"});
  const auto bytes = std::as_bytes(mapping);
  steps.push_back({wire::CtrlType::set_hash_mapping, data_ref().value(), n, 0,
                   std::vector<std::byte>(bytes.begin(), bytes.end()), "SET_HASH_MAPPING"});
  return steps;
}

Result<std::vector<CtrlStep>> CtrlClient::rss_steps(std::span<const std::uint8_t> key,
                                                    std::span<const std::uint32_t> mapping,
                                                    std::uint32_t flags) const {
  if (key.size() > wire::kPageSize || mapping.size() * 4 > wire::kPageSize)
    return std::make_error_code(std::errc::invalid_argument);
  std::vector<CtrlStep> steps;
  steps.push_back({wire::CtrlType::set_hash_algorithm,
                   static_cast<std::uint32_t>(wire::HashAlgorithm::toeplitz),
                   0,
                   0,
                   {},
                   "SET_HASH_ALGORITHM"});
  steps = append_mapping(std::move(steps), mapping, true);
  const auto key_bytes = std::as_bytes(key);
  steps.push_back({wire::CtrlType::set_hash_key, data_ref().value(),
                   static_cast<std::uint32_t>(key.size()), 0,
                   std::vector<std::byte>(key_bytes.begin(), key_bytes.end()), "SET_HASH_KEY"});
  steps.push_back({wire::CtrlType::set_hash_flags, flags, 0, 0, {}, "SET_HASH_FLAGS"});
  return steps;
}

Result<std::vector<CtrlStep>> CtrlClient::mapping_steps(
    std::span<const std::uint32_t> mapping) const {
  if (mapping.size() * 4 > wire::kPageSize)
    return std::make_error_code(std::errc::invalid_argument);
  return append_mapping({}, mapping, mapping_size_ != static_cast<std::uint32_t>(mapping.size()));
}

}  // namespace unetback::netfront
