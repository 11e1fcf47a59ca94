#include "common/net/tap_device.hpp"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include "common/net/vnet_hdr.hpp"

namespace unetback::net {
namespace {

class TapCategory final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "unetback.tap"; }

  [[nodiscard]] std::string message(int ev) const override {
    switch (static_cast<TapError>(ev)) {
      case TapError::tun_missing:
        return "/dev/net/tun is missing (no TUN/TAP support in this kernel or container)";
      case TapError::permission_denied:
        return "creating a TAP needs CAP_NET_ADMIN in the network namespace's user namespace";
      case TapError::name_in_use: return "an interface with this name already exists (EBUSY)";
      case TapError::invalid_name:
        return "invalid interface name (1-15 bytes, no '/', ':', '%' or whitespace)";
      case TapError::invalid_config:
        return "invalid TAP configuration (offloads need vnet_hdr; TSO needs checksum offload)";
    }
    return "unknown unetback.tap error " + std::to_string(ev);
  }

  [[nodiscard]] std::error_condition default_error_condition(int ev) const noexcept override {
    switch (static_cast<TapError>(ev)) {
      case TapError::tun_missing: return std::errc::no_such_file_or_directory;
      case TapError::permission_denied: return std::errc::operation_not_permitted;
      case TapError::name_in_use: return std::errc::device_or_resource_busy;
      case TapError::invalid_name:
      case TapError::invalid_config: return std::errc::invalid_argument;
    }
    return {ev, *this};
  }
};

// A socket to carry interface ioctls (SIOCSIFFLAGS & co.) in the calling thread's namespace.
// AF_UNIX: the kernel hands an interface ioctl a family does not know to the device layer
// whatever the family, and a process confined to AF_UNIX and AF_NETLINK sockets (systemd's
// RestrictAddressFamilies=) can still open this one.
Result<UniqueFd> control_socket() {
  UniqueFd s(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return last_errno();
  return s;
}

ifreq make_ifreq(const std::string& name) {
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.data(), name.size());  // valid_ifname: size < IFNAMSIZ
  return ifr;
}

std::error_code ifreq_ioctl(unsigned long request, ifreq& ifr) {
  auto sock = control_socket();
  if (!sock) return sock.error();
  if (::ioctl(sock->get(), request, &ifr) < 0) return last_errno();
  return {};
}

/// One rtnetlink request to the kernel and its answer, read into `buf` (nlmsghdr-aligned):
/// the first reply of type `answer`, or with `answer` NLMSG_ERROR the acknowledgement (error
/// 0). An NLMSG_ERROR reply with an error is that errno; one with 0 where `answer` was asked
/// for is EPROTO.
Result<const nlmsghdr*> rtnl_request(const nlmsghdr& req, std::uint16_t answer,
                                     std::span<char> buf) {
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!nl) return last_errno();
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &req, req.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) < 0)
    return last_errno();
  for (;;) {
    const ssize_t n = ::recv(nl.get(), buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return last_errno();
    }
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf.data());
    if (!NLMSG_OK(h, static_cast<unsigned>(n))) return errno_code(EPROTO);
    if (h->nlmsg_type == answer && answer != NLMSG_ERROR) return h;
    if (h->nlmsg_type != NLMSG_ERROR) continue;
    nlmsgerr e{};  // NLMSG_DATA(h), copied out (the buffer is only nlmsghdr-aligned)
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof e)) return errno_code(EPROTO);
    std::memcpy(&e, buf.data() + NLMSG_LENGTH(0), sizeof e);
    if (e.error != 0) return errno_code(-e.error);
    if (answer != NLMSG_ERROR) return errno_code(EPROTO);
    return h;
  }
}

unsigned tun_offload_bits(const TapOffloads& o) {
  unsigned bits = 0;
  if (o.csum) bits |= TUN_F_CSUM;
  if (o.tso4) bits |= TUN_F_TSO4;
  if (o.tso6) bits |= TUN_F_TSO6;
  return bits;
}

