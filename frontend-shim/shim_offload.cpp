#include "frontend-shim/shim_offload.hpp"

namespace unetback::shim {

NegotiatedTx negotiate_tx(const netfront::NetfrontOptions& opts,
                          const netfront::BackendFeatures& backend) {
  // The same rules Netfront::connect applies to its queues (Linux turns TSO off without SG).
  NegotiatedTx n;
  n.sg = opts.sg && backend.sg;
  n.gso_tcpv4 = n.sg && opts.gso_tcpv4 && backend.gso_tcpv4;
  n.gso_tcpv6 = n.sg && opts.gso_tcpv6 && backend.gso_tcpv6;
  n.csum_ipv6 = opts.csum_ipv6 && backend.ipv6_csum;
  return n;
}

net::TapOffloads tap_offloads(const NegotiatedTx& n) {
  net::TapOffloads t;
  t.csum = true;
  t.tso4 = n.gso_tcpv4;
  t.tso6 = n.gso_tcpv6 && n.csum_ipv6;
  return t;
}

Result<netfront::TxMeta> tap_frame_to_tx(const net::VirtioNetHdr& hdr, std::span<std::byte> frame,
                                         const NegotiatedTx& n) {
  const std::span<std::byte> pieces[] = {frame};
  return tap_frame_to_tx(hdr, pieces, n);
}

Result<netfront::TxMeta> tap_frame_to_tx(const net::VirtioNetHdr& hdr,
                                         std::span<const std::span<std::byte>> pieces,
                                         const NegotiatedTx& n) {
  // The backend plays the part of map_tap_rx's "frontend": what it accepts from us.
  net::FrontendOffloads accepts;
  accepts.sg = n.sg;
  accepts.gso_tcpv4 = n.gso_tcpv4;
  accepts.gso_tcpv6 = n.gso_tcpv6;
  accepts.csum_ipv4 = true;
  accepts.csum_ipv6 = n.csum_ipv6;
  std::size_t frame_len = 0;
  for (const auto& p : pieces) frame_len += p.size();
  const std::span<const std::byte> head =
      pieces.empty() ? std::span<const std::byte>() : std::span<const std::byte>(pieces[0]);
  auto mapped = net::map_tap_rx(hdr, accepts, head, frame_len);
  if (!mapped) return mapped.error();
  if (mapped->complete_checksum) {
    if (auto ec = net::complete_checksum(pieces, mapped->csum_start, mapped->csum_offset))
      return ec;
  }
  netfront::TxMeta meta;
  // NETRXF_csum_blank/data_validated and NETTXF_csum_blank/data_validated mean the same.
  meta.csum_blank = mapped->flags.has(wire::RxFlag::csum_blank);
  meta.data_validated = mapped->flags.has(wire::RxFlag::data_validated);
  if (mapped->gso) meta.gso = netfront::RxGso{mapped->gso->type, mapped->gso->size};
  return meta;
}

Result<net::VirtioNetHdr> rx_to_tap(wire::RxFlags flags, const std::optional<netfront::RxGso>& gso,
                                    std::span<std::byte> head, std::size_t frame_len) {
  net::GuestTxOffload offload;
  if (flags.has(wire::RxFlag::csum_blank)) offload.flags |= wire::TxFlag::csum_blank;
  if (flags.has(wire::RxFlag::data_validated)) offload.flags |= wire::TxFlag::data_validated;
  if (gso) offload.gso = net::GsoInfo{gso->type, gso->size};
  return net::prepare_guest_tx(offload, head, frame_len);
}

}  // namespace unetback::shim
