// xl's vif rate grammar (libxlu_vif.c) and libxl's "<bytes>,<usecs>" value.
#include "tools/xl/rate.hpp"

#include <gtest/gtest.h>

namespace unetback::toolstack {
namespace {

VifRate rate_of(std::string_view text) {
  auto r = parse_vif_rate(text);
  EXPECT_TRUE(r.has_value()) << text << ": " << r.error().message();
  return r ? *r : VifRate{};
}

std::error_code fails(std::string_view text) {
  auto r = parse_vif_rate(text);
  EXPECT_FALSE(r.has_value()) << text << " parsed as " << (r ? format_vif_rate(*r) : "");
  return r.error();
}

TEST(VifRate, MegabitsPerSecondWithMillisecondIntervalBecomesBytesPerInterval) {
  // 10 Mb/s = 1,250,000 B/s; over 50 ms: 62,500 bytes.
  EXPECT_EQ(rate_of("10Mb/s@50ms"), (VifRate{62'500, 50'000}));
  EXPECT_EQ(format_vif_rate(rate_of("10Mb/s@50ms")), "62500,50000");
}

TEST(VifRate, IntervalDefaultsToFiftyMilliseconds) {
  EXPECT_EQ(rate_of("1MB/s"), (VifRate{50'000, 50'000}));
}

TEST(VifRate, UnitsAreDecimalAndLowerCaseBMeansBits) {
  EXPECT_EQ(rate_of("8b/s@1s").bytes_per_interval, 1U);
  EXPECT_EQ(rate_of("1000B/s@1s").bytes_per_interval, 1000U);
  EXPECT_EQ(rate_of("1KB/s@1s").bytes_per_interval, 1000U);
  EXPECT_EQ(rate_of("8Kb/s@1s").bytes_per_interval, 1000U);
  EXPECT_EQ(rate_of("1GB/s@1s").bytes_per_interval, 1'000'000'000U);
  EXPECT_EQ(rate_of("8Gb/s@1s").bytes_per_interval, 1'000'000'000U);
  EXPECT_EQ(rate_of("100Mb/s@20ms").bytes_per_interval, 250'000U);
}

TEST(VifRate, IntervalSuffixes) {
  EXPECT_EQ(rate_of("1MB/s@2s").interval_usecs, 2'000'000U);
  EXPECT_EQ(rate_of("1MB/s@2").interval_usecs, 2'000'000U);  // no unit: seconds
  EXPECT_EQ(rate_of("1MB/s@20ms").interval_usecs, 20'000U);
  EXPECT_EQ(rate_of("1MB/s@20m").interval_usecs, 20'000U);  // the "s" is optional
  EXPECT_EQ(rate_of("1MB/s@500us").interval_usecs, 500U);
  EXPECT_EQ(rate_of("1MB/s@500u").interval_usecs, 500U);
  EXPECT_EQ(rate_of("1MB/s@500us").bytes_per_interval, 500U);
}

TEST(VifRate, RawLibxlValueIsAcceptedAsIs) {
  EXPECT_EQ(rate_of("62500,50000"), (VifRate{62'500, 50'000}));
  EXPECT_EQ(rate_of("1,1"), (VifRate{1, 1}));
}

TEST(VifRate, MalformedTextIsRejected) {
  for (const char* bad : {"",
                          "10",
                          "10M",
                          "10Mb",
                          "10mb/s",
                          "10Tb/s",
                          "10 Mb/s",
                          "Mb/s",
                          "-1Mb/s",
                          "10Mb/s@",
                          "10Mb/s@ms",
                          "10Mb/s@5ns",
                          "10Mb/s@5ms@5ms",
                          "10Mb/s@5mss",
                          "0x10Mb/s",
                          "1,",
                          ",1",
                          "1,2,3",
                          "1,2x",
                          "a,b"})
    EXPECT_EQ(fails(bad), std::errc::invalid_argument) << bad;
}

TEST(VifRate, ZeroRateOrIntervalIsRejected) {
  EXPECT_TRUE(fails("0Mb/s"));
  EXPECT_TRUE(fails("1Mb/s@0ms"));
  EXPECT_TRUE(fails("0,50000"));
  EXPECT_TRUE(fails("100,0"));
}

TEST(VifRate, RateThatRoundsToZeroBytesPerIntervalIsRefused) {
  // xl writes "0,1" for these, and netback then never refills: TX stops after one burst.
  EXPECT_EQ(fails("1b/s@1us"), std::errc::result_out_of_range);
  EXPECT_EQ(fails("1Mb/s@1us"), std::errc::result_out_of_range);  // 0.125 bytes per µs
  EXPECT_EQ(fails("7b/s"), std::errc::result_out_of_range);       // under a byte per second
  EXPECT_EQ(fails("999999B/s@1us"), std::errc::result_out_of_range);
  EXPECT_EQ(fails("0,1"), std::errc::result_out_of_range);
  // One byte per interval is the least that is accepted.
  EXPECT_EQ(rate_of("1MB/s@1us"), (VifRate{1, 1}));
  EXPECT_EQ(rate_of("8b/s@1s"), (VifRate{1, 1'000'000}));
  EXPECT_NE(vif_rate_error_text(std::make_error_code(std::errc::result_out_of_range))
                .find("0 bytes per interval"),
            std::string::npos);
}

TEST(VifRate, NumbersBeyondXlLimitsOverflow) {
  // Each number is at most UINT32_MAX before its multiplier (xl's strtoull check).
  EXPECT_EQ(rate_of("4294967295B/s@1s").bytes_per_interval, 4294967295U);
  EXPECT_EQ(fails("4294967296B/s"), std::errc::value_too_large);
  EXPECT_EQ(fails("1MB/s@4294967296us"), std::errc::value_too_large);
  // The interval in microseconds must fit 32 bits: 4295 s does not.
  EXPECT_EQ(rate_of("1MB/s@4294s").interval_usecs, 4'294'000'000U);
  EXPECT_EQ(fails("1MB/s@4295s"), std::errc::value_too_large);
  EXPECT_EQ(fails("1,4294967296"), std::errc::value_too_large);
}

TEST(VifRate, LargestRateTimesLongestIntervalStillFits) {
  // 4294967295 GB/s over 4294 s: < 2^64 bytes/s * usecs? 4.29e18 * 4.29e9 overflows: refused.
  EXPECT_EQ(fails("4294967295GB/s@4294s"), std::errc::value_too_large);
  // 4294967295 GB/s over 1 ms fits (4.29e18 * 1e3 = 4.29e21 > 1.8e19): also refused.
  EXPECT_EQ(fails("4294967295GB/s@1ms"), std::errc::value_too_large);
  EXPECT_EQ(rate_of("1GB/s@4294s").bytes_per_interval, 4'294'000'000'000ULL);
}

}  // namespace
}  // namespace unetback::toolstack
