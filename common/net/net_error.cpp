#include "common/net/net_error.hpp"

#include <string>

namespace unetback::net {
namespace {

class NetCategory final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "unetback.net"; }

  [[nodiscard]] std::string message(int ev) const override {
    switch (static_cast<NetError>(ev)) {
      case NetError::truncated: return "packet headers run past the linear data";
      case NetError::unsupported_protocol:
        return "checksum offload needs IPv4/IPv6 carrying TCP or UDP";
      case NetError::bad_header: return "malformed IP or TCP header";
      case NetError::too_many_ext_headers: return "too many IPv6 extension headers";
      case NetError::fragment: return "checksum offload or GSO on an IP fragment";
      case NetError::no_transport_header: return "GSO packet without a TCP header";
      case NetError::bad_gso: return "invalid GSO type or GSO size";
      case NetError::gso_type_mismatch: return "GSO type does not match the IP version";
      case NetError::unsupported_gso_type: return "GSO type not expressible on netif (UDP GSO)";
      case NetError::gso_not_negotiated: return "frontend did not negotiate this GSO type";
      case NetError::bad_checksum_offsets: return "checksum start/offset outside the frame";
      case NetError::bad_mac: return "MAC address is not xx:xx:xx:xx:xx:xx";
    }
    return "unknown unetback.net error " + std::to_string(ev);
  }

  [[nodiscard]] std::error_condition default_error_condition(int ev) const noexcept override {
    switch (static_cast<NetError>(ev)) {
      case NetError::truncated: return std::errc::message_size;
      case NetError::unsupported_protocol:
      case NetError::unsupported_gso_type:
      case NetError::gso_not_negotiated: return std::errc::not_supported;
      case NetError::bad_header:
      case NetError::too_many_ext_headers:
      case NetError::fragment:
      case NetError::no_transport_header: return std::errc::protocol_error;
      case NetError::bad_gso:
      case NetError::gso_type_mismatch:
      case NetError::bad_checksum_offsets:
      case NetError::bad_mac: return std::errc::invalid_argument;
    }
    return {ev, *this};
  }
};

}  // namespace

const std::error_category& net_category() noexcept {
  static const NetCategory kCategory;
  return kCategory;
}

std::error_code make_error_code(NetError e) noexcept {
  return {static_cast<int>(e), net_category()};
}

const char* net_error_name(NetError e) noexcept {
  switch (e) {
    case NetError::truncated: return "truncated";
    case NetError::unsupported_protocol: return "unsupported_protocol";
    case NetError::bad_header: return "bad_header";
    case NetError::too_many_ext_headers: return "too_many_ext_headers";
    case NetError::fragment: return "fragment";
    case NetError::no_transport_header: return "no_transport_header";
    case NetError::bad_gso: return "bad_gso";
    case NetError::gso_type_mismatch: return "gso_type_mismatch";
    case NetError::unsupported_gso_type: return "unsupported_gso_type";
    case NetError::gso_not_negotiated: return "gso_not_negotiated";
    case NetError::bad_checksum_offsets: return "bad_checksum_offsets";
    case NetError::bad_mac: return "bad_mac";
  }
  return "unknown";
}

}  // namespace unetback::net
