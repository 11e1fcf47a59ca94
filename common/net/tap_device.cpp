#include "common/net/tap_device.hpp"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

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
Result<UniqueFd> control_socket() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
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
  static const TapCategory kCategory;
  return kCategory;
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
                     TapOffloads offloads, bool multi_queue, bool non_blocking)
    : fd_(std::move(fd)),
      name_(std::move(name)),
      ifindex_(ifindex),
      vnet_hdr_len_(vnet_hdr_len),
      offloads_(offloads),
      multi_queue_(multi_queue),
      non_blocking_(non_blocking) {}

Result<UniqueFd> TapDevice::attach_queue() const {
  if (!multi_queue_) return make_error_code(TapError::invalid_config);
  int open_flags = O_RDWR | O_CLOEXEC;
  if (non_blocking_) open_flags |= O_NONBLOCK;
  UniqueFd fd(::open("/dev/net/tun", open_flags));
  if (!fd) return last_errno();
  ifreq ifr = make_ifreq(name_);
  // The same flags as the first queue (the kernel refuses a mismatch), without
  // IFF_TUN_EXCL: this attaches to our own device.
  int tun_flags = IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE;
  if (vnet_hdr_len_ != 0) tun_flags |= IFF_VNET_HDR;
  ifr.ifr_flags = static_cast<short>(tun_flags);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) < 0) return last_errno();
  return fd;
}

Result<TapDevice> TapDevice::create(const TapConfig& config) {
  if (!valid_ifname(config.name)) return make_error_code(TapError::invalid_name);
  if (!offloads_valid(config.offloads, config.vnet_hdr)) {
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

  TapDevice tap(std::move(fd), config.name, idx.ifr_ifindex, hdr_len, config.offloads,
                config.multi_queue, config.non_blocking);
  if (config.mac) {
    if (auto ec = tap.set_mac(*config.mac)) return ec;
  }
  if (config.mtu) {
    if (auto ec = tap.set_mtu(*config.mtu)) return ec;
  }
  return tap;
}

std::error_code TapDevice::set_up(bool up) {
  ifreq ifr = make_ifreq(name_);
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
  ifreq ifr = make_ifreq(name_);
  ifr.ifr_mtu = static_cast<int>(mtu);
  return ifreq_ioctl(SIOCSIFMTU, ifr);
}

std::error_code TapDevice::set_mac(const MacAddress& mac) {
  ifreq ifr = make_ifreq(name_);
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