bool offloads_valid(const TapOffloads& o, bool vnet_hdr) {
  const bool any = o.csum || o.tso4 || o.tso6;
  // Without a vnet header the kernel has no way to tell us a frame is a GSO super-frame or
  // carries a partial checksum, and the TAP only honours TSO on top of checksum offload.
  if (any && !vnet_hdr) return false;
  if ((o.tso4 || o.tso6) && !o.csum) return false;
  return true;
}

}  // namespace

const std::error_category& tap_category() noexcept {
  static const TapCategory category;
  return category;
}

std::error_code make_error_code(TapError e) noexcept {
  return {static_cast<int>(e), tap_category()};
}

bool valid_ifname(std::string_view name) {
  if (name.empty() || name.size() >= IFNAMSIZ) return false;
  if (name == "." || name == "..") return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == ':' || c == '%' || std::isspace(u) != 0 || u < 0x20 || u == 0x7F) {
      return false;
    }
  }
  return true;
}

TapDevice::TapDevice(UniqueFd fd, std::string name, int ifindex, std::size_t vnet_hdr_len,
                     TapOffloads offloads)
    : fd_(std::move(fd)),
      created_name_(std::move(name)),
      ifindex_(ifindex),
      vnet_hdr_len_(vnet_hdr_len),
      offloads_(offloads) {}

TapDevice& TapDevice::operator=(TapDevice&& o) noexcept {
  if (this == &o) return *this;
  if (fd_ && persistent_ && !keep_) (void)set_persistent(false);
  fd_ = std::move(o.fd_);
  extra_queues_ = std::move(o.extra_queues_);
  created_name_ = std::move(o.created_name_);
  ifindex_ = o.ifindex_;
  vnet_hdr_len_ = o.vnet_hdr_len_;
  offloads_ = o.offloads_;
  persistent_ = std::exchange(o.persistent_, false);
  keep_ = std::exchange(o.keep_, false);
  from_kept_ = std::exchange(o.from_kept_, false);
  return *this;
}

TapDevice::~TapDevice() {
  // An orderly close leaves nothing behind: the flag goes before the last fd does.
  if (fd_ && persistent_ && !keep_) (void)set_persistent(false);
}

std::error_code TapDevice::set_persistent(bool on) {
  if (::ioctl(fd_.get(), TUNSETPERSIST, on ? 1UL : 0UL) < 0) return last_errno();
  persistent_ = on;
  return {};
}

namespace {

/// Whether `fd` is a queue of the TAP `name` (the name its ifindex has now) with the flags
/// `tun_flags` asks for, and persistent; `attached` says whether the queue is attached
/// (TUNGETIFF reports a detached one with IFF_DETACH_QUEUE).
bool kept_queue_valid(int fd, const std::string& name, int tun_flags, bool& attached) {
  ifreq got{};
  if (fd < 0 || ::ioctl(fd, TUNGETIFF, &got) < 0) return false;
  const std::string got_name(got.ifr_name, ::strnlen(got.ifr_name, IFNAMSIZ));
  const int kind = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
  attached = (got.ifr_flags & IFF_DETACH_QUEUE) == 0;
  return got_name == name && (got.ifr_flags & kind) == tun_flags &&
         (got.ifr_flags & IFF_PERSIST) != 0;
}

/// Makes the TAP behind `fd` (an attached queue) this process's: TUNSETOWNER and TUNSETGROUP
/// to its effective user and group. A TAP with neither lets any local user attach a queue by
/// its name (TUNSETIFF) and read and write the guest's frames; with both, only a process of
/// that user and group, or one with CAP_NET_ADMIN, may (tun_not_capable in the kernel's
/// tun.c). The owner stays with the device across a rename and while it is persistent.
std::error_code claim_tap(int fd) {
  if (::ioctl(fd, TUNSETOWNER, static_cast<unsigned long>(::geteuid())) < 0) return last_errno();
  if (::ioctl(fd, TUNSETGROUP, static_cast<unsigned long>(::getegid())) < 0) return last_errno();
  return {};
}

}  // namespace

