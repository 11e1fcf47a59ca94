// netfront-shim's command line: the issue-7 experiment knobs (--rx-refill, --tx-frags) and
// their strict parsing.
#include "frontend-shim/shim_options.hpp"

#include <gtest/gtest.h>
#include <initializer_list>
#include <vector>

namespace unetback::shim {
namespace {

ParseOutcome parse(std::initializer_list<std::string_view> extra) {
  std::vector<std::string_view> args{"--hypervisor", "sim:/tmp/w"};
  args.insert(args.end(), extra);
  return parse_shim_options(args);
}

// By value: the ParseOutcome is a temporary of the caller's expression.
ShimOptions options_of(const ParseOutcome& p) {
  if (const auto* e = std::get_if<UsageError>(&p)) ADD_FAILURE() << e->message;
  const auto* o = std::get_if<ShimOptions>(&p);
  EXPECT_NE(o, nullptr);
  return o ? *o : ShimOptions{};
}

std::string usage_error(const ParseOutcome& p) {
  const auto* e = std::get_if<UsageError>(&p);
  EXPECT_NE(e, nullptr);
  return e ? e->message : std::string();
}

TEST(ShimOptions, DefaultsAreSeed002RefillAndNormalTxLayout) {
  const ShimOptions o = options_of(parse({}));
  EXPECT_EQ(o.rx_refill, netfront::RxRefillRule::early);
  EXPECT_FALSE(o.tx_frags.has_value());
}

TEST(ShimOptions, RxRefillTakesEitherRuleInBothSpellings) {
  EXPECT_EQ(options_of(parse({"--rx-refill", "half-ring"})).rx_refill,
            netfront::RxRefillRule::half_ring);
  EXPECT_EQ(options_of(parse({"--rx-refill=half-ring"})).rx_refill,
            netfront::RxRefillRule::half_ring);
  EXPECT_EQ(options_of(parse({"--rx-refill=early"})).rx_refill, netfront::RxRefillRule::early);
}

TEST(ShimOptions, RxRefillRejectsOtherRules) {
  for (const char* bad : {"half_ring", "HALF-RING", "", "late", "early,half-ring"}) {
    EXPECT_EQ(usage_error(parse({"--rx-refill", bad})),
              "bad value '" + std::string(bad) + "' for --rx-refill");
  }
  EXPECT_EQ(usage_error(parse({"--rx-refill"})), "--rx-refill needs a value");
}

TEST(ShimOptions, TxFragsAcceptsSizesFrom64To4096) {
  for (std::uint32_t size : {64u, 65u, 1000u, 4095u, 4096u}) {
    const std::string text = std::to_string(size);
    EXPECT_EQ(options_of(parse({"--tx-frags", text})).tx_frags, size);
  }
  EXPECT_EQ(options_of(parse({"--tx-frags=2048"})).tx_frags, 2048u);
}

TEST(ShimOptions, TxFragsRejectsSizesOutsideAPieceOfAPage) {
  for (const char* bad : {"0", "63", "4097", "65536", "-64", "1k", "64 ", "", "0x100"}) {
    EXPECT_EQ(usage_error(parse({"--tx-frags", bad})),
              "bad value '" + std::string(bad) + "' for --tx-frags");
  }
  EXPECT_EQ(usage_error(parse({"--tx-frags"})), "--tx-frags needs a value");
}

TEST(ShimOptions, TxFragsNeedsScatterGather) {
  EXPECT_EQ(usage_error(parse({"--no-sg", "--tx-frags", "1024"})),
            "--tx-frags needs scatter-gather (drop --no-sg)");
}

TEST(ShimOptions, UsageDocumentsTheExperimentKnobs) {
  const std::string u = shim_usage();
  EXPECT_NE(u.find("--rx-refill early|half-ring"), std::string::npos);
  EXPECT_NE(u.find("--tx-frags SIZE"), std::string::npos);
  EXPECT_NE(u.find("tx_frags_fallback"), std::string::npos);
}

TEST(ShimOptions, RssAndAMappingFileWhichImpliesIt) {
  EXPECT_FALSE(options_of(parse({})).rss);
  EXPECT_TRUE(options_of(parse({"--rss"})).rss);
  const ShimOptions o = options_of(parse({"--rss-mapping-file", "/tmp/map"}));
  EXPECT_TRUE(o.rss);
  EXPECT_EQ(o.rss_mapping_file, "/tmp/map");
  EXPECT_NE(usage_error(parse({"--rss=1"})), "");
  EXPECT_NE(usage_error(parse({"--rss-mapping-file="})), "");
}

TEST(ShimOptions, XdpHeadroomAndAFileReReadWhileRunning) {
  EXPECT_EQ(options_of(parse({})).xdp_headroom, 0U);
  EXPECT_FALSE(options_of(parse({})).xdp_headroom_file.has_value());
  EXPECT_EQ(options_of(parse({"--xdp-headroom", "256"})).xdp_headroom, 256U);
  EXPECT_EQ(options_of(parse({"--xdp-headroom=32767"})).xdp_headroom, 32767U);
  EXPECT_EQ(options_of(parse({"--xdp-headroom-file", "/tmp/xdp"})).xdp_headroom_file, "/tmp/xdp");
  for (const char* bad : {"32768", "-1", "0x100", "", " 256", "256 "})
    EXPECT_NE(usage_error(parse({"--xdp-headroom", bad})), "") << "'" << bad << "'";
  EXPECT_NE(usage_error(parse({"--xdp-headroom-file="})), "");
  const std::string u = shim_usage();
  EXPECT_NE(u.find("--xdp-headroom N"), std::string::npos);
  EXPECT_NE(u.find("Reconfiguring (7)"), std::string::npos);
}

TEST(ShimOptions, ResumeFileIsAPathAndWithoutItNoSuspendIsHonoured) {
  EXPECT_FALSE(options_of(parse({})).resume_file.has_value());
  EXPECT_EQ(options_of(parse({"--resume-file", "/w/guest-g1.resume"})).resume_file,
            "/w/guest-g1.resume");
  EXPECT_NE(usage_error(parse({"--resume-file="})), "");
  EXPECT_NE(usage_error(parse({"--resume-file"})), "");
  EXPECT_NE(shim_usage().find("SIGUSR1"), std::string::npos);
}

TEST(XdpHeadroomFile, OneDecimalUpToTheProtocolCapWithWhitespaceAround) {
  EXPECT_EQ(parse_xdp_headroom("256"), 256U);
  EXPECT_EQ(parse_xdp_headroom("  0\n"), 0U);
  EXPECT_EQ(parse_xdp_headroom("32767\r\n"), 32767U);
  EXPECT_FALSE(parse_xdp_headroom(""));
  EXPECT_FALSE(parse_xdp_headroom("\n"));
  EXPECT_FALSE(parse_xdp_headroom("32768"));
  EXPECT_FALSE(parse_xdp_headroom("256 512"));
  EXPECT_FALSE(parse_xdp_headroom("-5"));
  EXPECT_FALSE(parse_xdp_headroom("x256"));
}

TEST(RssMapping, QueueNumbersSeparatedByWhitespaceOrCommas) {
  EXPECT_EQ(parse_rss_mapping("0 1 2 3", 4), (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(parse_rss_mapping("3,2,\n1\t0\n", 4), (std::vector<std::uint32_t>{3, 2, 1, 0}));
}

TEST(RssMapping, RefusesEmptyTablesQueuesOutOfRangeJunkAndMoreThan128) {
  EXPECT_FALSE(parse_rss_mapping("", 4));
  EXPECT_FALSE(parse_rss_mapping(" , ", 4));
  EXPECT_FALSE(parse_rss_mapping("0 4", 4));
  EXPECT_FALSE(parse_rss_mapping("0 -1", 4));
  EXPECT_FALSE(parse_rss_mapping("0 x", 4));
  EXPECT_FALSE(parse_rss_mapping("99999999999999999999", 4));
  std::string big;
  for (int i = 0; i < 129; ++i) big += "0 ";
  EXPECT_FALSE(parse_rss_mapping(big, 4));
  big.resize(big.size() - 2);
  EXPECT_TRUE(parse_rss_mapping(big, 4));
}

}  // namespace
}  // namespace unetback::shim
