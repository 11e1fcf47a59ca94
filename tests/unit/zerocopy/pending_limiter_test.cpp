// PendingLimiter: vhost_net's zerocopy policy after "do not stall on zerocopy depletion" (seed
// 000). Each test pins one rule so that breaking the rule fails it.
#include "common/zerocopy/pending_limiter.hpp"

#include <algorithm>
#include <cstdlib>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "tests/unit/zerocopy/allocation_counter.hpp"

namespace unetback::zerocopy {
namespace {

using ::testing::HasSubstr;

constexpr std::size_t kBig = 1500;  // an MTU-sized frame: always above goodcopy_len
constexpr std::size_t kSmall = 64;  // a TCP ACK: always below it

constexpr Verdict kZerocopy{Decision::zerocopy, CopyReason::none};
constexpr Verdict kCopySize{Decision::copy, CopyReason::size};
constexpr Verdict kCopyLimit{Decision::copy, CopyReason::limit};
constexpr Verdict kCopyErrors{Decision::copy, CopyReason::errors};
constexpr Verdict kStall{Decision::stall, CopyReason::limit};

LimiterConfig config(std::uint32_t ring_size, std::uint32_t max_pending = kDefaultMaxPending,
                     bool fallback = true) {
  LimiterConfig c;
  c.ring_size = ring_size;
  c.max_pending = max_pending;
  c.fallback = fallback;
  return c;
}

// Decides a big packet, expects zerocopy, and puts it in flight.
std::optional<Token> send_zerocopy(PendingLimiter& limiter) {
  const Verdict v = limiter.decide(kBig);
  EXPECT_EQ(v, kZerocopy);
  if (v != kZerocopy) {
    return std::nullopt;
  }
  auto token = limiter.begin();
  EXPECT_TRUE(token.has_value());
  if (!token) {
    return std::nullopt;
  }
  return *token;
}

// Puts `n` zerocopy buffers in flight.
std::vector<Token> fill(PendingLimiter& limiter, std::uint32_t n) {
  std::vector<Token> tokens;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (auto t = send_zerocopy(limiter)) {
      tokens.push_back(*t);
    }
  }
  return tokens;
}

std::uint32_t complete_ok(PendingLimiter& limiter, Token t, bool success = true) {
  auto r = limiter.complete(t, success);
  EXPECT_TRUE(r.has_value()) << r.error().message();
  return r.value_or(0U);
}

std::string printable(Verdict v) {
  return std::string(decision_name(v.decision)) + "/" + copy_reason_name(v.reason);
}

TEST(PendingLimiter, SmallPacketIsCopied) {
  PendingLimiter limiter(config(256));
  EXPECT_EQ(limiter.decide(0), kCopySize);
  EXPECT_EQ(limiter.decide(kSmall), kCopySize);
  EXPECT_EQ(limiter.decide(kDefaultGoodcopyLen - 1), kCopySize);
  EXPECT_EQ(limiter.begin().error(), std::errc::operation_not_permitted);
  EXPECT_EQ(limiter.decide(kDefaultGoodcopyLen), kZerocopy);
  EXPECT_EQ(limiter.in_flight(), 0U) << "a decision alone puts nothing in flight";
}

TEST(PendingLimiter, GoodcopyLenIsConfigurable) {
  LimiterConfig c = config(256);
  c.goodcopy_len = 1000;
  PendingLimiter limiter(c);
  EXPECT_EQ(limiter.decide(999), kCopySize);
  EXPECT_EQ(limiter.decide(1000), kZerocopy);

  c.goodcopy_len = 0;  // every packet is eligible
  PendingLimiter all(c);
  EXPECT_EQ(all.decide(0), kZerocopy);
}

TEST(PendingLimiter, DefaultLimitMatchesVhostFigures) {
  // vq->num 256 gives 64; from 512 up VHOST_MAX_PEND (128) caps it; the smallest ring gives 1.
  EXPECT_EQ(PendingLimiter(LimiterConfig{}).limit(), 64U);
  EXPECT_EQ(PendingLimiter(config(512)).limit(), 128U);
  EXPECT_EQ(PendingLimiter(config(1024)).limit(), 128U);
  EXPECT_EQ(PendingLimiter(config(4)).limit(), 1U);
}

class LimitByRing : public ::testing::TestWithParam<std::tuple<std::uint32_t, std::uint32_t>> {};

TEST_P(LimitByRing, LimitIsQuarterOfRingCappedByMaxPending) {
  const auto [ring_size, max_pending] = GetParam();
  const std::uint32_t expected = std::min(max_pending, ring_size / 4);
  PendingLimiter limiter(config(ring_size, max_pending));
  ASSERT_EQ(limiter.limit(), expected);

  // Exactly `expected` buffers can be in flight; the next big packet is copied.
  std::vector<Token> tokens = fill(limiter, expected);
  ASSERT_EQ(tokens.size(), expected);
  EXPECT_EQ(limiter.in_flight(), expected);
  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);
  EXPECT_EQ(limiter.in_flight(), expected);

