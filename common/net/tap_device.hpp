// TapDevice: one TAP interface (IFF_TAP | IFF_NO_PI, optionally IFF_VNET_HDR with checksum and
// TSO offloads), owned through its /dev/net/tun file descriptor.
//
// RAII, move-only. The destructor closes the fd; closing the last fd of a TAP that is not
// persistent removes the interface (and with it any bridge membership). A TAP made persistent
// (set_persistent, TUNSETPERSIST) outlives its fds, so a successor daemon can attach() to it
// again with its ifindex and bridge port; the destructor clears the flag again (nothing is
// left behind) unless keep_for_successor() was called.
//
// The interface lives in the network namespace of the thread that called create(); the
// ioctls set_up/set_mtu/set_mac and set_alias open a socket in the *calling* thread's
// namespace, so call them from the same namespace (the fd itself keeps working after
// `ip link set … netns`).
//
// The TAP is tracked by its file descriptors and ifindex, never by the name it was made with:
// a hotplug script may rename it (vif-common.sh renames vif<domid>.<devid> to B:vifname), and
// every later operation must still reach this TAP and no other. name() asks the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/uio.h>
#include <system_error>
#include <type_traits>
#include <vector>

#include "common/net/frame.hpp"
#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::net {

/// TAP creation failures with a message that says what to do. Each compares equal to the
/// errno it came from (`ec == std::errc::device_or_resource_busy` works).
enum class TapError : int {
  tun_missing = 1,    // ENOENT/ENODEV opening /dev/net/tun
  permission_denied,  // EPERM/EACCES: needs CAP_NET_ADMIN (in the namespace's user ns)
  name_in_use,        // EBUSY: an interface of that name exists
  invalid_name,       // EINVAL: empty, too long, or a character the kernel refuses
  invalid_config,     // EINVAL: offloads without vnet_hdr, TSO without checksum offload…
};
[[nodiscard]] const std::error_category& tap_category() noexcept;
[[nodiscard]] std::error_code make_error_code(TapError e) noexcept;

/// Offloads the TAP accepts from us *and* may hand us (TUNSETOFFLOAD): with them the kernel
/// sends GSO super-frames and partial checksums to our reads, and accepts them on writes.
struct TapOffloads {
  bool csum = false;  // TUN_F_CSUM
  bool tso4 = false;  // TUN_F_TSO4 (requires csum)
  bool tso6 = false;  // TUN_F_TSO6 (requires csum)
  friend constexpr bool operator==(const TapOffloads&, const TapOffloads&) = default;
};

struct TapConfig {
  std::string name;  // e.g. "vif1.0"; 1..15 bytes, no '/', ':', '%', whitespace; not "."/".."
  bool vnet_hdr = true;
  TapOffloads offloads{};
  bool non_blocking = true;
  /// IFF_MULTI_QUEUE: the TAP can have one fd per queue (queue_fd()); the kernel spreads
  /// host->TAP traffic over the attached queues by flow hash.
  bool multi_queue = false;
  /// With multi_queue: how many queue fds create() opens (1..256), all attached. They are
  /// opened at once, by the name the TAP was just made with: attaching a queue by name later,
  /// after a rename, would create a second TAP under the old name instead.
  std::uint32_t queues = 1;
  std::optional<MacAddress> mac;
  std::optional<std::uint32_t> mtu;
};

/// The ifalias of the interface at `ifindex` in the caller's network namespace (rtnetlink, not
/// sysfs, which may show another namespace's devices); "" when it has none. ENODEV: no such
/// interface.
[[nodiscard]] Result<std::string> interface_alias(int ifindex);

/// Validates an interface name the way the kernel's dev_valid_name does, and also refuses
/// '%' (a name template would let the kernel pick a different name than the one we record).
[[nodiscard]] bool valid_ifname(std::string_view name);

class TapDevice {
 public:
  /// Opens /dev/net/tun and creates the TAP (IFF_TUN_EXCL: an existing interface of that
  /// name is name_in_use, never silently re-attached), makes it this process's (TUNSETOWNER,
  /// TUNSETGROUP: no other user can attach a queue to it), sets the vnet header size,
  /// offloads, MAC and MTU. The interface is left down: call set_up(true).
  [[nodiscard]] static Result<TapDevice> create(const TapConfig& config);

  /// Attaches to the persistent TAP that has interface index `ifindex` now (it may have
  /// been renamed), with every queue of `config` (its name is ignored; vnet_hdr, multi_queue,
  /// queues and non_blocking must be those it was made with). ENODEV: no such interface, or
  /// it is not a persistent TAP (nothing is left created then). The attached TAP is persistent():
  /// keep it or not; it is made this process's as create() does (one an older program made
  /// may have no owner).
  /// `kept`: the TAP's queue fds that stayed open while no daemon ran (systemd's fd store kept
  /// them, queue i at index i). When they are exactly config.queues queues of this TAP, they
  /// are the TAP's queues again (from_kept_fds()): the TAP never lost its queues, so neither
  /// its carrier nor what the host queued meanwhile. Otherwise new fds are opened and these
  /// closed after them.
  [[nodiscard]] static Result<TapDevice> attach(int ifindex, const TapConfig& config,
                                                std::vector<UniqueFd> kept = {});

