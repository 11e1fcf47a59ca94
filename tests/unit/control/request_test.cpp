#include "common/control/request.hpp"

#include <gtest/gtest.h>

namespace unetback::control {
namespace {

Request ok(std::string_view line) {
  auto r = parse_request(line);
  if (auto* e = std::get_if<std::string>(&r)) {
    ADD_FAILURE() << "'" << line << "' refused: " << *e;
    return ListRequest{};
  }
  return std::get<Request>(r);
}

std::string err(std::string_view line) {
  auto r = parse_request(line);
  if (!std::holds_alternative<std::string>(r)) {
    ADD_FAILURE() << "'" << line << "' accepted";
    return {};
  }
  return std::get<std::string>(r);
}

TEST(ControlRequest, ParsesEveryVerb) {
  EXPECT_EQ(ok("list"), Request{ListRequest{}});
  EXPECT_EQ(ok("tunables"), Request{TunablesRequest{}});
  EXPECT_EQ(ok("stats"), Request{StatsRequest{}});
  EXPECT_EQ(ok("stats 5/0"), (Request{StatsRequest{VifId{DomId{5}, DevId{0}}}}));
  EXPECT_EQ(ok("rings 12/3"), (Request{RingsRequest{VifId{DomId{12}, DevId{3}}}}));
  EXPECT_EQ(ok("get max-queues"), Request{GetRequest{"max-queues"}});
  EXPECT_EQ(ok("set copy-batch 32"), (Request{SetRequest{"copy-batch", "32"}}));
}

TEST(ControlRequest, ToleratesExtraBlanksAndCrLf) {
  EXPECT_EQ(ok("  list  "), Request{ListRequest{}});
  EXPECT_EQ(ok("list\r"), Request{ListRequest{}});
  EXPECT_EQ(ok("set\tthreads \t 4"), (Request{SetRequest{"threads", "4"}}));
}

TEST(ControlRequest, RefusesMalformedLines) {
  EXPECT_EQ(err(""), "empty request");
  EXPECT_EQ(err("   "), "empty request");
  EXPECT_NE(err("frobnicate").find("unknown request 'frobnicate'"), std::string::npos);
  EXPECT_EQ(err("list extra"), "'list': too many arguments");
  EXPECT_EQ(err("rings"), "'rings': missing argument");
  EXPECT_EQ(err("get"), "'get': missing argument");
  EXPECT_EQ(err("set threads"), "'set': missing argument");
  EXPECT_EQ(err("set threads 4 5"), "'set': too many arguments");
  EXPECT_EQ(err("stats 5/0 6/0"), "'stats': too many arguments");
  EXPECT_EQ(err("stats five/0"), "'five/0' is not <domid>/<devid>");
  EXPECT_EQ(err("rings 5"), "'5' is not <domid>/<devid>");
  EXPECT_EQ(err("rings 5/-1"), "'5/-1' is not <domid>/<devid>");
  EXPECT_EQ(err(std::string("list\0", 5)), "request contains control characters");
  EXPECT_EQ(err("get \x1b[2J"), "request contains control characters");
  EXPECT_EQ(err("LIST").substr(0, 15), "unknown request");
}

TEST(VifId, ParsesStrictly) {
  EXPECT_EQ(format_vif_id(*parse_vif_id("5/0")), "5/0");
  EXPECT_EQ(format_vif_id(*parse_vif_id("32751/4294967295")), "32751/4294967295");
  for (const char* bad :
       {"", "5", "5/", "/0", "5/0/1", "a/0", "5/b", "-1/0", "32752/0", " 5/0", "5/0 ", "5//0"})
    EXPECT_FALSE(parse_vif_id(bad).has_value()) << bad;
}

}  // namespace
}  // namespace unetback::control
