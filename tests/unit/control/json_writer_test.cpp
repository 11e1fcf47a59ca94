#include "common/control/json_writer.hpp"

#include <gtest/gtest.h>

namespace unetback::control {
namespace {

TEST(JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(json_quote("a\\b"), "\"a\\\\b\"");
  EXPECT_EQ(json_quote("l1\nl2\r\t"), "\"l1\\nl2\\r\\t\"");
  EXPECT_EQ(json_quote("\b\f"), "\"\\b\\f\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(json_quote(std::string("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(json_quote("/"), "\"/\"");
}

TEST(JsonWriter, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(json_quote("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json_quote("\xc3"), "\"\\ufffd\"");                                   // truncated
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");                        // overlong '/'
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");             // surrogate
  EXPECT_EQ(json_quote("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // > U+10FFFF
  EXPECT_EQ(json_quote("a\xe2\x82"), "\"a\\ufffd\\ufffd\"");
}

TEST(JsonWriter, SeparatesMembersAndElementsWithCommas) {
  JsonWriter w;
  w.begin_object();
  w.key("a").value(std::uint64_t{1});
  w.key("b").begin_array().value("x").value(true).null().begin_object().end_object().end_array();
  w.key("c").value(-3);
  w.key("d").begin_object().key("e").value(false).end_object();
  w.key("f").begin_array().end_array();
  w.end_object();
  EXPECT_EQ(w.str(), R"({"a":1,"b":["x",true,null,{}],"c":-3,"d":{"e":false},"f":[]})");
}

TEST(JsonWriter, KeysAreEscapedToo) {
  JsonWriter w;
  w.begin_object().key("we\"ird\n").value(std::uint64_t{18446744073709551615ULL}).end_object();
  EXPECT_EQ(w.str(), "{\"we\\\"ird\\n\":18446744073709551615}");
}

TEST(JsonWriter, ErrorReply) {
  EXPECT_EQ(json_error("no vif \"5/0\""), R"({"error":"no vif \"5/0\""})");
}

}  // namespace
}  // namespace unetback::control