Result<TapDevice> TapDevice::attach(int ifindex, const TapConfig& config,
                                    std::vector<UniqueFd> kept) {
  // By ifindex, not by name: a hotplug script may have renamed it.
  ifreq byidx{};
  byidx.ifr_ifindex = ifindex;
  if (ifindex <= 0 || ifreq_ioctl(SIOCGIFNAME, byidx)) return errno_code(ENODEV);
  const std::string name(byidx.ifr_name, ::strnlen(byidx.ifr_name, IFNAMSIZ));
  const std::uint32_t queues = std::max<std::uint32_t>(1, config.queues);
  int tun_flags = IFF_TAP | IFF_NO_PI;
  if (config.vnet_hdr) tun_flags |= IFF_VNET_HDR;
  if (config.multi_queue) tun_flags |= IFF_MULTI_QUEUE;
  // The queue fds that stayed open while no daemon ran (systemd's fd store): the same queues
  // again, with whatever the host sent meanwhile still in them. Only all of them, each of this
  // TAP; otherwise new ones below (these close when we return).
  std::vector<bool> attached(kept.size());
  bool from_kept = kept.size() == queues;
  for (std::size_t i = 0; from_kept && i < kept.size(); ++i) {
    bool a = false;
    from_kept = kept_queue_valid(kept[i].get(), name, tun_flags, a);
    attached[i] = a;
  }
  for (std::size_t i = 0; from_kept && i < kept.size(); ++i) {
    const int fd = kept[i].get();
    const int fl = ::fcntl(fd, F_GETFL);
    const int want = config.non_blocking ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    from_kept = fl >= 0 && (want == fl || ::fcntl(fd, F_SETFL, want) == 0) &&
                ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
  }
  std::vector<UniqueFd> fds;
  if (from_kept) {
    fds = std::move(kept);
  } else {
    attached.assign(queues, true);
    // Only a persistent TAP may be taken: had it gone meanwhile, TUNSETIFF would make a new
    // one under that name, which the check below refuses (closing the fd then removes it).
    int open_flags = O_RDWR | O_CLOEXEC;
    if (config.non_blocking) open_flags |= O_NONBLOCK;
    for (std::uint32_t i = 0; i < queues; ++i) {
      UniqueFd fd(::open("/dev/net/tun", open_flags));
      if (!fd) return last_errno();
      ifreq ifr = make_ifreq(name);
      ifr.ifr_flags = static_cast<short>(tun_flags);
      if (::ioctl(fd.get(), TUNSETIFF, &ifr) < 0) return last_errno();
      if (i == 0) {
        ifreq got{};
        if (::ioctl(fd.get(), TUNGETIFF, &got) < 0) return last_errno();
        ifreq idx = make_ifreq(name);
        const bool same =
            ifreq_ioctl(SIOCGIFINDEX, idx) == std::error_code{} && idx.ifr_ifindex == ifindex;
        // Not persistent: TUNSETIFF just made a new TAP of that name (the old one is gone),
        // which closing `fd` removes again.
        if ((got.ifr_flags & IFF_PERSIST) == 0 || !same) return errno_code(ENODEV);
      }
      fds.push_back(std::move(fd));
    }
  }
  std::size_t hdr_len = 0;
  if (config.vnet_hdr) {
    int size = static_cast<int>(kVnetHdrLen);
    if (::ioctl(fds[0].get(), TUNSETVNETHDRSZ, &size) < 0) return last_errno();
    hdr_len = kVnetHdrLen;
  }
  TapDevice tap(std::move(fds[0]), name, ifindex, hdr_len, config.offloads);
  tap.persistent_ = true;
  tap.from_kept_ = from_kept;
  // Attached again, the TAP is ours to keep or to close: the caller says which.
  tap.keep_ = true;
  for (std::size_t i = 1; i < fds.size(); ++i)
    tap.extra_queues_.push_back(ExtraQueue{std::move(fds[i]), attached[i]});
  // Queue 0 is always attached.
  if (!attached[0]) {
    ifreq ifr{};
    ifr.ifr_flags = IFF_ATTACH_QUEUE;
    if (::ioctl(tap.fd(), TUNSETQUEUE, &ifr) < 0) return last_errno();
  }
  // A TAP an older daemon made has no owner: it gets one now (TUNSETOWNER needs an attached
  // queue's fd).
  if (auto ec = claim_tap(tap.fd())) return ec;
  if (config.vnet_hdr) {
    if (::ioctl(tap.fd(), TUNSETOFFLOAD, tun_offload_bits(config.offloads)) < 0)
      return last_errno();
  }
  tap.keep_ = false;
  return tap;
}

