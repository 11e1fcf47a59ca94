// TapDevice: one TAP interface (IFF_TAP | IFF_NO_PI, optionally IFF_VNET_HDR with checksum and
// TSO offloads), owned through its /dev/net/tun file descriptor.
//
// RAII, move-only. The destructor closes the fd; a TAP is never made persistent here, so
// closing the last fd removes the interface (and with it any bridge membership).
//
// The interface lives in the network namespace of the thread that called create(); the
// ioctls set_up/set_mtu/set_mac open a socket in the *calling* thread's namespace, so call
// them from the same namespace (the fd itself keeps working after `ip link set … netns`).
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
  /// IFF_MULTI_QUEUE: the TAP can have one fd per queue (attach_queue()); the kernel spreads
  /// host->TAP traffic over the queues by flow hash.
  bool multi_queue = false;
  std::optional<MacAddress> mac;
  std::optional<std::uint32_t> mtu;
};

/// Validates an interface name the way the kernel's dev_valid_name does, and also refuses
/// '%' (a name template would let the kernel pick a different name than the one we record).
[[nodiscard]] bool valid_ifname(std::string_view name);

class TapDevice {
 public:
  /// Opens /dev/net/tun and creates the TAP (IFF_TUN_EXCL: an existing interface of that
  /// name is name_in_use, never silently re-attached), sets the vnet header size, offloads,
  /// MAC and MTU. The interface is left down: call set_up(true).
  [[nodiscard]] static Result<TapDevice> create(const TapConfig& config);

  TapDevice(TapDevice&&) noexcept = default;
  TapDevice& operator=(TapDevice&&) noexcept = default;
  TapDevice(const TapDevice&) = delete;
  TapDevice& operator=(const TapDevice&) = delete;
  ~TapDevice() = default;  // UniqueFd closes the fd: the non-persistent TAP disappears

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] int fd() const { return fd_.get(); }
  /// The ifindex in the namespace the TAP was created in.
  [[nodiscard]] int ifindex() const { return ifindex_; }
  [[nodiscard]] bool vnet_hdr() const { return vnet_hdr_len_ != 0; }
  /// Bytes of virtio_net_hdr before every frame read or written (0 without vnet_hdr).
  [[nodiscard]] std::size_t vnet_hdr_len() const { return vnet_hdr_len_; }
  [[nodiscard]] const TapOffloads& offloads() const { return offloads_; }

  /// Brings the interface up or down (SIOCSIFFLAGS, IFF_UP).
  [[nodiscard]] std::error_code set_up(bool up);
  [[nodiscard]] std::error_code set_mtu(std::uint32_t mtu);
  [[nodiscard]] std::error_code set_mac(const MacAddress& mac);
  /// Changes the offloads (e.g. when a frontend reconnects with other features).
  [[nodiscard]] std::error_code set_offloads(const TapOffloads& offloads);
  /// TUNSETCARRIER: the link's carrier as the host sees it (off: the host stops sending).
  std::error_code set_carrier(bool on);

  /// Reads one frame (with its vnet header when enabled). A buffer shorter than the frame
  /// truncates it; use at least vnet_hdr_len() + 65535 + 18 bytes with TSO on.
  /// EAGAIN on a non-blocking fd is std::errc::resource_unavailable_try_again.
  /// Opens one more queue of a multi_queue TAP: the returned fd reads/writes frames like
  /// fd() (same vnet_hdr and offload settings); closing it detaches the queue.
  [[nodiscard]] Result<UniqueFd> attach_queue() const;

  [[nodiscard]] Result<std::size_t> read(std::span<std::byte> buf);
  /// Writes one frame gathered from `iov` (vnet header first when enabled). The TAP takes
  /// whole frames: the result is the full length or an error.
  [[nodiscard]] Result<std::size_t> write(std::span<const iovec> iov);

 private:
  TapDevice(UniqueFd fd, std::string name, int ifindex, std::size_t vnet_hdr_len,
            TapOffloads offloads, bool multi_queue, bool non_blocking);

  UniqueFd fd_;
  std::string name_;
  int ifindex_ = 0;
  std::size_t vnet_hdr_len_ = 0;
  TapOffloads offloads_{};
  bool multi_queue_ = false;
  bool non_blocking_ = true;
};

}  // namespace unetback::net

template <>
struct std::is_error_code_enum<unetback::net::TapError> : std::true_type {};
