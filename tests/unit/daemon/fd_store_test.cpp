// FdStore: the vifs' TAP queues in systemd's file descriptor store. The messages it sends are
// checked as systemd reads them (sd_notify's text, one fd per FDSTORE=1); the last test sends
// them over a real notification socket, as unetbackd does under systemd.
#include "backend/daemon/fd_store.hpp"

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "tests/support/inode.hpp"
#include "tests/support/notify_socket.hpp"

namespace unetback::daemon {
namespace {

using test::inode_of;

struct Sent {
  std::string state;
  std::vector<int> fds;
};

/// A pipe's read end: a real fd whose identity (inode) a test can compare.
UniqueFd pipe_fd() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return UniqueFd();
  ::close(p[1]);
  return UniqueFd(p[0]);
}

bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) >= 0;
}

class FdStoreTest : public ::testing::Test {
 protected:
  FdStore::Sender recorder() {
    return [this](const std::string& state, std::span<const int> fds) {
      sent_.push_back({state, {fds.begin(), fds.end()}});
      return 1;
    };
  }
  std::vector<Sent> sent_;
};

TEST(FdStoreNames, NameATapQueueAndReadOnlyTheirOwnBack) {
  EXPECT_EQ(FdStore::fd_name(12, 3), "tap-12-q3");
  EXPECT_EQ(FdStore::parse_name("tap-12-q3"), (std::pair<int, std::uint32_t>{12, 3}));
  for (const char* bad : {"", "tap-", "tap--q1", "tap-0-q0", "tap-12-q", "tap-12-q256",
                          "tap-12-q1x", "tap-x-q1", "tap-12q1", "varlink", "tap-12-q-1"})
    EXPECT_FALSE(FdStore::parse_name(bad)) << bad;
}

TEST_F(FdStoreTest, AConnectedVifsQueuesAreStoredOneFdPerName) {
  FdStore store({}, recorder());
  UniqueFd q0 = pipe_fd(), q1 = pipe_fd();
  const int fds[] = {q0.get(), q1.get()};
  store.keep(7, fds);
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[0].state, "FDSTORE=1\nFDNAME=tap-7-q0");
  EXPECT_EQ(sent_[0].fds, std::vector<int>{q0.get()});
  EXPECT_EQ(sent_[1].state, "FDSTORE=1\nFDNAME=tap-7-q1");
  EXPECT_EQ(sent_[1].fds, std::vector<int>{q1.get()});

  // Kept again (the vif reconnected): the old copies go first, so the store never holds two.
  sent_.clear();
  store.keep(7, std::span<const int>(fds, 1));
  ASSERT_EQ(sent_.size(), 3u);
  EXPECT_EQ(sent_[0].state, "FDSTOREREMOVE=1\nFDNAME=tap-7-q0");
  EXPECT_TRUE(sent_[0].fds.empty());
  EXPECT_EQ(sent_[1].state, "FDSTOREREMOVE=1\nFDNAME=tap-7-q1");
  EXPECT_EQ(sent_[2].state, "FDSTORE=1\nFDNAME=tap-7-q0");

  // The vif goes: the store lets go of its TAP, once.
  sent_.clear();
  store.forget(7);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].state, "FDSTOREREMOVE=1\nFDNAME=tap-7-q0");
  store.forget(7);
  EXPECT_EQ(sent_.size(), 1u);
}