std::string TapDevice::name() const {
  ifreq ifr{};
  if (::ioctl(fd_.get(), TUNGETIFF, &ifr) < 0) return created_name_;
  return std::string(ifr.ifr_name, ::strnlen(ifr.ifr_name, IFNAMSIZ));
}

std::error_code TapDevice::set_queue_attached(std::uint32_t index, bool attached) {
  ExtraQueue& q = extra_queues_[index - 1];
  if (q.attached == attached) return {};
  ifreq ifr{};
  ifr.ifr_flags = static_cast<short>(attached ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE);
  if (::ioctl(q.fd.get(), TUNSETQUEUE, &ifr) < 0) return last_errno();
  q.attached = attached;
  return {};
}

std::vector<int> TapDevice::queue_fds() const {
  std::vector<int> fds{fd_.get()};
  for (const auto& q : extra_queues_) fds.push_back(q.fd.get());
  return fds;
}

Result<UniqueFd> TapDevice::queue_fd(std::uint32_t index) {
  if (index >= queue_count()) return errno_code(EINVAL);
  if (index > 0) {
    if (auto ec = set_queue_attached(index, true)) return ec;
  }
  const int src = index == 0 ? fd_.get() : extra_queues_[index - 1].fd.get();
  UniqueFd fd(::fcntl(src, F_DUPFD_CLOEXEC, 0));
  if (!fd) return last_errno();
  return fd;
}

std::error_code TapDevice::set_active_queues(std::uint32_t n) {
  if (n == 0 || n > queue_count()) return errno_code(EINVAL);
  for (std::uint32_t i = 1; i < queue_count(); ++i)
    if (auto ec = set_queue_attached(i, i < n)) return ec;
  return {};
}

