// Flags<E>: a typed set of bits over an enum class, so TX and RX flags (whose bits 0 and 1
// are swapped on the wire) can never be mixed up.
#pragma once

#include <type_traits>

namespace unetback::wire {

template <typename E>
class Flags {
  static_assert(std::is_enum_v<E>);

 public:
  using Rep = std::underlying_type_t<E>;

  constexpr Flags() = default;
  constexpr Flags(E e) : bits_(static_cast<Rep>(e)) {}  // NOLINT: implicit by design
  static constexpr Flags from_raw(Rep raw) { return Flags(raw, 0); }

  [[nodiscard]] constexpr Rep raw() const { return bits_; }
  [[nodiscard]] constexpr bool has(E e) const { return (bits_ & static_cast<Rep>(e)) != 0; }
  [[nodiscard]] constexpr bool empty() const { return bits_ == 0; }

  constexpr Flags operator|(Flags o) const { return Flags(static_cast<Rep>(bits_ | o.bits_), 0); }
  constexpr Flags& operator|=(Flags o) {
    bits_ = static_cast<Rep>(bits_ | o.bits_);
    return *this;
  }
  constexpr Flags without(E e) const {
    return Flags(static_cast<Rep>(bits_ & ~static_cast<Rep>(e)), 0);
  }
  friend constexpr bool operator==(Flags, Flags) = default;

 private:
  constexpr Flags(Rep raw, int) : bits_(raw) {}
  Rep bits_ = 0;
};

/// Opt-in: specialise to true for an enum whose values are single bits.
template <typename E>
inline constexpr bool kIsFlagEnum = false;

template <typename E>
requires kIsFlagEnum<E>
constexpr Flags<E> operator|(E a, E b) {
  return Flags<E>(a) | Flags<E>(b);
}

}  // namespace unetback::wire