  TapDevice(TapDevice&& o) noexcept { *this = std::move(o); }
  TapDevice& operator=(TapDevice&& o) noexcept;
  TapDevice(const TapDevice&) = delete;
  TapDevice& operator=(const TapDevice&) = delete;
  /// Clears the persistent flag first (unless keep_for_successor()), then closes the fds:
  /// the TAP disappears.
  ~TapDevice();

  /// TUNSETPERSIST: whether the TAP outlives its last fd.
  [[nodiscard]] std::error_code set_persistent(bool on);
  [[nodiscard]] bool persistent() const { return persistent_; }
  /// The destructor leaves a persistent TAP in place (for a successor to attach()).
  void keep_for_successor() { keep_ = true; }
  /// Whether attach() took the kept queue fds it was given.
  [[nodiscard]] bool from_kept_fds() const { return from_kept_; }
  /// The queue fds, queue 0 first (this object keeps owning them): what a keeper of fds
  /// (systemd's fd store) gets copies of.
  [[nodiscard]] std::vector<int> queue_fds() const;

  /// The TAP's current name (TUNGETIFF on our own fd: it follows a rename).
  [[nodiscard]] std::string name() const;
  /// The fd of queue 0 (always attached).
  [[nodiscard]] int fd() const { return fd_.get(); }
  /// The ifindex in the namespace the TAP was created in (a rename keeps it).
  [[nodiscard]] int ifindex() const { return ifindex_; }
  /// Queue fds opened at creation (TapConfig::queues; 1 without multi_queue).
  [[nodiscard]] std::uint32_t queue_count() const {
    return static_cast<std::uint32_t>(1 + extra_queues_.size());
  }
  [[nodiscard]] bool vnet_hdr() const { return vnet_hdr_len_ != 0; }
  /// Bytes of virtio_net_hdr before every frame read or written (0 without vnet_hdr).
  [[nodiscard]] std::size_t vnet_hdr_len() const { return vnet_hdr_len_; }
  [[nodiscard]] const TapOffloads& offloads() const { return offloads_; }

  /// Brings the interface up or down (SIOCSIFFLAGS, IFF_UP).
  [[nodiscard]] std::error_code set_up(bool up);
  [[nodiscard]] std::error_code set_mtu(std::uint32_t mtu);
  [[nodiscard]] std::error_code set_mac(const MacAddress& mac);
  /// The packets each queue holds for the reader (SIOCSIFTXQLEN; tun sizes every queue's ring
  /// to it). While nobody reads, that is what the host side may pile up: with GSO up to 64 KiB
  /// each, in dom0 kernel memory no cap of the reader's accounts for.
  [[nodiscard]] std::error_code set_tx_queue_len(std::uint32_t packets);
  /// Changes the offloads (e.g. when a frontend reconnects with other features).
  [[nodiscard]] std::error_code set_offloads(const TapOffloads& offloads);
  /// TUNSETCARRIER: the link's carrier as the host sees it (off: the host stops sending).
  std::error_code set_carrier(bool on);
  /// The interface's ifalias (IFLA_IFALIAS over rtnetlink, by ifindex): a mark a hotplug
  /// script can check (`/sys/class/net/<dev>/ifalias`) before it touches a device.
  [[nodiscard]] std::error_code set_alias(std::string_view alias);

  /// A new fd (F_DUPFD_CLOEXEC) for queue `index` < queue_count(), which is attached first if
  /// it was detached. Closing the returned fd does not detach the queue.
  [[nodiscard]] Result<UniqueFd> queue_fd(std::uint32_t index);
  /// Queues 0..n-1 attached, the others detached (TUNSETQUEUE): the kernel hands host->TAP
  /// traffic only to attached queues, so a queue nobody reads must not be attached. 1 <= n.
  [[nodiscard]] std::error_code set_active_queues(std::uint32_t n);

  /// Reads one frame (with its vnet header when enabled). A buffer shorter than the frame
  /// truncates it; use at least vnet_hdr_len() + 65535 + 18 bytes with TSO on.
  /// EAGAIN on a non-blocking fd is std::errc::resource_unavailable_try_again.
  [[nodiscard]] Result<std::size_t> read(std::span<std::byte> buf);
  /// Writes one frame gathered from `iov` (vnet header first when enabled). The TAP takes
  /// whole frames: the result is the full length or an error.
  [[nodiscard]] Result<std::size_t> write(std::span<const iovec> iov);

 private:
  TapDevice(UniqueFd fd, std::string name, int ifindex, std::size_t vnet_hdr_len,
            TapOffloads offloads);
  [[nodiscard]] std::error_code set_queue_attached(std::uint32_t index, bool attached);

  struct ExtraQueue {
    UniqueFd fd;
    bool attached = true;
  };

  UniqueFd fd_;                           // queue 0
  std::vector<ExtraQueue> extra_queues_;  // queues 1.., opened at creation
  std::string created_name_;              // only if TUNGETIFF ever fails
  int ifindex_ = 0;
  std::size_t vnet_hdr_len_ = 0;
  TapOffloads offloads_{};
  bool persistent_ = false;
  bool keep_ = false;
  bool from_kept_ = false;
};

}  // namespace unetback::net

template <>
struct std::is_error_code_enum<unetback::net::TapError> : std::true_type {};
