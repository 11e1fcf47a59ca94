// What unetback-udpflow prints: the key=value line and the JSON object the bench parses.
#include "tools/udpflow/flow_report.hpp"

#include <gtest/gtest.h>

namespace unetback::udpflow {
namespace {

TEST(FlowReport, SendLineAndJson) {
  SendReport r;
  r.packets = 1000;
  r.bytes = 1000;
  r.errors = 1;
  r.eagain = 2;
  r.enobufs = 3;
  r.seconds = 0.5;
  EXPECT_EQ(format_send(r, false),
            "sent=1000 pps=2000.0 bytes=1000 errors=1 eagain=2 enobufs=3 seconds=0.500");
  EXPECT_EQ(format_send(r, true),
            "{\"packets\":1000,\"pps\":2000.0,\"bytes\":1000,\"seconds\":0.500,\"errors\":1,"
            "\"eagain\":2,\"enobufs\":3}");
}

TEST(FlowReport, RecvReportsLossOnlyWhenKnown) {
  RecvReport r;
  r.packets = 300;
  r.bytes = 30000;
  r.seconds = 3;
  EXPECT_EQ(format_recv(r, false),
            "received=300 pps=100.0 bytes=30000 seconds=3.000 duplicates=0 reordered=0 "
            "socket_drops=0");
  EXPECT_EQ(format_recv(r, true),
            "{\"packets\":300,\"pps\":100.0,\"bytes\":30000,\"seconds\":3.000,\"duplicates\":0,"
            "\"reordered\":0,\"socket_drops\":0}");
  r.lost = 7;
  r.socket_drops = 2;
  EXPECT_EQ(format_recv(r, false),
            "received=300 pps=100.0 bytes=30000 lost=7 seconds=3.000 duplicates=0 reordered=0 "
            "socket_drops=2");
  EXPECT_EQ(format_recv(r, true),
            "{\"packets\":300,\"pps\":100.0,\"bytes\":30000,\"seconds\":3.000,\"lost\":7,"
            "\"duplicates\":0,\"reordered\":0,\"socket_drops\":2}");
}

TEST(FlowReport, ZeroLengthRunHasZeroRate) {
  EXPECT_EQ(rate(10, 0), 0.0);
  RecvReport r;
  EXPECT_EQ(format_recv(r, true),
            "{\"packets\":0,\"pps\":0.0,\"bytes\":0,\"seconds\":0.000,\"duplicates\":0,"
            "\"reordered\":0,\"socket_drops\":0}");
}

}  // namespace
}  // namespace unetback::udpflow
