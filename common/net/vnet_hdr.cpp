#include "common/net/vnet_hdr.hpp"

#include <array>
#include <cstring>

#include "common/net/bytes.hpp"
#include "common/net/checksum.hpp"

namespace unetback::net {
namespace {

constexpr std::uint8_t kGsoEcnBit = VIRTIO_NET_HDR_GSO_ECN;
// The kernel's GSO_BY_FRAGS marker: virtio_net_hdr_to_skb refuses it as a gso_size.
constexpr std::uint16_t kGsoByFrags = 0xFFFF;

std::size_t checksum_field_offset(std::uint8_t l4_proto) {
  return l4_proto == kIpProtoTcp ? kTcpChecksumOffset : kUdpChecksumOffset;
}

// The EtherType after at most one VLAN tag.
Result<std::uint16_t> outer_l3_proto(std::span<const std::byte> head) {
  if (head.size() < kEthHeaderLen) return make_error_code(NetError::truncated);
  std::uint16_t type = load_be16(head, 12);
  if (type == kEtherTypeVlan) {
    if (head.size() < kEthHeaderLen + kVlanTagLen) return make_error_code(NetError::truncated);
    type = load_be16(head, 16);
  }
  return type;
}

}  // namespace

Result<TxVnet> map_guest_tx(const GuestTxOffload& offload, std::span<const std::byte> head,
                            std::size_t frame_len) {
  TxVnet out;
  const bool csum_blank = offload.flags.has(wire::TxFlag::csum_blank);
  const bool validated = offload.flags.has(wire::TxFlag::data_validated);
  const std::optional<GsoInfo>& gso = offload.gso;

  if (gso) {
    if (gso->type != wire::GsoType::tcpv4 && gso->type != wire::GsoType::tcpv6) {
      return make_error_code(NetError::bad_gso);  // netback: "Bad GSO type"
    }
    // netback treats size 0 as a fatal protocol error ("GSO size must not be zero"); the
    // caller decides whether to disable the vif, we only refuse the packet.
    if (gso->size == 0 || gso->size == kGsoByFrags) return make_error_code(NetError::bad_gso);
  }

  if (!csum_blank && !gso) {
    // netback: data_validated alone is CHECKSUM_UNNECESSARY and needs no header parsing.
    if (validated) out.hdr.hdr.flags = VIRTIO_NET_HDR_F_DATA_VALID;
    return out;
  }

  // Never look past the end of the frame, whatever the caller's buffer holds.
  if (head.size() > frame_len) head = head.first(frame_len);
  auto parsed = parse_headers(head);
  if (!parsed) return parsed.error();
  const HeaderInfo& info = *parsed;
  const bool is_ip = info.is_ipv4() || info.is_ipv6();

  if (gso) {
    if (!is_ip) return make_error_code(NetError::no_transport_header);
    if (info.is_fragment) return make_error_code(NetError::fragment);
    if (info.l4_proto != kIpProtoTcp) return make_error_code(NetError::no_transport_header);
    const bool want_v4 = gso->type == wire::GsoType::tcpv4;
    if (want_v4 != info.is_ipv4()) return make_error_code(NetError::gso_type_mismatch);
  } else {
    if (!is_ip) return make_error_code(NetError::unsupported_protocol);
    // skb_checksum_setup_ip refuses fragments (-EPROTO): there is no L4 header to patch.
    if (info.is_fragment) return make_error_code(NetError::fragment);
    if (info.l4_proto != kIpProtoTcp && info.l4_proto != kIpProtoUdp) {
      return make_error_code(NetError::unsupported_protocol);
    }
  }
  if (info.headers_len() > 0xFFFF) return make_error_code(NetError::bad_header);

  VirtioNetHdr& h = out.hdr;
  // GSO always travels as a partial checksum: the kernel's segmentation completes one
  // checksum per segment from the pseudo-header sum (netback's checksum_setup forces it).
  h.hdr.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  h.hdr.csum_start = static_cast<std::uint16_t>(info.l4_offset);
  h.hdr.csum_offset = static_cast<std::uint16_t>(checksum_field_offset(info.l4_proto));
  if (gso) {
    h.hdr.gso_type =
        gso->type == wire::GsoType::tcpv4 ? VIRTIO_NET_HDR_GSO_TCPV4 : VIRTIO_NET_HDR_GSO_TCPV6;
    h.hdr.gso_size = gso->size;
    h.hdr.hdr_len = static_cast<std::uint16_t>(info.headers_len());
    out.needs_partial_fixup = !csum_blank;
  }
  out.headers = info;
  return out;
}

std::error_code write_partial_checksum(std::span<std::byte> head, const HeaderInfo& info,
                                       std::size_t frame_len) {
  if (info.l4_proto != kIpProtoTcp && info.l4_proto != kIpProtoUdp) {
    return NetError::unsupported_protocol;
  }
  const std::size_t field = info.l4_offset + checksum_field_offset(info.l4_proto);
  if (info.l4_offset > frame_len || field + 2 > head.size()) return NetError::truncated;
  auto sum = pseudo_header_sum(head, info, frame_len - info.l4_offset);
  if (!sum) return sum.error();
  store_be16(head, field, *sum);
  return {};
}

Result<VirtioNetHdr> prepare_guest_tx(const GuestTxOffload& offload, std::span<std::byte> head,
                                      std::size_t frame_len) {
  auto mapped = map_guest_tx(offload, head, frame_len);
  if (!mapped) return mapped.error();
  if (mapped->needs_partial_fixup) {
    if (auto ec = write_partial_checksum(head, *mapped->headers, frame_len)) return ec;
  }
  return mapped->hdr;
}

Result<GuestRxOffload> map_tap_rx(const VirtioNetHdr& hdr, const FrontendOffloads& fe,
                                  std::span<const std::byte> head, std::size_t frame_len) {
  GuestRxOffload out;
  const std::uint8_t gso_kind = hdr.hdr.gso_type & static_cast<std::uint8_t>(~kGsoEcnBit);
  const bool needs_csum = (hdr.hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) != 0;

  std::optional<std::uint16_t> l3_proto;
  if (gso_kind != VIRTIO_NET_HDR_GSO_NONE || needs_csum) {
    if (head.size() > frame_len) head = head.first(frame_len);
    auto proto = outer_l3_proto(head);
    if (!proto) return proto.error();
    l3_proto = *proto;
  }

  if (gso_kind != VIRTIO_NET_HDR_GSO_NONE) {
    GsoInfo gso;
    if (gso_kind == VIRTIO_NET_HDR_GSO_TCPV4) {
      gso.type = wire::GsoType::tcpv4;
    } else if (gso_kind == VIRTIO_NET_HDR_GSO_TCPV6) {
      gso.type = wire::GsoType::tcpv6;
    } else if (gso_kind == VIRTIO_NET_HDR_GSO_UDP || gso_kind == kVirtioGsoUdpL4) {
      // netif has only TCPV4/TCPV6 (netif.h XEN_NETIF_GSO_TYPE_*): nothing to tell the guest.
      return make_error_code(NetError::unsupported_gso_type);
    } else {
      return make_error_code(NetError::bad_gso);
    }
    if (hdr.hdr.gso_size == 0) return make_error_code(NetError::bad_gso);
    gso.size = hdr.hdr.gso_size;
    const bool v4 = gso.type == wire::GsoType::tcpv4;
    if (v4 && *l3_proto != kEtherTypeIpv4) return make_error_code(NetError::gso_type_mismatch);
    if (!v4 && *l3_proto != kEtherTypeIpv6) return make_error_code(NetError::gso_type_mismatch);
    // rx.c emits the GSO extra only for types in the frontend's gso_mask; a super-frame also
    // needs several slots (feature-sg) and a partial checksum the guest accepts.
    const bool negotiated = v4 ? fe.gso_tcpv4 && fe.csum_ipv4 : fe.gso_tcpv6 && fe.csum_ipv6;
    if (!negotiated || !fe.sg) return make_error_code(NetError::gso_not_negotiated);
    out.gso = gso;
  }

  if (needs_csum) {
    const std::size_t start = hdr.hdr.csum_start;
    const std::size_t field = start + hdr.hdr.csum_offset;
    if (field + 2 > frame_len) return make_error_code(NetError::bad_checksum_offsets);
    bool frontend_takes_partial = false;
    if (*l3_proto == kEtherTypeIpv4) frontend_takes_partial = fe.csum_ipv4;
    if (*l3_proto == kEtherTypeIpv6) frontend_takes_partial = fe.csum_ipv6;
    if (frontend_takes_partial) {
      out.flags = wire::RxFlag::csum_blank | wire::RxFlag::data_validated;
    } else {
      // Linux would have run skb_checksum_help before netback saw the packet; we do the same
      // here. The checksum is then correct by construction, so the guest need not verify it.
      out.complete_checksum = true;
      out.csum_start = hdr.hdr.csum_start;
      out.csum_offset = hdr.hdr.csum_offset;
      out.flags = wire::RxFlag::data_validated;
    }
  } else if ((hdr.hdr.flags & VIRTIO_NET_HDR_F_DATA_VALID) != 0) {
    out.flags = wire::RxFlag::data_validated;
  }
  return out;
}

std::error_code complete_checksum(std::span<const std::span<std::byte>> frame,
                                  std::size_t csum_start, std::size_t csum_offset) {
  std::size_t total = 0;
  for (const auto& frag : frame) total += frag.size();
  const std::size_t field = csum_start + csum_offset;
  if (csum_start > total || field < csum_start || field + 2 > total) {
    return NetError::bad_checksum_offsets;
  }
  ChecksumAccumulator acc;
  std::size_t pos = 0;  // frame offset of the current fragment
  for (const auto& frag : frame) {
    const std::size_t end = pos + frag.size();
    if (end > csum_start) {
      const std::size_t from = csum_start > pos ? csum_start - pos : 0;
      acc.add(std::span<const std::byte>(frag).subspan(from));
    }
    pos = end;
  }
  std::uint16_t value = acc.checksum();
  if (value == 0) value = 0xFFFF;  // RFC 768: a computed 0 is sent as all ones
  std::array<std::byte, 2> bytes{};
  store_be16(bytes, 0, value);
  // The field may straddle two fragments: write it byte by byte.
  pos = 0;
  for (const auto& frag : frame) {
    for (std::size_t i = 0; i < 2; ++i) {
      const std::size_t at = field + i;
      if (at >= pos && at < pos + frag.size()) frag[at - pos] = bytes[i];
    }
    pos += frag.size();
  }
  return {};
}

std::optional<VirtioNetHdr> load_vnet_hdr(std::span<const std::byte> buf) {
  if (buf.size() < kVnetHdrLen) return std::nullopt;
  VirtioNetHdr h{};
  std::memcpy(&h, buf.data(), kVnetHdrLen);
  return h;
}

}  // namespace unetback::net