Result<TapDevice> TapDevice::create(const TapConfig& config) {
  if (!valid_ifname(config.name)) return make_error_code(TapError::invalid_name);
  if (!offloads_valid(config.offloads, config.vnet_hdr)) {
    return make_error_code(TapError::invalid_config);
  }
  // MAX_TAP_QUEUES in the kernel's tun.c.
  constexpr std::uint32_t kMaxQueues = 256;
  if (config.queues == 0 || config.queues > kMaxQueues ||
      (!config.multi_queue && config.queues != 1)) {
    return make_error_code(TapError::invalid_config);
  }

  int open_flags = O_RDWR | O_CLOEXEC;
  if (config.non_blocking) open_flags |= O_NONBLOCK;
  UniqueFd fd(::open("/dev/net/tun", open_flags));
  if (!fd) {
    const int e = errno;
    if (e == ENOENT || e == ENODEV || e == ENXIO) return make_error_code(TapError::tun_missing);
    if (e == EPERM || e == EACCES) return make_error_code(TapError::permission_denied);
    return errno_code(e);
  }

  ifreq ifr = make_ifreq(config.name);
  // IFF_TUN_EXCL: refuse (EBUSY) any existing interface of that name, so a stale persistent
  // TAP or someone else's device is never adopted by a new vif.
  int tun_flags = IFF_TAP | IFF_NO_PI | IFF_TUN_EXCL;
  if (config.vnet_hdr) tun_flags |= IFF_VNET_HDR;
  if (config.multi_queue) tun_flags |= IFF_MULTI_QUEUE;
  ifr.ifr_flags = static_cast<short>(tun_flags);  // IFF_TUN_EXCL is bit 15 of a short
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) < 0) {
    const int e = errno;
    if (e == EBUSY || e == EEXIST) return make_error_code(TapError::name_in_use);
    if (e == EPERM || e == EACCES) return make_error_code(TapError::permission_denied);
    if (e == EINVAL) return make_error_code(TapError::invalid_name);
    return errno_code(e);
  }
  // From here on closing `fd` (any early return) deletes the TAP again.
  // Ours before anything else happens to it: no other queue is attached yet, no hotplug
  // script has seen it (a local user could attach to an ownerless TAP by name).
  if (auto ec = claim_tap(fd.get())) return ec;

  std::size_t hdr_len = 0;
  if (config.vnet_hdr) {
    // 12 bytes, the virtio_net_hdr_mrg_rxbuf layout, rather than the 10-byte default:
    //  * it is the header every VIRTIO 1.x device uses (num_buffers always present), the
    //    layout vhost-net and QEMU use, so buffers stay compatible with a later vhost path;
    //  * it is the configuration measured in this environment (environment.md §4);
    //  * the kernel only reads/writes the first 10 bytes and skips num_buffers, so the cost
    //    is two bytes per frame. Callers wanting an aligned IP header can place the header
    //    at buffer offset 2 (2 + 12 + 14 = 28).
    int size = static_cast<int>(kVnetHdrLen);
    if (::ioctl(fd.get(), TUNSETVNETHDRSZ, &size) < 0) return last_errno();
    hdr_len = kVnetHdrLen;
  }
  // Always set the offloads explicitly (0 included) so the TAP's state is ours, not a default.
  if (config.vnet_hdr) {
    if (::ioctl(fd.get(), TUNSETOFFLOAD, tun_offload_bits(config.offloads)) < 0) {
      return last_errno();
    }
  }

  ifreq idx = make_ifreq(config.name);
  if (auto ec = ifreq_ioctl(SIOCGIFINDEX, idx)) return ec;

  TapDevice tap(std::move(fd), config.name, idx.ifr_ifindex, hdr_len, config.offloads);
  // Every queue now, while the name is the one we just made (nobody has seen it yet): a queue
  // attached by name after a rename would make a new TAP under the old name instead.
  for (std::uint32_t i = 1; i < config.queues; ++i) {
    UniqueFd q(::open("/dev/net/tun", open_flags));
    if (!q) return last_errno();
    ifreq qr = make_ifreq(config.name);
    // The first queue's flags (the kernel refuses a mismatch), without IFF_TUN_EXCL: this
    // attaches to our own device.
    int qflags = IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE;
    if (config.vnet_hdr) qflags |= IFF_VNET_HDR;
    qr.ifr_flags = static_cast<short>(qflags);
    if (::ioctl(q.get(), TUNSETIFF, &qr) < 0) return last_errno();
    tap.extra_queues_.push_back(ExtraQueue{std::move(q), true});
  }
  if (config.mac) {
    if (auto ec = tap.set_mac(*config.mac)) return ec;
  }
  if (config.mtu) {
    if (auto ec = tap.set_mtu(*config.mtu)) return ec;
  }
  return tap;
}

std::error_code TapDevice::set_up(bool up) {
  ifreq ifr = make_ifreq(name());
  if (auto ec = ifreq_ioctl(SIOCGIFFLAGS, ifr)) return ec;
  if (up) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags & ~IFF_UP);
  }
  return ifreq_ioctl(SIOCSIFFLAGS, ifr);
}

std::error_code TapDevice::set_mtu(std::uint32_t mtu) {
  if (mtu > 0x7FFFFFFF) return errno_code(EINVAL);
  ifreq ifr = make_ifreq(name());
  ifr.ifr_mtu = static_cast<int>(mtu);
  return ifreq_ioctl(SIOCSIFMTU, ifr);
}

std::error_code TapDevice::set_tx_queue_len(std::uint32_t packets) {
  if (packets == 0 || packets > 0x7FFFFFFF) return errno_code(EINVAL);
  ifreq ifr = make_ifreq(name());
  ifr.ifr_qlen = static_cast<int>(packets);
  return ifreq_ioctl(SIOCSIFTXQLEN, ifr);
}

