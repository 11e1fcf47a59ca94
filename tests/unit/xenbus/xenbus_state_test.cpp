#include "common/xenbus/xenbus_state.hpp"

#include <gtest/gtest.h>

namespace unetback::xenbus {
namespace {

TEST(XenbusState, ParsesEveryDefinedState) {
  for (unsigned s = 0; s < kXenbusStateCount; ++s) {
    const auto parsed = parse_xenbus_state(std::to_string(s));
    ASSERT_TRUE(parsed.has_value()) << s;
    EXPECT_EQ(static_cast<unsigned>(*parsed), s);
    EXPECT_EQ(to_xs_string(*parsed), std::to_string(s));
  }
}

TEST(XenbusState, RefusesAnythingButADecimalZeroToEight) {
  for (const char* bad : {"", "9", "10", "-1", "+4", " 4", "4 ", "4\n", "0x4", "four", "4.0",
                          "4294967300", "99999999999999999999999"}) {
    EXPECT_FALSE(parse_xenbus_state(bad).has_value()) << '"' << bad << '"';
  }
}

TEST(XenbusState, NamesMatchLinux) {
  EXPECT_EQ(state_name(XenbusState::init_wait), "InitWait");
  EXPECT_EQ(state_name(XenbusState::connected), "Connected");
  EXPECT_EQ(state_name(XenbusState::reconfigured), "Reconfigured");
}

}  // namespace
}  // namespace unetback::xenbus
