// The e2e fixture's child process (tests/support/xl_world.hpp, Daemon): what wait_for() reads.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

#include "tests/support/xl_world.hpp"

namespace unetback::testing {
namespace {

using namespace std::chrono_literals;

// Two children of one test that write the same log, one after the other (the XDP e2e test's
// two paced transfers): the second's wait_for("listening") must wait for the second child. It
// once returned at once on the first child's line, before the second child had even truncated
// the log, and the sender met a port nobody listened on yet (ECONNREFUSED in CI).
TEST(TestDaemon, AChildsLogIsEmptyTheMomentItIsStartedSoAnEarlierChildsLinesAreNeverSeen) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("unetback-daemon-log." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "transfer-rx.log").string();
  std::ofstream(log) << "listening\n";  // what the first child wrote

  // The second child writes its line only once the test lets it (a file appears): until
  // then "listening" in the log can only be the first child's, however slow the machine.
  const std::string go = (dir / "go").string();
  Daemon second({"sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.01; done; echo listening"},
                log);
  EXPECT_EQ(slurp(log), "") << "the first child's lines are still in the log";
  EXPECT_FALSE(second.wait_for("listening", 100ms)) << "wait_for() saw the first child's line";
  std::ofstream(go) << "";
  EXPECT_TRUE(second.wait_for("listening", 30s));
  ASSERT_TRUE(second.wait_exit(30s).has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unetback::testing
