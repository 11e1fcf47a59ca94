// Loss accounting from sequence numbers: lost = highest + 1 - distinct.
#include "tools/udpflow/seq_tracker.hpp"

#include <array>
#include <gtest/gtest.h>

namespace unetback::udpflow {
namespace {

TEST(SeqTracker, SequenceNumberIsEightBytesBigEndian) {
  std::array<std::byte, 10> buf{};
  encode_seq(buf, 0x0102030405060708ULL);
  EXPECT_EQ(buf[0], std::byte{0x01});
  EXPECT_EQ(buf[7], std::byte{0x08});
  EXPECT_EQ(buf[8], std::byte{0});
  EXPECT_EQ(decode_seq(buf), 0x0102030405060708ULL);
  EXPECT_FALSE(decode_seq(std::span(buf).first(7)).has_value());
}

TEST(SeqTracker, NothingSeenNothingLost) {
  SeqTracker t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.lost(), 0u);
}

TEST(SeqTracker, InOrderDeliveryLosesNothing) {
  SeqTracker t;
  for (std::uint64_t s = 0; s < 1000; ++s) t.on_packet(s);
  EXPECT_EQ(t.distinct(), 1000u);
  EXPECT_EQ(t.lost(), 0u);
  EXPECT_EQ(t.reordered(), 0u);
  EXPECT_EQ(t.highest(), 999u);
}

TEST(SeqTracker, GapsCountAsLostIncludingTheFirstNumbers) {
  SeqTracker t;
  for (std::uint64_t s : {2u, 3u, 5u, 9u}) t.on_packet(s);
  // 0, 1, 4, 6, 7, 8 never arrived.
  EXPECT_EQ(t.lost(), 6u);
  EXPECT_EQ(t.distinct(), 4u);
}

TEST(SeqTracker, ReorderedPacketFillsItsGap) {
  SeqTracker t;
  for (std::uint64_t s : {0u, 1u, 3u, 4u}) t.on_packet(s);
  EXPECT_EQ(t.lost(), 1u);
  t.on_packet(2);
  EXPECT_EQ(t.lost(), 0u);
  EXPECT_EQ(t.reordered(), 1u);
}

TEST(SeqTracker, DuplicatesAreNotDeliveries) {
  SeqTracker t;
  for (std::uint64_t s : {0u, 1u, 1u, 2u, 0u, 2u}) t.on_packet(s);
  EXPECT_EQ(t.distinct(), 3u);
  EXPECT_EQ(t.duplicates(), 3u);
  EXPECT_EQ(t.lost(), 0u);
}

TEST(SeqTracker, PacketsBeyondTheReorderWindowAreLateNotDelivered) {
  SeqTracker t;
  t.on_packet(0);
  t.on_packet(SeqTracker::kWindow + 10);
  t.on_packet(5);  // more than a window behind: cannot tell it from a duplicate any more
  EXPECT_EQ(t.late(), 1u);
  EXPECT_EQ(t.distinct(), 2u);
  EXPECT_EQ(t.lost(), SeqTracker::kWindow + 9);
  t.on_packet(11);  // inside the window: a reordered delivery
  EXPECT_EQ(t.reordered(), 1u);
  EXPECT_EQ(t.distinct(), 3u);
}

TEST(SeqTracker, SlidingWindowForgetsOldNumbersSoTheyAreNotMistakenForDuplicates) {
  SeqTracker t;
  // Every other number for several windows: bits for the skipped numbers must be clear when
  // the window comes round again, so a late odd number is a reordering, not a duplicate.
  for (std::uint64_t s = 0; s < 3 * SeqTracker::kWindow; s += 2) t.on_packet(s);
  t.on_packet(3 * SeqTracker::kWindow - 1);
  EXPECT_EQ(t.duplicates(), 0u);
  t.on_packet(3 * SeqTracker::kWindow - 3);
  EXPECT_EQ(t.duplicates(), 0u);
  EXPECT_EQ(t.reordered(), 1u);
  t.on_packet(3 * SeqTracker::kWindow - 3);
  EXPECT_EQ(t.duplicates(), 1u);
  EXPECT_EQ(t.lost(), 3 * SeqTracker::kWindow - t.distinct());
}

}  // namespace
}  // namespace unetback::udpflow