std::error_code TapDevice::set_mac(const MacAddress& mac) {
  ifreq ifr = make_ifreq(name());
  ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  std::memcpy(ifr.ifr_hwaddr.sa_data, mac.octets.data(), mac.octets.size());
  return ifreq_ioctl(SIOCSIFHWADDR, ifr);
}

std::error_code TapDevice::set_offloads(const TapOffloads& offloads) {
  if (!offloads_valid(offloads, vnet_hdr())) return make_error_code(TapError::invalid_config);
  if (!vnet_hdr()) return {};  // validated above: nothing to turn on
  if (::ioctl(fd_.get(), TUNSETOFFLOAD, tun_offload_bits(offloads)) < 0) return last_errno();
  offloads_ = offloads;
  return {};
}

std::error_code TapDevice::set_carrier(bool on) {
  int value = on ? 1 : 0;
  if (::ioctl(fd_.get(), TUNSETCARRIER, &value) < 0) return last_errno();
  return {};
}

std::error_code TapDevice::set_alias(std::string_view alias) {
  if (alias.size() >= IFALIASZ) return errno_code(EINVAL);
  // RTM_SETLINK by ifindex, so the alias lands on this TAP whatever its name is now.
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
    char attrs[RTA_SPACE(IFALIASZ)];
  } req{};
  req.nh.nlmsg_type = RTM_SETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.nh.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex_;
  auto* rta = reinterpret_cast<rtattr*>(req.attrs);
  rta->rta_type = IFLA_IFALIAS;
  rta->rta_len = static_cast<unsigned short>(RTA_LENGTH(alias.size()));
  std::memcpy(req.attrs + RTA_LENGTH(0), alias.data(), alias.size());  // RTA_DATA(rta)
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg)) + RTA_ALIGN(rta->rta_len);
  alignas(nlmsghdr) char buf[1024];
  const auto ack = rtnl_request(req.nh, NLMSG_ERROR, buf);
  return ack ? std::error_code{} : ack.error();
}

Result<std::string> interface_alias(int ifindex) {
  if (ifindex <= 0) return errno_code(ENODEV);
  // RTM_GETLINK by ifindex, answered from this network namespace (sysfs may be another's).
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
  } req{};
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex;
  alignas(nlmsghdr) char buf[16384];
  const auto reply = rtnl_request(req.nh, RTM_NEWLINK, buf);
  if (!reply) return reply.error();
  const nlmsghdr* h = *reply;
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return errno_code(EPROTO);
  // The attributes after the ifinfomsg; no IFLA_IFALIAS: the interface has no alias. Each is
  // copied out of the byte buffer (RTA_NEXT's casts assume an alignment char* lacks).
  const char* base = reinterpret_cast<const char*>(h);
  for (std::size_t off = NLMSG_LENGTH(sizeof(ifinfomsg)); off + sizeof(rtattr) <= h->nlmsg_len;) {
    rtattr a{};
    std::memcpy(&a, base + off, sizeof a);
    if (a.rta_len < sizeof(rtattr) || off + a.rta_len > h->nlmsg_len) break;
    if (a.rta_type == IFLA_IFALIAS) {
      std::string alias(base + off + RTA_LENGTH(0), a.rta_len - RTA_LENGTH(0));
      while (!alias.empty() && alias.back() == '\0') alias.pop_back();
      return alias;
    }
    off += RTA_ALIGN(a.rta_len);
  }
  return std::string();
}

Result<std::size_t> TapDevice::read(std::span<std::byte> buf) {
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    return last_errno();  // EAGAIN == std::errc::resource_unavailable_try_again
  }
}

Result<std::size_t> TapDevice::write(std::span<const iovec> iov) {
  if (iov.size() > IOV_MAX) return errno_code(EINVAL);
  for (;;) {
    const ssize_t n = ::writev(fd_.get(), iov.data(), static_cast<int>(iov.size()));
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    return last_errno();
  }
}

}  // namespace unetback::net
