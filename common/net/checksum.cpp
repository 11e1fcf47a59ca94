#include "common/net/checksum.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "common/net/bytes.hpp"

namespace unetback::net {
namespace {

// Ones'-complement addition in 64 bits: the carry out of bit 63 wraps into bit 0.
constexpr std::uint64_t add_oc(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t s = a + b;
  return s + (s < b ? 1 : 0);
}

// Folds a 64-bit ones'-complement sum to 16 bits; 2^16 ≡ 1 (mod 2^16 - 1), so summing the
// 16-bit pieces with end-around carry preserves the value.
constexpr std::uint16_t fold64(std::uint64_t s) {
  s = (s & 0xFFFFFFFFu) + (s >> 32);
  s = (s & 0xFFFFFFFFu) + (s >> 32);
  s = (s & 0xFFFFu) + (s >> 16);
  s = (s & 0xFFFFu) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

constexpr std::uint16_t bswap16(std::uint16_t v) {
  return static_cast<std::uint16_t>((v >> 8) | (v << 8));
}

// Sum of `data` as native 64-bit words, starting at an even position; a trailing partial
// word is zero-padded at its end (RFC 1071: "pad with a zero octet"). Each 8-byte load is
// split into its 32-bit halves and added into 64-bit accumulators: no carry can be lost
// before 2^32 additions, there is no carry chain between steps, and the loop vectorises.
// 2^32 ≡ 1 (mod 2^16 - 1), so the halves' sum folds to the same 16-bit result.
std::uint64_t sum_native(const std::byte* p, std::size_t n) {
  // Bound each pass so the 64-bit accumulators cannot overflow (2 * 2^32 per word pair).
  constexpr std::size_t kMaxPass = std::size_t{1} << 34;
  std::uint64_t total = 0;
  while (n >= 8) {
    const std::size_t words = std::min(n, kMaxPass) / 8;
    std::uint64_t s0 = 0;
    std::uint64_t s1 = 0;
    std::uint64_t s2 = 0;
    std::uint64_t s3 = 0;
    std::size_t i = 0;
    for (; i + 2 <= words; i += 2) {  // two words a step: four independent adds
      std::uint64_t a;
      std::uint64_t b;
      std::memcpy(&a, p + i * 8, 8);
      std::memcpy(&b, p + i * 8 + 8, 8);
      s0 += a & 0xFFFFFFFFu;
      s1 += a >> 32;
      s2 += b & 0xFFFFFFFFu;
      s3 += b >> 32;
    }
    if (i < words) {
      std::uint64_t a;
      std::memcpy(&a, p + i * 8, 8);
      s0 += a & 0xFFFFFFFFu;
      s1 += a >> 32;
    }
    total = add_oc(total, add_oc(add_oc(s0, s1), add_oc(s2, s3)));
    p += words * 8;
    n -= words * 8;
  }
  if (n > 0) {
    std::array<std::byte, 8> tail{};
    std::memcpy(tail.data(), p, n);
    std::uint64_t w;
    std::memcpy(&w, tail.data(), 8);
    total = add_oc(total, w);
  }
  return total;
}

}  // namespace

void ChecksumAccumulator::add(std::span<const std::byte> data) noexcept {
  if (data.empty()) return;
  std::uint64_t s = sum_native(data.data(), data.size());
  if ((length_ & 1) != 0) {
    // This buffer starts at an odd position: each of its bytes sits in the other half of its
    // 16-bit word, and a sum of byte-swapped words is the byte-swapped sum (RFC 1071 §2(B)).
    s = bswap16(fold64(s));
  }
  sum_ = add_oc(sum_, s);
  length_ += data.size();
}

void ChecksumAccumulator::add_be16(std::uint16_t v) noexcept {
  std::array<std::byte, 2> b{};
  store_be16(b, 0, v);
  add(b);
}

void ChecksumAccumulator::add(const ChecksumAccumulator& other) noexcept {
  std::uint64_t s = other.sum_;
  if ((length_ & 1) != 0) s = bswap16(fold64(s));
  sum_ = add_oc(sum_, s);
  length_ += other.length_;
}

std::uint16_t ChecksumAccumulator::folded() const noexcept {
  const std::uint16_t native = fold64(sum_);
  // The native sum of little-endian loads is the byte-swapped network-order sum.
  if constexpr (std::endian::native == std::endian::little) return bswap16(native);
  return native;
}

std::uint16_t internet_checksum(std::span<const std::byte> data) noexcept {
  ChecksumAccumulator acc;
  acc.add(data);
  return acc.checksum();
}

bool checksum_ok(const ChecksumAccumulator& sum_including_field) noexcept {
  return sum_including_field.folded() == 0xFFFF;
}

ChecksumAccumulator pseudo_header_ipv4(std::span<const std::byte, 4> src,
                                       std::span<const std::byte, 4> dst, std::uint8_t protocol,
                                       std::uint16_t l4_len) noexcept {
  ChecksumAccumulator acc;
  acc.add(src);
  acc.add(dst);
  acc.add_be16(protocol);  // a zero byte, then the protocol byte
  acc.add_be16(l4_len);
  return acc;
}

ChecksumAccumulator pseudo_header_ipv6(std::span<const std::byte, 16> src,
                                       std::span<const std::byte, 16> dst, std::uint8_t next_header,
                                       std::uint32_t l4_len) noexcept {
  ChecksumAccumulator acc;
  acc.add(src);
  acc.add(dst);
  acc.add_be16(static_cast<std::uint16_t>(l4_len >> 16));
  acc.add_be16(static_cast<std::uint16_t>(l4_len & 0xFFFF));
  acc.add_be16(0);
  acc.add_be16(next_header);
  return acc;
}

}  // namespace unetback::net