  // Retiring the oldest makes room for exactly one more.
  EXPECT_EQ(complete_ok(limiter, tokens.front()), 1U);
  EXPECT_EQ(limiter.in_flight(), expected - 1);
  ASSERT_TRUE(send_zerocopy(limiter));
  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);
}

std::string ring_and_max_name(const ::testing::TestParamInfo<LimitByRing::ParamType>& p) {
  return "ring" + std::to_string(std::get<0>(p.param)) + "_max" +
         std::to_string(std::get<1>(p.param));
}

INSTANTIATE_TEST_SUITE_P(AllRingSizes, LimitByRing,
                         ::testing::Combine(::testing::Values(4U, 8U, 16U, 32U, 64U, 128U, 256U,
                                                              512U, 1024U),
                                            ::testing::Values(1U, 7U, 128U, 1000U)),
                         ring_and_max_name);

TEST(PendingLimiter, PacketBeyondLimitFallsBackToCopyNotStall) {
  PendingLimiter limiter(config(32));  // limit 8
  std::vector<Token> tokens = fill(limiter, limiter.limit());
  ASSERT_EQ(tokens.size(), 8U);

  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);
  EXPECT_EQ(limiter.begin().error(), std::errc::operation_not_permitted)
      << "a copy verdict must not reserve a slot";
  // Seed 000: the small flow keeps its rate while the zerocopy flow is held up.
  EXPECT_EQ(limiter.decide(kSmall), kCopySize);
  EXPECT_EQ(limiter.stats().stalls, 0U);
  EXPECT_EQ(limiter.in_flight(), 8U);
}

TEST(PendingLimiter, StallModeStallsAtLimit) {
  PendingLimiter limiter(config(32, kDefaultMaxPending, /*fallback=*/false));
  std::vector<Token> tokens = fill(limiter, limiter.limit());
  ASSERT_EQ(tokens.size(), 8U);
  const std::uint64_t packets = limiter.stats().packets;

  EXPECT_EQ(limiter.decide(kBig), kStall);
  // Pre-2017 vhost stopped reading the ring: small packets wait too (head-of-line blocking).
  EXPECT_EQ(limiter.decide(kSmall), kStall);
  EXPECT_EQ(limiter.begin().error(), std::errc::operation_not_permitted);
  EXPECT_EQ(limiter.stats().stalls, 2U);
  EXPECT_EQ(limiter.stats().packets, packets) << "a stalled packet is decided again later";

  // Below the limit, stall mode behaves like fallback mode.
  EXPECT_EQ(complete_ok(limiter, tokens.front()), 1U);
  EXPECT_EQ(limiter.decide(kSmall), kCopySize);
  EXPECT_EQ(limiter.decide(kBig), kZerocopy);
}

