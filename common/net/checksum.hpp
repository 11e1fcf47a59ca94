// The Internet checksum (RFC 1071): a 16-bit ones'-complement sum, computed incrementally
// over any number of buffers split at any byte (odd split points included), plus the
// IPv4/IPv6 pseudo-header sums TCP and UDP checksums start from (RFC 793, RFC 768,
// RFC 8200 §8.1).
//
// Values returned here are *numeric*: store them with store_be16() and the bytes on the
// wire are right, on any host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace unetback::net {

/// Accumulates a ones'-complement sum. The sum is taken over native 64-bit loads (eight bytes
/// per step with an end-around carry), which RFC 1071 §2(B) shows is equivalent to summing
/// 16-bit words, and converted to network order only when read.
class ChecksumAccumulator {
 public:
  /// Adds `data` as if it were appended to everything added so far.
  void add(std::span<const std::byte> data) noexcept;
  /// Adds a 16-bit value as it would appear big-endian on the wire at the current position.
  void add_be16(std::uint16_t v) noexcept;
  /// Adds another accumulator's sum (as if its bytes were appended here).
  void add(const ChecksumAccumulator& other) noexcept;

  /// The folded 16-bit ones'-complement sum, not inverted: the value a checksum-offload
  /// ("partial", csum_blank) L4 header carries when this accumulator holds the pseudo-header.
  [[nodiscard]] std::uint16_t folded() const noexcept;
  /// The checksum field value: the inverted folded sum.
  [[nodiscard]] std::uint16_t checksum() const noexcept {
    return static_cast<std::uint16_t>(~folded());
  }
  /// Total number of bytes added (for the parity of the next byte).
  [[nodiscard]] std::uint64_t length() const noexcept { return length_; }

 private:
  std::uint64_t sum_ = 0;  // native-order 64-bit ones'-complement sum
  std::uint64_t length_ = 0;
};

/// The checksum (inverted folded sum) of one buffer.
[[nodiscard]] std::uint16_t internet_checksum(std::span<const std::byte> data) noexcept;

/// True when `data` (which contains its own checksum field) sums to 0xFFFF (RFC 1071 §1:
/// "the checksum … is verified by computing the sum over the same set of octets, including
/// the checksum field; if the result is all 1 bits, the check succeeds").
[[nodiscard]] bool checksum_ok(const ChecksumAccumulator& sum_including_field) noexcept;

/// The IPv4 pseudo-header: source, destination, zero, protocol, L4 length (header + data).
[[nodiscard]] ChecksumAccumulator pseudo_header_ipv4(std::span<const std::byte, 4> src,
                                                     std::span<const std::byte, 4> dst,
                                                     std::uint8_t protocol,
                                                     std::uint16_t l4_len) noexcept;
/// The IPv6 pseudo-header (RFC 8200 §8.1): source, destination, 32-bit upper-layer length,
/// three zero bytes, next header (the final L4 protocol, not the first extension header).
[[nodiscard]] ChecksumAccumulator pseudo_header_ipv6(std::span<const std::byte, 16> src,
                                                     std::span<const std::byte, 16> dst,
                                                     std::uint8_t next_header,
                                                     std::uint32_t l4_len) noexcept;

}  // namespace unetback::net
