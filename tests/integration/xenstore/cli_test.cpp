// The unmodified Debian xenstore-* tools against xensim's xenstored, one socket per domain.
#include <gtest/gtest.h>

#include "tests/integration/xenstore/server_fixture.hpp"

using namespace unetback;
using namespace unetback::xensim;
using namespace unetback::xensim::test;

namespace {

// The line of `out` starting with `prefix` (xenstore-ls -p pads values with dots before
// the permission list).
std::string line_with(const std::string& out, const std::string& prefix) {
  std::size_t pos = 0;
  while (pos < out.size()) {
    const auto end = out.find('\n', pos);
    const std::string line = out.substr(pos, end == std::string::npos ? end : end - pos);
    if (line.starts_with(prefix)) return line;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "<no line " + prefix + ">";
}

class XenstoreCli : public ::testing::Test {
 protected:
  ServerThread srv;
};

TEST_F(XenstoreCli, WriteReadExistsListLsRm) {
  auto w = run(srv.sock(0), "xenstore-write /vm/a 1 /vm/b two");
  ASSERT_EQ(w.rc, 0) << w.out;
  auto r = run(srv.sock(0), "xenstore-read /vm/a /vm/b");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "1\ntwo\n");
  EXPECT_EQ(run(srv.sock(0), "xenstore-exists /vm/a").rc, 0);
  EXPECT_NE(run(srv.sock(0), "xenstore-exists /vm/nope").rc, 0);
  EXPECT_EQ(run(srv.sock(0), "xenstore-list /vm").out, "a\nb\n");
  auto ls = run(srv.sock(0), "xenstore-ls /vm");
  EXPECT_EQ(ls.rc, 0);
  EXPECT_EQ(ls.out, "a = \"1\"\nb = \"two\"\n");
  EXPECT_EQ(run(srv.sock(0), "xenstore-rm /vm/a").rc, 0);
  auto gone = run(srv.sock(0), "xenstore-read /vm/a");
  EXPECT_NE(gone.rc, 0);
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.read("/vm/b").value_or(""); }), "two");
}

TEST_F(XenstoreCli, ReadOfMissingKeyFails) {
  auto r = run(srv.sock(0), "xenstore-read /does/not/exist");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("couldn't read path"), std::string::npos) << r.out;
}

TEST_F(XenstoreCli, LsShowsPermissionsOfTheDomainTree) {
  auto ls = run(srv.sock(0), "xenstore-ls -p /local/domain/1");
  ASSERT_EQ(ls.rc, 0) << ls.out;
  EXPECT_TRUE(line_with(ls.out, "name = \"guest1\"").ends_with("(n0,r1)")) << ls.out;
  EXPECT_TRUE(line_with(ls.out, "data = \"\"").ends_with("(n1)")) << ls.out;
  EXPECT_TRUE(line_with(ls.out, "device = \"\"").ends_with("(n0,r1)")) << ls.out;
}

TEST_F(XenstoreCli, DomUIsConfinedByPermissions) {
  ASSERT_EQ(run(srv.sock(0), "xenstore-write /local/domain/1/device/vif/0/mac aa").rc, 0);
  EXPECT_EQ(run(srv.sock(1), "xenstore-read /local/domain/1/device/vif/0/mac").out, "aa\n");
  EXPECT_NE(run(srv.sock(1), "xenstore-write /local/domain/1/device/vif/0/mac bb").rc, 0);
  EXPECT_NE(run(srv.sock(1), "xenstore-read /tool/xenstored").rc, 0);
  EXPECT_EQ(run(srv.sock(1), "xenstore-write data/note hello").rc, 0);
  EXPECT_EQ(run(srv.sock(0), "xenstore-read /local/domain/1/data/note").out, "hello\n");
  // xenstore-chmod as dom0 takes the read right away again.
  ASSERT_EQ(run(srv.sock(0), "xenstore-chmod /local/domain/1/device/vif/0/mac n0").rc, 0);
  EXPECT_NE(run(srv.sock(1), "xenstore-read /local/domain/1/device/vif/0/mac").rc, 0);
  const auto ls = run(srv.sock(0), "xenstore-ls -p /local/domain/1/device/vif/0").out;
  EXPECT_TRUE(line_with(ls, "mac = \"aa\"").ends_with("(n0)")) << ls;
}

TEST_F(XenstoreCli, DomUCannotChmodToAnotherOwner) {
  ASSERT_EQ(run(srv.sock(1), "xenstore-write data/x 1").rc, 0);
  EXPECT_NE(run(srv.sock(1), "xenstore-chmod data/x n0").rc, 0);
  EXPECT_EQ(run(srv.sock(1), "xenstore-chmod data/x n1 r0").rc, 0);
}

TEST_F(XenstoreCli, WatchPrintsInitialEventThenChange) {
  ASSERT_EQ(run(srv.sock(0), "xenstore-write /w/state 1").rc, 0);
  std::promise<CmdResult> done;
  auto fut = done.get_future();
  std::thread t([&] { done.set_value(run(srv.sock(0), "xenstore-watch -n 2 /w")); });
  // Wait until the watch is registered, then change the node.
  bool registered = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!registered && std::chrono::steady_clock::now() < deadline) {
    registered = srv.call([](XenstoreServer& s) { return s.core().watches().size() > 0; });
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(registered);
  srv.call([](XenstoreServer& s) { return s.write("/w/state", "4"); });
  // Bounded by the command's own `timeout 60`.
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(90)), std::future_status::ready);
  t.join();
  auto r = fut.get();
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "/w\n/w/state\n");
}

}  // namespace