TEST(PendingLimiter, OutOfOrderCompletionAdvancesDoneIndexInOrder) {
  PendingLimiter limiter(config(32));  // limit 8
  std::vector<Token> t = fill(limiter, 4);
  ASSERT_EQ(t.size(), 4U);

  EXPECT_EQ(complete_ok(limiter, t[2]), 0U) << "t0 and t1 are still in flight";
  EXPECT_EQ(limiter.in_flight(), 4U);
  EXPECT_EQ(complete_ok(limiter, t[1]), 0U);
  EXPECT_EQ(limiter.in_flight(), 4U);
  EXPECT_EQ(complete_ok(limiter, t[0]), 3U) << "done passes t0, t1 and t2";
  EXPECT_EQ(limiter.in_flight(), 1U);
  EXPECT_EQ(complete_ok(limiter, t[3]), 1U);
  EXPECT_EQ(limiter.in_flight(), 0U);
}

TEST(PendingLimiter, OldestBufferInFlightHoldsTheLimit) {
  PendingLimiter limiter(config(32));  // limit 8
  std::vector<Token> t = fill(limiter, limiter.limit());
  ASSERT_EQ(t.size(), 8U);
  for (std::size_t i = 1; i < t.size(); ++i) {
    EXPECT_EQ(complete_ok(limiter, t[i]), 0U);
  }
  // vhost's done_idx: completions behind a slow buffer do not free capacity.
  EXPECT_EQ(limiter.in_flight(), 8U);
  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);
  EXPECT_EQ(complete_ok(limiter, t[0]), 8U);
  EXPECT_EQ(limiter.in_flight(), 0U);
  EXPECT_EQ(limiter.decide(kBig), kZerocopy);
}

TEST(PendingLimiter, CompletingUnknownOrRepeatedTokenIsRejected) {
  PendingLimiter limiter(config(32));
  std::vector<Token> t = fill(limiter, 3);
  ASSERT_EQ(t.size(), 3U);

  EXPECT_EQ(complete_ok(limiter, t[1]), 0U);
  EXPECT_EQ(limiter.complete(t[1], true).error(), std::errc::invalid_argument)
      << "completed but not yet passed by done";
  EXPECT_EQ(complete_ok(limiter, t[0]), 2U);
  EXPECT_EQ(limiter.complete(t[0], true).error(), std::errc::invalid_argument)
      << "already passed by done";
  EXPECT_EQ(limiter.complete(t[1], false).error(), std::errc::invalid_argument);

  const Stats s = limiter.stats();
  EXPECT_EQ(s.zerocopy_success, 2U);
  EXPECT_EQ(s.zerocopy_failed, 0U) << "a rejected completion counts nothing";
  EXPECT_EQ(limiter.in_flight(), 1U);
}

TEST(PendingLimiter, StaleTokenOfAReusedSlotIsRejected) {
  // Ring 4: slot 0 is reused by the fifth buffer; the first buffer's token must not retire it.
  PendingLimiter limiter(config(4));
  auto first = send_zerocopy(limiter);
  ASSERT_TRUE(first);
  EXPECT_EQ(complete_ok(limiter, *first), 1U);
  for (int i = 0; i < 3; ++i) {
    auto t = send_zerocopy(limiter);
    ASSERT_TRUE(t);
    EXPECT_EQ(complete_ok(limiter, *t), 1U);
  }
  auto fifth = send_zerocopy(limiter);
  ASSERT_TRUE(fifth);
  EXPECT_EQ(limiter.complete(*first, true).error(), std::errc::invalid_argument);
  EXPECT_EQ(limiter.in_flight(), 1U);
  EXPECT_EQ(complete_ok(limiter, *fifth), 1U);
}

TEST(PendingLimiter, BeginIsValidOnceAfterEachZerocopyVerdict) {
  PendingLimiter limiter(config(32));
  EXPECT_EQ(limiter.begin().error(), std::errc::operation_not_permitted) << "no decision yet";

  ASSERT_EQ(limiter.decide(kBig), kZerocopy);
  ASSERT_TRUE(limiter.begin().has_value());
  EXPECT_EQ(limiter.begin().error(), std::errc::operation_not_permitted) << "second begin";

  // A later decision supersedes an unused zerocopy verdict.
  ASSERT_EQ(limiter.decide(kBig), kZerocopy);
  EXPECT_EQ(limiter.decide(kSmall), kCopySize);
  EXPECT_EQ(limiter.begin().error(), std::errc::operation_not_permitted);
  EXPECT_EQ(limiter.in_flight(), 1U);
  EXPECT_EQ(limiter.stats().zerocopy_sent, 1U);
}

