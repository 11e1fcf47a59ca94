// The xensim broker protocol: fixed-layout messages on DIR/hv.sock (a Unix SOCK_SEQPACKET
// socket, one request -> one reply, file descriptors passed with SCM_RIGHTS). Shared by the
// xensim daemon (tools/xensim/) and its client library (common/hv/sim/).
//
// The connection is the caller's identity, as a domain's hypercall page is on Xen: the first
// request registers it as dom0 (REGISTER_DOM0), as a fresh domU (REGISTER_DOMAIN) or as a domU
// the toolstack created earlier (CLAIM_DOMAIN). When a domU's connection closes the domain is
// dead: its ports close and xenstored fires @releaseDomain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace unetback::hv::sim {

inline constexpr std::uint32_t kBrokerMagic = 0x42534d58;  // "XMSB"
/// Bumped on any change of a message layout or meaning; the broker rejects other versions
/// with EPROTO so a stale client fails loudly instead of misreading fields.
inline constexpr std::uint16_t kBrokerVersion = 3;
inline constexpr std::string_view kBrokerSocketName = "hv.sock";
inline constexpr std::size_t kMaxDomainNameLen = 63;  // plus the terminating NUL
inline constexpr std::size_t kMaxFdsPerMessage = 4;

enum class BrokerOp : std::uint16_t {
  /// The caller is a dom0 process. Reply fds: [dom0 control page].
  register_dom0 = 1,
  /// dom0 (toolstack): create domain `name` with `arg0` frames (0: the daemon's default),
  /// introduce it to xenstored; nobody runs it yet. `arg1` & kCreateDriverDomain: a driver
  /// domain (libxl's driver_domain=1), which backend processes may join. Reply: domid.
  create_domain = 2,
  /// A new domU process: as create_domain, run by the caller. Reply: domid, sizes,
  /// fds [memory, grant table, control page].
  register_domain = 3,
  /// A domU process takes over `domid` made by create_domain. Reply as register_domain.
  /// With `arg0` == kClaimAsBackend the caller joins driver domain `domid` as one of its
  /// backend processes instead (EPERM if it is none): it does not run the domain (any number
  /// may join, the domain outlives them), and it may GET_DOMAIN_MEMORY as dom0's backend
  /// does. Reply: domid, fds [its control page].
  claim_domain = 4,
  /// dom0: SIGKILL the process running `domid` and release the domain.
  destroy_domain = 5,
  /// dom0: the memory of `domid`. Reply: sizes, fds [memory, grant table, control page, pin
  /// table]. The pin table (GrantPins per grant entry, zeroed, this caller's alone) is where
  /// the caller counts the grants it holds (GTF_reading/GTF_writing set); when the caller's
  /// connection closes (the process died) the broker clears the bits it still held, as
  /// gntdev unmaps a dead process's grants on Xen.
  get_domain_memory = 6,
  /// A new local port that `domid` may bind (EVTCHNOP_alloc_unbound). Reply: port, fds
  /// [eventfd of the port].
  evtchn_alloc_unbound = 7,
  /// A new local port bound to `port` of `domid` (EVTCHNOP_bind_interdomain). Reply: port,
  /// fds [eventfd].
  evtchn_bind_interdomain = 8,
  /// Closes local `port` (EVTCHNOP_close); its peer becomes unbound.
  evtchn_unbind = 9,
  /// Where notifications on local `port` go. Reply: bind_gen; and when bound: the peer's
  /// domid and port, fds [peer eventfd, peer domain's control page]. Unbound: no fds.
  evtchn_peer = 10,
  /// Whether `domid` exists and is not dying. Reply: arg (1 or 0).
  domain_exists = 11,
  /// dom0, fault injection: clear grant `arg0` of `domid` from outside (GTF_permit_access
  /// off, as a hostile guest revoking under the backend's feet).
  fault_revoke_grant = 12,
  /// dom0, fault injection: rewrite grant `arg0` of `domid` to name domain `domid2` and
  /// frame `arg1` (flags kept).
  fault_corrupt_grant = 13,
  /// dom0, fault injection: the next `arg0` notifications to `port` of `domid` are lost.
  fault_drop_events = 14,
  /// dom0, fault injection: `arg0` != 0 stalls `domid` (notifications to it are held),
  /// 0 releases it (held notifications are delivered, one per port).
  fault_stall_domain = 15,
  /// This connection serves domain `domid` alone from now on, for good: its event channels
  /// bind only to `domid` (as IOCTL_EVTCHN_RESTRICT_DOMID: ALLOC_UNBOUND and a bind to another
  /// domain fail with EACCES, EVTCHN_PEER and EVTCHN_UNBIND take only the ports this
  /// connection bound, else ENOTCONN), and the toolstack's operations (CREATE/DESTROY_DOMAIN,
  /// DOMAIN_EXISTS, FAULT_*) fail with EPERM, as after IOCTL_PRIVCMD_RESTRICT. GET_DOMAIN_MEMORY
  /// stays: gntdev has no per-domain restriction either. EINVAL for domid 0 or a reserved one
  /// (>= 0x7FF0), EACCES when the connection is already restricted.
  restrict_client = 16,
};

inline constexpr std::uint32_t kCreateDriverDomain = 1;  // create_domain's arg1
inline constexpr std::uint32_t kClaimAsBackend = 1;      // claim_domain's arg0

[[nodiscard]] std::string_view broker_op_name(BrokerOp op);

/// One grant entry's holds by one mapping process: copies in flight plus mappings (reading),
/// and the writable ones among them.
struct GrantPins {
  std::uint32_t users;
  std::uint32_t writers;
};

struct BrokerRequest {
  std::uint32_t magic = kBrokerMagic;
  std::uint16_t version = kBrokerVersion;
  BrokerOp op{};
  std::uint32_t seq = 0;
  std::uint16_t domid = 0;   // target or remote domain
  std::uint16_t domid2 = 0;  // fault_corrupt_grant: the domid to write
  std::uint32_t port = 0;    // local or remote port
  std::uint32_t arg0 = 0;    // gref, count, frames, flag (per op)
  std::uint32_t arg1 = 0;    // fault_corrupt_grant: the frame to write
  char name[kMaxDomainNameLen + 1] = {};
};

struct BrokerReply {
  std::uint32_t magic = kBrokerMagic;
  std::uint16_t version = kBrokerVersion;
  BrokerOp op{};
  std::uint32_t seq = 0;
  std::int32_t error = 0;  // 0 or an errno value
  std::uint16_t domid = 0;
  std::uint16_t reserved = 0;
  std::uint32_t port = 0;
  std::uint32_t nr_frames = 0;
  std::uint32_t nr_grant_entries = 0;
  std::uint32_t bind_gen = 0;
  std::uint32_t arg = 0;
  std::uint32_t nr_fds = 0;
};

static_assert(std::is_trivially_copyable_v<BrokerRequest>);
static_assert(std::is_trivially_copyable_v<BrokerReply>);
static_assert(sizeof(BrokerRequest) == 92);
static_assert(sizeof(BrokerReply) == 44);

}  // namespace unetback::hv::sim
