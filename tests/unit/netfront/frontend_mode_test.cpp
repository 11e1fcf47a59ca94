// netfront-shim --mode: what each frontend changes (win-xenvif, Mini-OS), the command-line
// rules that go with it, and the xenvif TX chains' length.
#include "frontend-shim/frontend_mode.hpp"

#include <gtest/gtest.h>
#include <vector>

#include "common/net/frame_builder.hpp"
#include "frontend-shim/shim_options.hpp"
#include "frontend-shim/tx_frag_layout.hpp"

namespace unetback::shim {
namespace {

ParseOutcome parse(std::vector<std::string_view> extra) {
  std::vector<std::string_view> args{"--hypervisor", "sim:/tmp/w"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_shim_options(args);
}

/// The options, or a failure and defaults.
ShimOptions mode_options(std::vector<std::string_view> extra) {
  const ParseOutcome p = parse(std::move(extra));
  if (const auto* e = std::get_if<UsageError>(&p)) ADD_FAILURE() << e->message;
  const auto* o = std::get_if<ShimOptions>(&p);
  return o ? *o : ShimOptions{};
}

TEST(FrontendMode, NamesRoundTripAndNothingElseParses) {
  for (auto m : {FrontendMode::linux_netfront, FrontendMode::xenvif, FrontendMode::minimal})
    EXPECT_EQ(parse_frontend_mode(frontend_mode_name(m)), m);
  EXPECT_FALSE(parse_frontend_mode("windows"));
  EXPECT_FALSE(parse_frontend_mode("Linux"));
  EXPECT_FALSE(parse_frontend_mode(""));
}

TEST(FrontendMode, LinuxIsTodaysBehaviour) {
  const ModeRules r = mode_rules(FrontendMode::linux_netfront);
  EXPECT_FALSE(r.always_num_queues);
  EXPECT_TRUE(r.rx_notify);
  EXPECT_TRUE(r.feature_keys);
  EXPECT_FALSE(r.rx_checks);
  EXPECT_FALSE(r.tx_hash_extras);
  EXPECT_EQ(r.tx_chain_piece, 0U);
  EXPECT_EQ(r.state_wait, std::chrono::seconds(10));
  const ShimOptions os = mode_options({});
  const ShimOptions* o = &os;
  EXPECT_EQ(o->mode, FrontendMode::linux_netfront);
  EXPECT_EQ(o->connect_timeout_ms, 10000U);
}

TEST(FrontendMode, XenvifFollowsTheWindowsDriversRules) {
  const ModeRules r = mode_rules(FrontendMode::xenvif);
  EXPECT_TRUE(r.always_num_queues);
  EXPECT_TRUE(r.rx_checks);
  EXPECT_TRUE(r.tx_hash_extras);
  EXPECT_TRUE(r.mcast_extras);
  EXPECT_TRUE(r.per_state_wait);
  EXPECT_EQ(r.state_wait, std::chrono::seconds(120));
  const ShimOptions os = mode_options({"--mode", "xenvif"});
  const ShimOptions* o = &os;
  EXPECT_EQ(o->connect_timeout_ms, 120000U);
  const ShimOptions ts = mode_options({"--mode=xenvif", "--connect-timeout-ms", "5"});
  const ShimOptions* t = &ts;
  EXPECT_EQ(t->connect_timeout_ms, 5U);  // the command line wins
}

TEST(FrontendMode, XenvifChainsOfA64KibTsoFrameUseEighteenSlotsAtMost) {
  const std::uint32_t piece = mode_rules(FrontendMode::xenvif).tx_chain_piece;
  net::FrameSpec spec;
  spec.payload_len = wire::kMaxTxSize - 14 - 20 - 20;  // the largest TCP/IPv4 frame netif takes
  const auto frame = net::build_frame(spec);
  ASSERT_EQ(frame.size(), wire::kMaxTxSize);
  auto layout = plan_tx_frags(frame, piece);
  ASSERT_TRUE(layout) << layout.error().message();
  EXPECT_EQ(layout->count, 18U);  // XEN_NETBK_LEGACY_SLOTS_MAX, and no more
  spec.payload_len = 1448;
  auto small = plan_tx_frags(net::build_frame(spec), piece);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->count, 2U);  // headers, then the payload
}

TEST(FrontendMode, MinimalIsMiniOsNoRxNotifyNoSgOneQueue) {
  const ModeRules r = mode_rules(FrontendMode::minimal);
  EXPECT_FALSE(r.rx_notify);
  EXPECT_FALSE(r.sg_allowed);
  EXPECT_FALSE(r.feature_keys);
  EXPECT_FALSE(r.multi_queue);
  EXPECT_FALSE(r.split_event_channels);
  const ShimOptions os = mode_options({"--mode", "minimal"});
  const ShimOptions* o = &os;
  EXPECT_FALSE(o->sg);
  for (const auto& bad :
       std::vector<std::vector<std::string_view>>{{"--mode", "minimal", "--queues", "2"},
                                                  {"--mode", "minimal", "--mtu", "9000"},
                                                  {"--mode", "minimal", "--tx-frags", "512"},
                                                  {"--mode", "minimal", "--rss"},
                                                  {"--mode", "mini"},
                                                  {"--mode"}}) {
    const auto p = parse(bad);
    EXPECT_TRUE(std::holds_alternative<UsageError>(p)) << bad.back();
  }
}

TEST(FrontendMode, TheUsageTextDocumentsTheModes) {
  const std::string u = shim_usage();
  EXPECT_NE(u.find("--mode linux|xenvif|minimal"), std::string::npos);
  EXPECT_NE(u.find("rx_protocol_errors"), std::string::npos);
}

}  // namespace
}  // namespace unetback::shim