TEST(PendingLimiter, IndicesWrapAround) {
  // Ring 8: limit 2. Each cycle puts two buffers in flight, checks the limit, and completes
  // them newest first. Three and a half trips round the 16-bit index space.
  PendingLimiter limiter(config(8));
  ASSERT_EQ(limiter.limit(), 2U);
  constexpr std::uint32_t kCycles = 3 * 65536 / 2 + 12345;
  std::uint32_t wraps = 0;
  std::uint16_t expected_index = 0;
  for (std::uint32_t i = 0; i < kCycles; ++i) {
    auto a = send_zerocopy(limiter);
    auto b = send_zerocopy(limiter);
    ASSERT_TRUE(a && b) << "cycle " << i;
    ASSERT_EQ(a->index(), expected_index);
    ASSERT_EQ(b->index(), static_cast<std::uint16_t>(expected_index + 1));
    if (a->index() == 0 && i > 0) {
      ++wraps;
    }
    expected_index = static_cast<std::uint16_t>(expected_index + 2);

    ASSERT_EQ(limiter.in_flight(), 2U) << "cycle " << i;
    ASSERT_EQ(limiter.decide(kBig), kCopyLimit) << "cycle " << i;
    ASSERT_EQ(complete_ok(limiter, *b), 0U) << "cycle " << i;
    ASSERT_EQ(limiter.in_flight(), 2U) << "cycle " << i;
    ASSERT_EQ(complete_ok(limiter, *a), 2U) << "cycle " << i;
    ASSERT_EQ(limiter.in_flight(), 0U) << "cycle " << i;
  }
  EXPECT_EQ(wraps, 2 * kCycles / 65536);
  EXPECT_GE(wraps, 3U);
  EXPECT_EQ(expected_index, static_cast<std::uint16_t>(2 * kCycles));
  EXPECT_EQ(limiter.stats().zerocopy_sent, 2ULL * kCycles);
  EXPECT_EQ(limiter.stats().zerocopy_success, 2ULL * kCycles);
  EXPECT_EQ(limiter.stats().copied_limit, std::uint64_t{kCycles});
}

TEST(PendingLimiter, WrapInsideTheInFlightWindowKeepsCountsExact) {
  // Ring 16: limit 4, and 65536 is not a multiple of 3, so with three buffers per cycle the
  // index wrap lands between buffers in flight (produced < done numerically).
  PendingLimiter limiter(config(16));
  bool wrapped_inside = false;
  for (std::uint32_t i = 0; i < 70000 / 3; ++i) {
    std::vector<Token> t = fill(limiter, 3);
    ASSERT_EQ(t.size(), 3U);
    if (t[2].index() < t[0].index()) {
      wrapped_inside = true;
      ASSERT_EQ(limiter.in_flight(), 3U);
    }
    ASSERT_EQ(complete_ok(limiter, t[1]), 0U);
    ASSERT_EQ(complete_ok(limiter, t[2]), 0U);
    ASSERT_EQ(limiter.in_flight(), 3U);
    ASSERT_EQ(complete_ok(limiter, t[0]), 3U);
  }
  EXPECT_TRUE(wrapped_inside);
}

TEST(PendingLimiter, ErrorsAbovePacketsOver64ForceCopy) {
  PendingLimiter limiter(config(256));
  // Packet 1: zerocopy, fails. 1 error with 1 packet: 1/64 = 0 < 1.
  auto t = send_zerocopy(limiter);
  ASSERT_TRUE(t);
  EXPECT_EQ(complete_ok(limiter, *t, /*success=*/false), 1U);
  // Packets 2..64 are decided with 1..63 packets counted: copied.
  for (int p = 2; p <= 64; ++p) {
    ASSERT_EQ(limiter.decide(kBig), kCopyErrors) << "packet " << p;
  }
  // Packet 65 sees 64 packets: 64/64 = 1 >= 1 error.
  t = send_zerocopy(limiter);
  ASSERT_TRUE(t);
  EXPECT_EQ(complete_ok(limiter, *t, /*success=*/false), 1U);
  // Now 2 errors need 128 packets: packets 66..128 are copied, 129 goes zerocopy.
  for (int p = 66; p <= 128; ++p) {
    ASSERT_EQ(limiter.decide(kBig), kCopyErrors) << "packet " << p;
  }
  EXPECT_EQ(limiter.decide(kBig), kZerocopy);
  EXPECT_EQ(limiter.stats().copied_errors, 63U + 63U);
  EXPECT_EQ(limiter.stats().zerocopy_failed, 2U);
}

