// RFC 1071 checksum: known vectors, and the 8-bytes-a-step accumulator against a plain
// 16-bit-word reference over random data, odd lengths and odd split points.
#include "common/net/checksum.hpp"

#include <array>
#include <cstdint>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "common/net/bytes.hpp"

namespace unetback::net {
namespace {

std::vector<std::byte> bytes_of(std::initializer_list<unsigned> v) {
  std::vector<std::byte> out;
  for (unsigned x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

// The textbook definition: big-endian 16-bit words, zero-padded, end-around carry.
std::uint16_t reference_folded(std::span<const std::byte> data) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < data.size(); i += 2) {
    std::uint32_t word = static_cast<std::uint32_t>(data[i]) << 8;
    if (i + 1 < data.size()) word |= static_cast<std::uint32_t>(data[i + 1]);
    sum += word;
  }
  while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(sum);
}

TEST(Checksum, Rfc1071ExampleSum) {
  // RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (after the carry).
  auto data = bytes_of({0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7});
  ChecksumAccumulator acc;
  acc.add(data);
  EXPECT_EQ(acc.folded(), 0xddf2);
  EXPECT_EQ(acc.checksum(), 0x220d);
}

TEST(Checksum, CapturedIpv4HeaderVerifiesAndRecomputes) {
  // An IPv4 header from a capture (UDP 192.168.0.1 -> 192.168.0.199), checksum b861.
  auto hdr = bytes_of({0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                       0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7});
  ChecksumAccumulator acc;
  acc.add(hdr);
  EXPECT_TRUE(checksum_ok(acc));
  hdr[10] = std::byte{0};
  hdr[11] = std::byte{0};
  EXPECT_EQ(internet_checksum(hdr), 0xb861);
  hdr[19] = std::byte{0xc8};  // a different destination no longer verifies
  store_be16(hdr, 10, 0xb861);
  ChecksumAccumulator bad;
  bad.add(hdr);
  EXPECT_FALSE(checksum_ok(bad));
}

TEST(Checksum, EmptyAndSingleByte) {
  ChecksumAccumulator acc;
  EXPECT_EQ(acc.folded(), 0);
  EXPECT_EQ(acc.checksum(), 0xFFFF);
  auto one = bytes_of({0xab});
  acc.add(one);
  EXPECT_EQ(acc.folded(), 0xab00);  // a lone byte is the high half of a zero-padded word
  EXPECT_EQ(acc.length(), 1u);
}

TEST(Checksum, MatchesReferenceOnRandomDataOfEveryLengthUpTo300) {
  std::mt19937 rng(1071);
  for (std::size_t len = 0; len <= 300; ++len) {
    std::vector<std::byte> data(len);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    ChecksumAccumulator acc;
    acc.add(data);
    ASSERT_EQ(acc.folded(), reference_folded(data)) << "len " << len;
  }
}

TEST(Checksum, MatchesReferenceWithRandomSplitsIncludingOddOnes) {
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    const std::size_t len = rng() % 9000;
    std::vector<std::byte> data(len);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    ChecksumAccumulator acc;
    std::size_t pos = 0;
    while (pos < len) {
      const std::size_t piece = std::min<std::size_t>(len - pos, rng() % 37);
      acc.add(std::span<const std::byte>(data).subspan(pos, piece));
      pos += piece;
    }
    ASSERT_EQ(acc.folded(), reference_folded(data)) << "round " << round << " len " << len;
  }
}

TEST(Checksum, AllOnesDataFoldsWithoutLosingCarries) {
  // 0xFF bytes make every 64-bit add carry: the end-around carry must not be lost.
  std::vector<std::byte> data(4099, std::byte{0xFF});
  ChecksumAccumulator acc;
  acc.add(data);
  EXPECT_EQ(acc.folded(), reference_folded(data));
}

TEST(Checksum, MergingAccumulatorsEqualsOneStream) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::byte> a(rng() % 100);
    std::vector<std::byte> b(rng() % 100);
    for (auto& x : a) x = static_cast<std::byte>(rng());
    for (auto& x : b) x = static_cast<std::byte>(rng());
    ChecksumAccumulator left;
    left.add(a);
    ChecksumAccumulator right;
    right.add(b);
    left.add(right);
    std::vector<std::byte> all(a);
    all.insert(all.end(), b.begin(), b.end());
    ASSERT_EQ(left.folded(), reference_folded(all));
    ASSERT_EQ(left.length(), all.size());
  }
}

TEST(Checksum, Ipv4PseudoHeaderIsSrcDstZeroProtoLength) {
  const std::array<std::byte, 4> src{std::byte{192}, std::byte{168}, std::byte{0}, std::byte{1}};
  const std::array<std::byte, 4> dst{std::byte{192}, std::byte{168}, std::byte{0}, std::byte{199}};
  auto acc = pseudo_header_ipv4(src, dst, 17, 0x5f);
  auto expect = bytes_of({192, 168, 0, 1, 192, 168, 0, 199, 0, 17, 0x00, 0x5f});
  EXPECT_EQ(acc.folded(), reference_folded(expect));
}

TEST(Checksum, Ipv6PseudoHeaderHas32BitLengthAndNextHeader) {
  std::array<std::byte, 16> src{};
  std::array<std::byte, 16> dst{};
  for (std::size_t i = 0; i < 16; ++i) {
    src[i] = static_cast<std::byte>(0x20 + i);
    dst[i] = static_cast<std::byte>(0xA0 + i);
  }
  auto acc = pseudo_header_ipv6(src, dst, 6, 0x12345);
  std::vector<std::byte> expect(src.begin(), src.end());
  expect.insert(expect.end(), dst.begin(), dst.end());
  for (unsigned x : {0x00u, 0x01u, 0x23u, 0x45u, 0u, 0u, 0u, 6u}) {
    expect.push_back(static_cast<std::byte>(x));
  }
  EXPECT_EQ(acc.folded(), reference_folded(expect));
}

}  // namespace
}  // namespace unetback::net