TEST_F(FdStoreTest, TheNextDaemonTakesEveryQueueOfItsTapAndReleasesTheRest) {
  UniqueFd a0 = pipe_fd(), a1 = pipe_fd(), b0 = pipe_fd(), gap1 = pipe_fd(), other = pipe_fd();
  const ino_t a0_ino = inode_of(a0.get()), a1_ino = inode_of(a1.get());
  const int b0_fd = b0.get(), gap1_fd = gap1.get(), other_fd = other.get();
  std::vector<std::pair<std::string, UniqueFd>> passed;
  // Passed in any order, as systemd lists its store.
  passed.emplace_back("tap-5-q1", std::move(a1));
  passed.emplace_back("tap-6-q0", std::move(b0));
  passed.emplace_back("tap-5-q0", std::move(a0));
  passed.emplace_back("tap-9-q1", std::move(gap1));  // queue 0 missing
  passed.emplace_back("stdout-of-something", std::move(other));
  FdStore store(std::move(passed), recorder());
  EXPECT_EQ(store.passed_count(), 4u);
  EXPECT_FALSE(is_open(other_fd)) << "a passed fd that is not a TAP queue is closed";

  auto five = store.take(5);
  ASSERT_EQ(five.size(), 2u);
  EXPECT_EQ(inode_of(five[0].get()), a0_ino) << "queue order";
  EXPECT_EQ(inode_of(five[1].get()), a1_ino);
  EXPECT_TRUE(store.take(5).empty()) << "taken once";
  EXPECT_TRUE(store.take(9).empty()) << "a TAP with a queue missing is attached anew";
  EXPECT_TRUE(store.take(4).empty());
  EXPECT_TRUE(sent_.empty()) << "taking changes nothing in the store";

  // Serving: what no vif took (TAP 6, TAP 9) leaves the store and is closed; TAP 5 stays.
  EXPECT_EQ(store.release_unclaimed(), 2u);
  std::vector<std::string> states;
  for (const auto& s : sent_) states.push_back(s.state);
  EXPECT_EQ(states, (std::vector<std::string>{"FDSTOREREMOVE=1\nFDNAME=tap-6-q0",
                                              "FDSTOREREMOVE=1\nFDNAME=tap-9-q0",
                                              "FDSTOREREMOVE=1\nFDNAME=tap-9-q1"}));
  EXPECT_FALSE(is_open(b0_fd));
  EXPECT_FALSE(is_open(gap1_fd));
  // The adopted TAP's names are still known: its vif's forget() removes them.
  sent_.clear();
  store.forget(5);
  EXPECT_EQ(sent_.size(), 2u);
}

TEST_F(FdStoreTest, AStoreThatCannotBeReachedCostsAWarningNotTheVif) {
  FdStore store({}, [](const std::string&, std::span<const int>) { return -EPERM; });
  UniqueFd q0 = pipe_fd();
  const int fds[] = {q0.get()};
  store.keep(3, fds);
  store.forget(3);
  EXPECT_EQ(store.send_failures(), 2u);
  EXPECT_TRUE(is_open(q0.get()));
}

TEST_F(FdStoreTest, TheStoreHoldsItsOwnCopyOfEveryKeptQueueForAnUpgradeInPlace) {
  FdStore store({}, recorder());
  UniqueFd q0 = pipe_fd(), q1 = pipe_fd(), r0 = pipe_fd();
  const int two[] = {q0.get(), q1.get()};
  const int one[] = {r0.get()};
  store.keep(7, two);
  store.keep(9, one);
  EXPECT_EQ(store.held_count(), 3u);
  store.forget(9);
  EXPECT_EQ(store.held_count(), 2u) << "a forgotten TAP's copies are closed";

  auto held = store.release_held();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].first, "tap-7-q0");
  EXPECT_EQ(held[1].first, "tap-7-q1");
  EXPECT_EQ(inode_of(held[0].second.get()), inode_of(q0.get())) << "the same open file";
  EXPECT_EQ(inode_of(held[1].second.get()), inode_of(q1.get()));
  EXPECT_NE(held[0].second.get(), q0.get()) << "a copy: the vif's own fd stays its own";
  EXPECT_EQ(::fcntl(held[0].second.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC)
      << "no child (a hotplug script) inherits it";
  EXPECT_EQ(store.held_count(), 0u);
  EXPECT_TRUE(store.release_held().empty());
}

TEST_F(FdStoreTest, WithoutAServiceManagerNothingIsSentAndNothingFails) {
  FdStore store({}, FdStore::Sender{});
  UniqueFd q0 = pipe_fd();
  const int fds[] = {q0.get()};
  store.keep(3, fds);
  EXPECT_EQ(store.send_failures(), 0u);
  EXPECT_EQ(store.held_count(), 1u) << "an upgrade in place needs no service manager";
  store.forget(3);
  EXPECT_EQ(store.held_count(), 0u);
}