TEST(PendingLimiter, SuccessfulCompletionsAreNotErrors) {
  PendingLimiter limiter(config(256));
  for (int i = 0; i < 3000; ++i) {
    auto t = send_zerocopy(limiter);
    ASSERT_TRUE(t) << "packet " << i;
    ASSERT_EQ(complete_ok(limiter, *t, true), 1U);
  }
  EXPECT_EQ(limiter.stats().copied_errors, 0U);
}

TEST(PendingLimiter, CountersResetEvery1024Packets) {
  PendingLimiter limiter(config(1024));  // limit 128
  // 17 failed buffers: 17 errors need 17 * 64 = 1088 packets, more than one window holds, so
  // only the reset can re-enable zerocopy.
  std::vector<Token> t = fill(limiter, 17);
  ASSERT_EQ(t.size(), 17U);
  for (Token token : t) {
    complete_ok(limiter, token, /*success=*/false);
  }
  // Packets 18..1024 are copied; deciding packet 1024 completes the window.
  for (int p = 18; p <= 1024; ++p) {
    ASSERT_EQ(limiter.decide(kBig), kCopyErrors) << "packet " << p;
  }
  // Packet 1025 starts a fresh window: 0 packets, 0 errors.
  auto fresh = send_zerocopy(limiter);
  ASSERT_TRUE(fresh);

  // The packet count restarted too: one error now needs 64 packets of the new window again
  // (without the reset, 1025/64 = 16 >= 1 would allow zerocopy at once).
  EXPECT_EQ(complete_ok(limiter, *fresh, /*success=*/false), 1U);
  for (int p = 2; p <= 64; ++p) {
    ASSERT_EQ(limiter.decide(kBig), kCopyErrors) << "window packet " << p;
  }
  EXPECT_EQ(limiter.decide(kBig), kZerocopy);
}

TEST(PendingLimiter, CopiedPacketsCountInTheWindow) {
  // Copied packets (for any reason) count toward the window, as in vhost where tx_packets
  // counts every packet sent: small packets let the error rule recover.
  PendingLimiter limiter(config(256));
  auto t = send_zerocopy(limiter);
  ASSERT_TRUE(t);
  complete_ok(limiter, *t, false);
  for (int p = 2; p <= 64; ++p) {
    ASSERT_EQ(limiter.decide(kSmall), kCopySize);
  }
  EXPECT_EQ(limiter.decide(kBig), kZerocopy);
}

TEST(PendingLimiter, ReasonsAreCheckedSizeThenLimitThenErrors) {
  PendingLimiter limiter(config(16));  // limit 4
  std::vector<Token> t = fill(limiter, 4);
  ASSERT_EQ(t.size(), 4U);
  // An error behind the oldest buffer: at the limit and over the error budget at once.
  EXPECT_EQ(complete_ok(limiter, t[3], /*success=*/false), 0U);
  const Verdict small = limiter.decide(kSmall);
  EXPECT_EQ(small, kCopySize) << printable(small);
  const Verdict big = limiter.decide(kBig);
  EXPECT_EQ(big, kCopyLimit) << printable(big);
  EXPECT_EQ(complete_ok(limiter, t[0]), 1U);
  EXPECT_EQ(limiter.decide(kBig), kCopyErrors);
}

