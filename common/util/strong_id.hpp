// Strong types for the identifiers that cross the Xen interfaces.
//
// A domid, a grant reference, an event-channel port and a device id are all small
// integers on the wire; mixing them up is a classic source of "works by accident" bugs.
// Each gets its own type; conversion to the raw value is explicit (`.value()`).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>

namespace unetback {

template <typename Tag, typename Rep>
class StrongId {
 public:
  using rep_type = Rep;

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : v_(v) {}

  [[nodiscard]] constexpr Rep value() const { return v_; }

  friend constexpr auto operator<=>(StrongId, StrongId) = default;

  friend std::ostream& operator<<(std::ostream& os, StrongId id) {
    // Print uint8_t/uint16_t as numbers, never as characters.
    return os << static_cast<std::uint64_t>(id.v_);
  }

 private:
  Rep v_{};
};

struct DomIdTag {};
struct GrantRefTag {};
struct PortTag {};
struct DevIdTag {};
struct QueueIdTag {};

/// A Xen domain id (`domid_t`, 16 bits). Domain 0 is the control domain.
using DomId = StrongId<DomIdTag, std::uint16_t>;
/// A grant reference (`grant_ref_t`): an index into the granting domain's grant table.
using GrantRef = StrongId<GrantRefTag, std::uint32_t>;
/// An event-channel port (`evtchn_port_t`), local to the domain that holds it.
using Port = StrongId<PortTag, std::uint32_t>;
/// A device id (the `<devid>` in `device/vif/<devid>`; libxl's "handle").
using DevId = StrongId<DevIdTag, std::uint32_t>;
/// A queue number inside one multi-queue vif.
using QueueId = StrongId<QueueIdTag, std::uint32_t>;

inline constexpr DomId kDom0{0};
/// DOMID_FIRST_RESERVED (Xen's public xen.h): ids from here up (DOMID_SELF, DOMID_IO,
/// DOMID_XEN, ...) name no real domain, and no domain is ever created with one.
inline constexpr DomId kFirstReservedDomId{0x7FF0};

/// Whether `id` is one of Xen's reserved ids rather than a domain's.
[[nodiscard]] constexpr bool is_reserved(DomId id) {
  return id >= kFirstReservedDomId;
}

/// A free-running ring index (ring.h `RING_IDX`, 32 bits). Only modular arithmetic is
/// defined: the difference of two indices is a distance, never a comparison of ages.
class RingIdx {
 public:
  constexpr RingIdx() = default;
  constexpr explicit RingIdx(std::uint32_t v) : v_(v) {}

  [[nodiscard]] constexpr std::uint32_t value() const { return v_; }

  /// Distance from `older` to this index, modulo 2^32.
  [[nodiscard]] constexpr std::uint32_t since(RingIdx older) const { return v_ - older.v_; }

  constexpr RingIdx operator+(std::uint32_t n) const { return RingIdx{v_ + n}; }
  constexpr RingIdx operator-(std::uint32_t n) const { return RingIdx{v_ - n}; }
  constexpr RingIdx& operator+=(std::uint32_t n) {
    v_ += n;
    return *this;
  }
  constexpr RingIdx& operator++() {
    ++v_;
    return *this;
  }
  constexpr RingIdx operator++(int) {
    RingIdx old = *this;
    ++v_;
    return old;
  }
  friend constexpr bool operator==(RingIdx, RingIdx) = default;

  friend std::ostream& operator<<(std::ostream& os, RingIdx i) { return os << i.v_; }

 private:
  std::uint32_t v_{};
};

}  // namespace unetback

template <typename Tag, typename Rep>
struct std::hash<unetback::StrongId<Tag, Rep>> {
  std::size_t operator()(unetback::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>{}(id.value());
  }
};
