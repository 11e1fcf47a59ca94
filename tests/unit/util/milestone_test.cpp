// The milestone lines the real-Xen lab splits a restart's gap with
// (tools/xenlab/parts/adopt.sh, adopt_split parses "milestone NAME realtime=S.US pid=PID[
// DETAIL]"): their form and their clock.
#include "common/util/milestone.hpp"

#include <chrono>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "common/util/log.hpp"

namespace unetback {
namespace {

TEST(Milestone, LineHasTheFormTheLabParses) {
  EXPECT_EQ(milestone_line("vif_adopted", "1764650000.012345", 42, "vif=5/0"),
            "milestone vif_adopted realtime=1764650000.012345 pid=42 vif=5/0");
  EXPECT_EQ(milestone_line("setup_done", "1.000001", 7),
            "milestone setup_done realtime=1.000001 pid=7");
}

TEST(Milestone, StampIsTheWallClockInMicroseconds) {
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string s = realtime_stamp();
  const double after =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto dot = s.find('.');
  ASSERT_NE(dot, std::string::npos);
  EXPECT_EQ(s.size() - dot - 1, 6U) << s;  // microseconds, zero-padded
  const double v = std::stod(s);
  EXPECT_GE(v, before - 1e-6);
  EXPECT_LE(v, after + 1e-6);
}

TEST(Milestone, LoggedAtInfoWithTheDaemonsPid) {
  std::string seen_prefix, seen_msg;
  log::Level seen_level = log::Level::debug;
  log::set_sink([&](log::Level l, std::string_view prefix, std::string_view msg) {
    seen_level = l;
    seen_prefix = prefix;
    seen_msg = msg;
  });
  log_milestone("main_entered", {}, "12.000003");
  log::set_sink({});
  EXPECT_EQ(seen_level, log::Level::info);
  EXPECT_EQ(seen_prefix, "unetbackd");
  EXPECT_EQ(seen_msg,
            "milestone main_entered realtime=12.000003 pid=" + std::to_string(::getpid()));
}

}  // namespace
}  // namespace unetback
