// C++ views of xen/io/netif.h: the request/response structs are the system header's own,
// used as-is (so Linux netfront/netback can be the peer); this file adds typed flags, the
// extra-info and GSO enumerations, status values and compile-time layout checks.
#pragma once

#include <cstdint>

#include "common/wire/flags.hpp"
#include "common/wire/xen_headers.hpp"

namespace unetback::wire {

using TxRequest = netif_tx_request_t;
using TxResponse = netif_tx_response_t;
using RxRequest = netif_rx_request_t;
using RxResponse = netif_rx_response_t;
using ExtraInfo = netif_extra_info_t;

inline constexpr std::uint32_t kPageSize = 4096;
/// Slots every backend must accept from a frontend without negotiation (XEN_NETIF_NR_SLOTS_MIN).
inline constexpr std::uint32_t kNrSlotsMin = XEN_NETIF_NR_SLOTS_MIN;
/// Largest packet the TX wire format can describe: the first request's 16-bit size.
inline constexpr std::uint32_t kMaxTxSize = XEN_NETIF_MAX_TX_SIZE;
inline constexpr std::uint32_t kEthHeaderLen = 14;

/// Guest-TX request flags (NETTXF_*). Bits 0/1 are csum_blank/data_validated.
enum class TxFlag : std::uint16_t {
  csum_blank = NETTXF_csum_blank,
  data_validated = NETTXF_data_validated,
  more_data = NETTXF_more_data,
  extra_info = NETTXF_extra_info,
};
/// Guest-RX response flags (NETRXF_*). Bits 0/1 are data_validated/csum_blank: swapped
/// with respect to TxFlag.
enum class RxFlag : std::uint16_t {
  data_validated = NETRXF_data_validated,
  csum_blank = NETRXF_csum_blank,
  more_data = NETRXF_more_data,
  extra_info = NETRXF_extra_info,
  gso_prefix = NETRXF_gso_prefix,  // deprecated; never produced
};
template <>
inline constexpr bool kIsFlagEnum<TxFlag> = true;
template <>
inline constexpr bool kIsFlagEnum<RxFlag> = true;
using TxFlags = Flags<TxFlag>;
using RxFlags = Flags<RxFlag>;

static_assert(NETTXF_csum_blank == NETRXF_data_validated, "TX/RX bit 0/1 swap");
static_assert(NETTXF_data_validated == NETRXF_csum_blank, "TX/RX bit 0/1 swap");

/// netif_extra_info.type
enum class ExtraType : std::uint8_t {
  none = XEN_NETIF_EXTRA_TYPE_NONE,  // never valid on the wire
  gso = XEN_NETIF_EXTRA_TYPE_GSO,
  mcast_add = XEN_NETIF_EXTRA_TYPE_MCAST_ADD,
  mcast_del = XEN_NETIF_EXTRA_TYPE_MCAST_DEL,
  hash = XEN_NETIF_EXTRA_TYPE_HASH,
};
inline constexpr std::uint8_t kExtraTypeMax = XEN_NETIF_EXTRA_TYPE_MAX;

/// netif_extra_info.flags
enum class ExtraFlag : std::uint8_t { more = XEN_NETIF_EXTRA_FLAG_MORE };
template <>
inline constexpr bool kIsFlagEnum<ExtraFlag> = true;
using ExtraFlags = Flags<ExtraFlag>;

/// netif_extra_info.u.gso.type
enum class GsoType : std::uint8_t {
  none = XEN_NETIF_GSO_TYPE_NONE,
  tcpv4 = XEN_NETIF_GSO_TYPE_TCPV4,
  tcpv6 = XEN_NETIF_GSO_TYPE_TCPV6,
};

/// Response status (netif_tx_response.status; netif_rx_response.status when negative).
enum class RspStatus : std::int16_t {
  dropped = NETIF_RSP_DROPPED,
  error = NETIF_RSP_ERROR,
  okay = NETIF_RSP_OKAY,
  null = NETIF_RSP_NULL,  // the response slot of an extra-info request
};

/// A TX request with its flags typed.
[[nodiscard]] constexpr TxFlags tx_flags(const TxRequest& r) {
  return TxFlags::from_raw(r.flags);
}
/// An RX response with its flags typed.
[[nodiscard]] constexpr RxFlags rx_flags(const RxResponse& r) {
  return RxFlags::from_raw(r.flags);
}
[[nodiscard]] constexpr ExtraFlags extra_flags(const ExtraInfo& e) {
  return ExtraFlags::from_raw(e.flags);
}

// Layout checks against the documented wire format (Xen's io/netif.h and io/ring.h).
static_assert(sizeof(TxRequest) == 12);
static_assert(offsetof(TxRequest, gref) == 0);
static_assert(offsetof(TxRequest, offset) == 4);
static_assert(offsetof(TxRequest, flags) == 6);
static_assert(offsetof(TxRequest, id) == 8);
static_assert(offsetof(TxRequest, size) == 10);
static_assert(sizeof(TxResponse) == 4);
static_assert(offsetof(TxResponse, id) == 0);
static_assert(offsetof(TxResponse, status) == 2);
static_assert(sizeof(RxRequest) == 8);
static_assert(offsetof(RxRequest, id) == 0);
static_assert(offsetof(RxRequest, gref) == 4);
static_assert(sizeof(RxResponse) == 8);
static_assert(offsetof(RxResponse, id) == 0);
static_assert(offsetof(RxResponse, offset) == 2);
static_assert(offsetof(RxResponse, flags) == 4);
static_assert(offsetof(RxResponse, status) == 6);
// An extra overlays a TX request and an RX response, so it must fit both.
static_assert(sizeof(ExtraInfo) == 8);
static_assert(sizeof(ExtraInfo) <= sizeof(TxRequest) && sizeof(ExtraInfo) <= sizeof(RxResponse));
static_assert(offsetof(ExtraInfo, type) == 0);
static_assert(offsetof(ExtraInfo, flags) == 1);
static_assert(offsetof(ExtraInfo, u) == 2);
static_assert(offsetof(ExtraInfo, u.gso.size) == 2);
static_assert(offsetof(ExtraInfo, u.gso.type) == 4);
static_assert(offsetof(ExtraInfo, u.gso.features) == 6);
static_assert(offsetof(ExtraInfo, u.mcast.addr) == 2);
static_assert(offsetof(ExtraInfo, u.hash.type) == 2);
static_assert(offsetof(ExtraInfo, u.hash.value) == 4);

// The control ring (netif.h "Control ring", "Control requests/responses").
using CtrlRequest = xen_netif_ctrl_request;
using CtrlResponse = xen_netif_ctrl_response;

/// xen_netif_ctrl_request.type
enum class CtrlType : std::uint16_t {
  invalid = XEN_NETIF_CTRL_TYPE_INVALID,
  get_hash_flags = XEN_NETIF_CTRL_TYPE_GET_HASH_FLAGS,
  set_hash_flags = XEN_NETIF_CTRL_TYPE_SET_HASH_FLAGS,
  set_hash_key = XEN_NETIF_CTRL_TYPE_SET_HASH_KEY,
  get_hash_mapping_size = XEN_NETIF_CTRL_TYPE_GET_HASH_MAPPING_SIZE,
  set_hash_mapping_size = XEN_NETIF_CTRL_TYPE_SET_HASH_MAPPING_SIZE,
  set_hash_mapping = XEN_NETIF_CTRL_TYPE_SET_HASH_MAPPING,
  set_hash_algorithm = XEN_NETIF_CTRL_TYPE_SET_HASH_ALGORITHM,
  get_gref_mapping_size = XEN_NETIF_CTRL_TYPE_GET_GREF_MAPPING_SIZE,
  add_gref_mapping = XEN_NETIF_CTRL_TYPE_ADD_GREF_MAPPING,
  del_gref_mapping = XEN_NETIF_CTRL_TYPE_DEL_GREF_MAPPING,
};

/// xen_netif_ctrl_response.status
enum class CtrlStatus : std::uint32_t {
  success = XEN_NETIF_CTRL_STATUS_SUCCESS,
  not_supported = XEN_NETIF_CTRL_STATUS_NOT_SUPPORTED,
  invalid_parameter = XEN_NETIF_CTRL_STATUS_INVALID_PARAMETER,
  buffer_overflow = XEN_NETIF_CTRL_STATUS_BUFFER_OVERFLOW,
};

/// XEN_NETIF_CTRL_HASH_ALGORITHM_*
enum class HashAlgorithm : std::uint32_t {
  none = XEN_NETIF_CTRL_HASH_ALGORITHM_NONE,
  toeplitz = XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ,
};

/// XEN_NETIF_CTRL_HASH_TYPE_* bits (SET_HASH_FLAGS); the HASH extra carries the bit number
/// (_XEN_NETIF_CTRL_HASH_TYPE_*) instead.
inline constexpr std::uint32_t kHashTypeIpv4 = XEN_NETIF_CTRL_HASH_TYPE_IPV4;
inline constexpr std::uint32_t kHashTypeIpv4Tcp = XEN_NETIF_CTRL_HASH_TYPE_IPV4_TCP;
inline constexpr std::uint32_t kHashTypeIpv6 = XEN_NETIF_CTRL_HASH_TYPE_IPV6;
inline constexpr std::uint32_t kHashTypeIpv6Tcp = XEN_NETIF_CTRL_HASH_TYPE_IPV6_TCP;
inline constexpr std::uint32_t kHashTypesAll =
    kHashTypeIpv4 | kHashTypeIpv4Tcp | kHashTypeIpv6 | kHashTypeIpv6Tcp;

static_assert(sizeof(CtrlRequest) == 16);
static_assert(offsetof(CtrlRequest, id) == 0);
static_assert(offsetof(CtrlRequest, type) == 2);
static_assert(offsetof(CtrlRequest, data) == 4);
static_assert(sizeof(CtrlResponse) == 12);
static_assert(offsetof(CtrlResponse, id) == 0);
static_assert(offsetof(CtrlResponse, type) == 2);
static_assert(offsetof(CtrlResponse, status) == 4);
static_assert(offsetof(CtrlResponse, data) == 8);

}  // namespace unetback::wire
