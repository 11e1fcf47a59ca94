// A figure a functional scenario measures but does not judge: how long a handshake waited
// behind a flood, the share a small flow kept, the gap a restart left. The test prints it, in
// one line that `tools/lab.sh bench --experiments` collects
// (tools/lab/unetlab/scenario_figures.py), and records it as a GoogleTest property; no assertion is
// made on it. A functional test asserts behaviour only (bytes intact, counters that add up, traffic
// that keeps flowing); speed and latency are figures, compared against baselines measured in the
// same run.
//
//   FIGURE <name> <value> <unit>
#pragma once

#include <cstdio>
#include <gtest/gtest.h>
#include <string>

namespace unetback::test {

inline void report_figure(const std::string& name, double value, const std::string& unit) {
  std::printf("FIGURE %s %.6g %s\n", name.c_str(), value, unit.c_str());
  std::fflush(stdout);
  ::testing::Test::RecordProperty(name, std::to_string(value) + " " + unit);
}

}  // namespace unetback::test
