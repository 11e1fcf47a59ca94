// unetback-udpflow's command line: strict, with clear errors (exit 2 in main).
#include "tools/udpflow/udpflow_options.hpp"

#include <gtest/gtest.h>
#include <initializer_list>
#include <vector>

namespace unetback::udpflow {
namespace {

ParseOutcome parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  return parse_udpflow_args(v);
}

std::string error_of(const ParseOutcome& p) {
  const auto* e = std::get_if<UsageError>(&p);
  EXPECT_NE(e, nullptr);
  return e ? e->message : std::string();
}

TEST(UdpflowOptions, SendTakesDestinationSizeAndDuration) {
  auto p = parse({"send", "--to", "10.0.0.2:5001", "--size", "1", "--seconds", "10"});
  const auto* s = std::get_if<SendOptions>(&p);
  ASSERT_NE(s, nullptr) << error_of(p);
  EXPECT_EQ(s->to, (IpAddress{"10.0.0.2", false}));
  EXPECT_EQ(s->port, 5001);
  EXPECT_EQ(s->size, 1u);
  EXPECT_DOUBLE_EQ(s->seconds, 10);
  EXPECT_FALSE(s->pps.has_value());
  EXPECT_FALSE(s->json);
}

TEST(UdpflowOptions, SendAcceptsPacingJsonInlineValuesAndIpv6) {
  auto p = parse(
      {"send", "--to=[fd00::2]:9", "--size=65507", "--seconds=0.3", "--pps", "80000", "--json"});
  const auto* s = std::get_if<SendOptions>(&p);
  ASSERT_NE(s, nullptr) << error_of(p);
  EXPECT_EQ(s->to, (IpAddress{"fd00::2", true}));
  EXPECT_EQ(s->port, 9);
  EXPECT_EQ(s->size, kMaxPayload);
  EXPECT_DOUBLE_EQ(s->seconds, 0.3);
  EXPECT_EQ(s->pps, 80000u);
  EXPECT_TRUE(s->json);
}

TEST(UdpflowOptions, RecvTakesPortDurationAndOptionalBind) {
  auto p = parse({"recv", "--port", "5001", "--seconds", "5"});
  const auto* r = std::get_if<RecvOptions>(&p);
  ASSERT_NE(r, nullptr) << error_of(p);
  EXPECT_EQ(r->port, 5001);
  EXPECT_DOUBLE_EQ(r->seconds, 5);
  EXPECT_FALSE(r->bind.has_value());
  EXPECT_FALSE(r->from_start);
  EXPECT_DOUBLE_EQ(r->wait, 30);

  p = parse({"recv", "--port=7", "--seconds=1.5", "--bind", "::1", "--from-start", "--json"});
  r = std::get_if<RecvOptions>(&p);
  ASSERT_NE(r, nullptr) << error_of(p);
  EXPECT_EQ(r->bind, (IpAddress{"::1", true}));
  EXPECT_TRUE(r->from_start);
  EXPECT_TRUE(r->json);

  p = parse({"recv", "--port=7", "--seconds=1", "--wait", "2.5"});
  r = std::get_if<RecvOptions>(&p);
  ASSERT_NE(r, nullptr) << error_of(p);
  EXPECT_DOUBLE_EQ(r->wait, 2.5);
}

TEST(UdpflowOptions, HelpAnywhere) {
  EXPECT_TRUE(std::holds_alternative<HelpRequested>(parse({"--help"})));
  EXPECT_TRUE(std::holds_alternative<HelpRequested>(parse({"send", "-h"})));
  EXPECT_TRUE(std::holds_alternative<HelpRequested>(parse({"recv", "--port", "1", "--help"})));
}

TEST(UdpflowOptions, ModeIsRequiredAndChecked) {
  EXPECT_EQ(error_of(parse({})), "missing mode (send or recv)");
  EXPECT_EQ(error_of(parse({"blast"})), "unknown mode 'blast' (send or recv)");
  EXPECT_EQ(error_of(parse({"--to", "1.2.3.4:5"})), "unknown mode '--to' (send or recv)");
}

TEST(UdpflowOptions, RequiredOptionsAreNamed) {
  EXPECT_EQ(error_of(parse({"send", "--size", "1", "--seconds", "1"})),
            "--to is required for send");
  EXPECT_EQ(error_of(parse({"send", "--to", "1.2.3.4:5", "--seconds", "1"})),
            "--size is required for send");
  EXPECT_EQ(error_of(parse({"send", "--to", "1.2.3.4:5", "--size", "1"})),
            "--seconds is required for send");
  EXPECT_EQ(error_of(parse({"recv", "--seconds", "1"})), "--port is required for recv");
  EXPECT_EQ(error_of(parse({"recv", "--port", "1"})), "--seconds is required for recv");
}

TEST(UdpflowOptions, OptionsOfTheOtherModeAreRejected) {
  EXPECT_EQ(error_of(parse({"send", "--port", "1"})), "unknown option --port for send");
  EXPECT_EQ(error_of(parse({"recv", "--to", "1.2.3.4:5"})), "unknown option --to for recv");
  EXPECT_EQ(error_of(parse({"send", "--from-start"})), "unknown option --from-start for send");
  EXPECT_EQ(error_of(parse({"recv", "--verbose"})), "unknown option --verbose for recv");
}

TEST(UdpflowOptions, RepeatsStrayArgumentsAndValuedFlagsAreRejected) {
  EXPECT_EQ(error_of(parse({"recv", "--port", "1", "--port", "2", "--seconds", "1"})),
            "--port given twice");
  EXPECT_EQ(error_of(parse({"recv", "5001"})), "unexpected argument '5001'");
  EXPECT_EQ(error_of(parse({"recv", "--json=yes"})), "--json takes no value");
  EXPECT_EQ(error_of(parse({"recv", "--port"})), "--port needs a value");
  EXPECT_EQ(
      error_of(parse({"recv", "--port", "1", "--seconds", "1", "--from-start", "--wait", "3"})),
      "--wait applies only without --from-start");
}

TEST(UdpflowOptions, SizesOutsideOneTo65507AreRejected) {
  for (const char* bad : {"0", "65508", "-1", "1e3", "", " 1", "0x10", "99999999999999999999"})
    EXPECT_EQ(error_of(parse({"send", "--to", "1.2.3.4:5", "--size", bad, "--seconds", "1"})),
              "bad value '" + std::string(bad) + "' for --size");
}

TEST(UdpflowOptions, BadEndpointsAreRejected) {
  for (const char* bad :
       {"1.2.3.4", "1.2.3.4:", "1.2.3.4:0", "1.2.3.4:65536", "host:80", "fd00::2:80", "[fd00::2]80",
        "[1.2.3.4]:80", "[fd00::2]:", ":80", "1.2.3:80", "1.2.3.4:80x"})
    EXPECT_EQ(error_of(parse({"send", "--to", bad, "--size", "1", "--seconds", "1"})),
              "bad value '" + std::string(bad) + "' for --to")
        << bad;
}

TEST(UdpflowOptions, SecondsArePositivePlainDecimals) {
  EXPECT_EQ(parse_seconds("0.3"), 0.3);
  EXPECT_EQ(parse_seconds("86400"), 86400.0);
  for (const char* bad : {"0", "0.0", "-1", "1e2", "inf", "nan", "", "86401", "1s", ".", "+1"})
    EXPECT_FALSE(parse_seconds(bad).has_value()) << bad;
}

TEST(UdpflowOptions, PpsAndPortAndBindAreRangeChecked) {
  EXPECT_EQ(
      error_of(parse({"send", "--to", "1.2.3.4:5", "--size", "1", "--seconds", "1", "--pps", "0"})),
      "bad value '0' for --pps");
  EXPECT_EQ(error_of(parse({"recv", "--port", "0", "--seconds", "1"})), "bad value '0' for --port");
  EXPECT_EQ(error_of(parse({"recv", "--port", "1", "--seconds", "1", "--bind", "localhost"})),
            "bad value 'localhost' for --bind");
}

TEST(UdpflowOptions, UsageNamesBothModesAndExitCodes) {
  const std::string u = udpflow_usage();
  EXPECT_NE(u.find("unetback-udpflow send --to IP:PORT"), std::string::npos);
  EXPECT_NE(u.find("unetback-udpflow recv --port P"), std::string::npos);
  EXPECT_NE(u.find("2 usage error"), std::string::npos);
}

}  // namespace
}  // namespace unetback::udpflow