TEST(PendingLimiter, StatsCountEachFallbackReason) {
  PendingLimiter limiter(config(16));       // limit 4
  std::vector<Token> t = fill(limiter, 4);  // 4 zerocopy
  ASSERT_EQ(t.size(), 4U);
  EXPECT_EQ(limiter.decide(kSmall), kCopySize);      // size 1
  EXPECT_EQ(limiter.decide(kSmall), kCopySize);      // size 2
  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);       // limit 1
  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);       // limit 2
  EXPECT_EQ(limiter.decide(kBig), kCopyLimit);       // limit 3
  EXPECT_EQ(complete_ok(limiter, t[0], true), 1U);   // success 1
  EXPECT_EQ(complete_ok(limiter, t[1], false), 1U);  // failed 1
  EXPECT_EQ(limiter.decide(kBig), kCopyErrors);      // errors 1
  EXPECT_EQ(limiter.decide(kBig), kCopyErrors);      // errors 2
  EXPECT_EQ(complete_ok(limiter, t[2], true), 1U);   // success 2

  Stats s = limiter.stats();
  EXPECT_EQ(s.packets, 11U);
  EXPECT_EQ(s.zerocopy_sent, 4U);
  EXPECT_EQ(s.zerocopy_success, 2U);
  EXPECT_EQ(s.zerocopy_failed, 1U);
  EXPECT_EQ(s.copied_size, 2U);
  EXPECT_EQ(s.copied_limit, 3U);
  EXPECT_EQ(s.copied_errors, 2U);
  EXPECT_EQ(s.stalls, 0U);

  PendingLimiter stalling(config(4, kDefaultMaxPending, /*fallback=*/false));  // limit 1
  ASSERT_TRUE(send_zerocopy(stalling));
  EXPECT_EQ(stalling.decide(kBig), kStall);
  EXPECT_EQ(stalling.decide(kSmall), kStall);
  s = stalling.stats();
  EXPECT_EQ(s.stalls, 2U);
  EXPECT_EQ(s.packets, 1U);
  EXPECT_EQ(s.copied_limit, 0U);
  EXPECT_EQ(s.copied_size, 0U);
}

TEST(PendingLimiter, InvalidConfigRejected) {
  for (std::uint32_t ring : {0U, 1U, 2U, 3U, 6U, 100U, 255U, 2048U, 4096U, 0xFFFFFFFFU}) {
    EXPECT_TRUE(config_problem(config(ring)).has_value()) << ring;
    try {
      PendingLimiter limiter(config(ring));
      ADD_FAILURE() << "ring_size " << ring << " accepted";
    } catch (const SetupError& e) {
      EXPECT_THAT(e.what(), HasSubstr("ring_size " + std::to_string(ring))) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("power of two in [4, 1024]"));
    }
  }
  try {
    PendingLimiter limiter(config(256, 0));
    ADD_FAILURE() << "max_pending 0 accepted";
  } catch (const SetupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("max_pending"));
  }
  for (std::uint32_t ring = kMinRingSize; ring <= kMaxRingSize; ring *= 2) {
    EXPECT_FALSE(config_problem(config(ring)).has_value()) << ring;
    EXPECT_FALSE(config_problem(config(ring, 1)).has_value()) << ring;
  }
}

TEST(PendingLimiter, PerPacketCallsDoNotAllocate) {
  PendingLimiter limiter(config(1024));
  std::vector<Token> tokens;
  tokens.reserve(limiter.limit());
  const std::size_t before = unetback::test_support::allocation_count();
  for (int round = 0; round < 20; ++round) {
    for (std::uint32_t i = 0; i < limiter.limit(); ++i) {
      if (limiter.decide(kBig) == kZerocopy) {
        auto t = limiter.begin();
        if (t) {
          tokens.push_back(*t);
        }
      }
    }
    (void)limiter.decide(kSmall);
    (void)limiter.decide(kBig);
    for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
      (void)limiter.complete(*it, (it - tokens.rbegin()) % 2 == 0);
    }
    tokens.clear();
  }
  const std::size_t after = unetback::test_support::allocation_count();
  EXPECT_EQ(after, before);
  EXPECT_GT(limiter.stats().zerocopy_sent, 0U);
}

}  // namespace
}  // namespace unetback::zerocopy