TEST(FdStoreListenFds, TheFdsPassedToThisPidAreReadAsSystemdPassesThem) {
  std::map<std::string, std::string> env{
      {"LISTEN_PID", "4242"}, {"LISTEN_FDS", "3"}, {"LISTEN_FDNAMES", "tap-7-q0:tap-7-q1"}};
  const auto get = [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const auto fds = FdStore::listed_fds(get, 4242);
  ASSERT_EQ(fds.size(), 3u);
  EXPECT_EQ(fds[0], (std::pair<std::string, int>{"tap-7-q0", 3}));
  EXPECT_EQ(fds[1], (std::pair<std::string, int>{"tap-7-q1", 4}));
  EXPECT_EQ(fds[2], (std::pair<std::string, int>{"unknown", 5})) << "a name missing";
  EXPECT_TRUE(FdStore::listed_fds(get, 4243).empty()) << "passed to another process";
  for (const char* bad : {"0", "-1", "3x", "", "99999999999"}) {
    env["LISTEN_FDS"] = bad;
    EXPECT_TRUE(FdStore::listed_fds(get, 4242).empty()) << bad;
  }
  env.erase("LISTEN_FDS");
  EXPECT_TRUE(FdStore::listed_fds(get, 4242).empty());
}

// LISTEN_FDS claiming more descriptors than were passed: the numbers past the passed ones are
// not the store's, and the daemon's own descriptors that get them later are never closed by
// it. (In a child process: the test controls which numbers are open.)
TEST(FdStoreListenFds, NumbersClaimedButNotPassedAreNeverTakenOrClosed) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (int fd = 3; fd < 64; ++fd) ::close(fd);
    int passed[2];
    if (::pipe(passed) != 0 || passed[0] != 3 || passed[1] != 4) std::_Exit(10);
    const std::string self = std::to_string(::getpid());
    ::setenv("LISTEN_PID", self.c_str(), 1);
    ::setenv("LISTEN_FDS", "6", 1);  // 3..8 claimed, 3 and 4 passed
    ::setenv("LISTEN_FDNAMES", "tap-7-q0:tap-7-q1:tap-7-q2:tap-7-q3:tap-8-q0:tap-8-q1", 1);
    ::unsetenv("NOTIFY_SOCKET");
    auto store = FdStore::from_environment();
    if (store->passed_count() != 2) std::_Exit(11);
    int own[2];  // the daemon's own, opened after: numbers 5 and 6
    if (::pipe(own) != 0 || own[0] != 5) std::_Exit(12);
    store.reset();
    if (::fcntl(own[0], F_GETFD) == -1 || ::fcntl(own[1], F_GETFD) == -1) std::_Exit(13);
    if (::fcntl(3, F_GETFD) != -1) std::_Exit(14);  // the passed ones went with the store
    std::_Exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: pipe, 11: passed count, 12: own pipe, "
                                       "13: the store closed the daemon's own fd, 14: kept";
}

// The real sender: sd_pid_notify_with_fds to $NOTIFY_SOCKET, read here as systemd reads it
// (one datagram, the text, the fd as SCM_RIGHTS).
TEST(FdStoreSystemd, FdstoreReachesTheNotificationSocketWithTheFdAttached) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("unetback-fdstore-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  test::NotifySocket sock((dir / "notify").string());
  ASSERT_TRUE(sock.ok());
  const char* old = std::getenv("NOTIFY_SOCKET");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("NOTIFY_SOCKET", sock.path().c_str(), 1);
  UniqueFd q0 = pipe_fd();
  const int fd = q0.get();
  const int rc = FdStore::systemd_sender()("FDSTORE=1\nFDNAME=tap-4-q0", std::span(&fd, 1));
  if (old != nullptr) {
    ::setenv("NOTIFY_SOCKET", saved.c_str(), 1);
  } else {
    ::unsetenv("NOTIFY_SOCKET");
  }
  if (rc == 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "built without libsystemd: nothing is sent_";
  }
  ASSERT_GT(rc, 0);

  auto got = sock.receive();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->text, "FDSTORE=1\nFDNAME=tap-4-q0");
  ASSERT_EQ(got->fds.size(), 1u) << "the fd travels with the message";
  EXPECT_EQ(inode_of(got->fds[0].get()), inode_of(q0.get())) << "the same open file";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unetback::daemon
