// unetback-ctl's pure parts: the JSON reader (against the daemon's writer, and hostile text)
// and the tables.
#include <gtest/gtest.h>

#include "common/control/json_writer.hpp"
#include "tools/ctl/ctl_format.hpp"
#include "tools/ctl/json_value.hpp"

namespace unetback::ctl {
namespace {

TEST(CtlJson, ReadsWhatTheDaemonWrites) {
  control::JsonWriter w;
  const std::string nasty = std::string("q\"b\\s/\n\t\x01 caf\xc3\xa9 \xf0\x9f\x98\x80");
  w.begin_object().key("s").value(nasty).key("n").value(std::uint64_t{18446744073709551615ULL});
  w.key("neg").value(-5).key("t").value(true).key("z").null();
  w.key("a").begin_array().value("x").begin_object().end_object().end_array().end_object();
  auto v = parse_json(w.str());
  ASSERT_TRUE(v.has_value()) << w.str();
  EXPECT_EQ(field(*v, "s"), nasty);
  EXPECT_EQ(field(*v, "n"), "18446744073709551615") << "64-bit counters print exactly";
  EXPECT_EQ(field(*v, "neg"), "-5");
  EXPECT_EQ(field(*v, "t"), "true");
  EXPECT_EQ(field(*v, "z"), "-");
  EXPECT_EQ(field(*v, "missing"), "-");
  ASSERT_NE(v->get("a"), nullptr);
  ASSERT_NE(v->get("a")->as_array(), nullptr);
  EXPECT_EQ(v->get("a")->as_array()->size(), 2U);
}

TEST(CtlJson, DecodesUnicodeEscapes) {
  auto v = parse_json(R"(["\u00e9", "\ud83d\ude00", "\ud800x", "\u0041"])");
  ASSERT_TRUE(v.has_value());
  const auto& a = *v->as_array();
  EXPECT_EQ(a[0].text(), "\xc3\xa9");
  EXPECT_EQ(a[1].text(), "\xf0\x9f\x98\x80");
  EXPECT_EQ(a[2].text(), "\xef\xbf\xbdx") << "a lone surrogate becomes U+FFFD";
  EXPECT_EQ(a[3].text(), "A");
}

TEST(CtlJson, RefusesMalformedDocuments) {
  for (const char* bad :
       {"", "{", "}", "[1,]", "{\"a\"}", "{\"a\":}", "{a:1}", "01", "1.", "-", "\"abc", "\"\\x\"",
        "\"\\u12\"", "tru", "nul", "[1 2]", "{} {}", "\"a\nb\"", "[\"\\ud800\\u00\"]"}) {
    std::string error;
    EXPECT_FALSE(parse_json(bad, &error).has_value()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  std::string deep(1000, '[');
  EXPECT_FALSE(parse_json(deep).has_value()) << "depth is bounded";
}

TEST(CtlFormat, ListTable) {
  auto v = parse_json(
      R"({"vifs":[{"vif":"5/0","state":"Connected","frontend_state":"Connected","tap":"vif5.0",)"
      R"("connected":true,"carrier":true,"queues":2,"adopted":"recovered"},{"vif":"12/1",)"
      R"("state":"InitWait","frontend_state":null,"tap":"vif12.1","connected":false,)"
      R"("carrier":false,"queues":0,"adopted":"fresh"}]})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(format_reply("list", *v),
            "VIF   STATE      FRONTEND   TAP      CONNECTED  CARRIER  QUEUES  ADOPTED\n"
            "5/0   Connected  Connected  vif5.0   yes        up       2       recovered\n"
            "12/1  InitWait   -          vif12.1  no         down     0       fresh\n");
  EXPECT_EQ(format_reply("list", *parse_json(R"({"vifs":[]})")), "no vifs\n");
}

TEST(CtlFormat, StatsTableHasOneColumnPerCounter) {
  auto v = parse_json(
      R"({"vifs":[{"vif":"5/0","queues":[{"queue":0,"counters":{"rx_packets":1,"tx_packets":2}},)"
      R"({"queue":1,"counters":{"rx_packets":3,"tx_packets":4}}]}]})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(format_reply("stats", *v),
            "VIF  QUEUE  rx_packets  tx_packets\n"
            "5/0  0      1           2\n"
            "5/0  1      3           4\n");
}

TEST(CtlFormat, RingsTable) {
  auto v = parse_json(
      R"({"vif":"5/0","connected":true,"queues":[{"queue":0,"tx":{"req_prod":10,"req_event":11,)"
      R"("rsp_prod":9,"rsp_event":10,"req_cons":10,"rsp_prod_pvt":9},"rx":{"req_prod":20,)"
      R"("req_event":21,"rsp_prod":19,"rsp_event":20,"req_cons":20,"rsp_prod_pvt":19}}]})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(format_reply("rings", *v),
            "vif 5/0 (connected)\n"
            "QUEUE  RING  REQ_PROD  REQ_CONS  REQ_EVENT  RSP_PROD_PVT  RSP_PROD  RSP_EVENT\n"
            "0      tx    10        10        11         9             9         10\n"
            "0      rx    20        20        21         19            19        20\n");
}

TEST(CtlFormat, TunablesAndGet) {
  auto v = parse_json(
      R"({"tunables":[{"name":"max-queues","value":"4","min":1,"max":16,"help":"queues"},)"
      R"({"name":"rx-coalesce","value":"full","choices":["legacy","full"],"help":"packing"}]})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(format_reply("tunables", *v),
            "NAME         VALUE  RANGE        DESCRIPTION\n"
            "max-queues   4      1..16        queues\n"
            "rx-coalesce  full   legacy|full  packing\n");
  EXPECT_EQ(format_reply("get", *parse_json(R"({"name":"threads","value":"2"})")), "threads = 2\n");
}

}  // namespace
}  // namespace unetback::ctl
