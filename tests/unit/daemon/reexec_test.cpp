// Upgrading: the environment and the fds an upgrade's successor finds, checked by starting a
// shell the way the daemon starts its successor.
#include "backend/daemon/reexec.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "tests/support/inode.hpp"

namespace unetback::daemon {
namespace {

using test::inode_of;

TEST(Upgrade, TheSuccessorGetsFreshListenVariablesAndKeepsTheRest) {
  const char* env[] = {"PATH=/usr/bin",
                       "LISTEN_PID=1",
                       "LISTEN_FDS=9",
                       "LISTEN_FDNAMES=old",
                       "NOTIFY_SOCKET=/run/systemd/notify",
                       nullptr};
  EXPECT_EQ(listen_environment(env, 812, {"tap-7-q0", "tap-7-q1"}),
            (std::vector<std::string>{"PATH=/usr/bin", "NOTIFY_SOCKET=/run/systemd/notify",
                                      "LISTEN_PID=812", "LISTEN_FDS=2",
                                      "LISTEN_FDNAMES=tap-7-q0:tap-7-q1"}));
  EXPECT_EQ(listen_environment(env, 812, {}),
            (std::vector<std::string>{"PATH=/usr/bin", "NOTIFY_SOCKET=/run/systemd/notify"}))
      << "nothing to pass: no stale LISTEN_* either";
}

TEST(Upgrade, TheProgramPathNamesThisProgramFile) {
  const std::string p = program_path_now();
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.front(), '/');
  EXPECT_EQ(::access(p.c_str(), X_OK), 0) << p;
}

// The successor gets two pipes' read ends (opened at whatever numbers) at 3 and 4 and a shell
// reports what it got: its own pid in LISTEN_PID (and in WATCHDOG_PID, when this process has a
// watchdog), the names, and the inodes at 3 and 4, which the test compares with its own. The
// descriptors stay this process's too: the old daemon serves on until the handover.
TEST(Upgrade, TheSuccessorGetsTheFdsAtThreeOnwardsNamedAndItsOwnPid) {
  int a[2], b[2], out[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const ino_t ia = inode_of(a[0]), ib = inode_of(b[0]);
  const int saved_stdout = ::dup(STDOUT_FILENO);
  ASSERT_GE(saved_stdout, 0);
  ::dup2(out[1], STDOUT_FILENO);  // the child's stdout
  // A descriptor of this process without close-on-exec (a library's): it must not cross.
  const int probe = ::memfd_create("leak-probe", 0);
  ASSERT_GE(probe, 0);
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);
  auto child = spawn_with_fds("/bin/sh",
                              {"sh", "-c",
                               "echo \"$LISTEN_PID=$$ $WATCHDOG_PID $LISTEN_FDS $LISTEN_FDNAMES "
                               "$(stat -L -c %i /proc/$$/fd/3) $(stat -L -c %i /proc/$$/fd/4) "
                               "$(ls -l /proc/$$/fd | grep -c leak-probe)\""},
                              {{"tap-5-q0", b[0]}, {"tap-6-q0", a[0]}});
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  ::dup2(saved_stdout, STDOUT_FILENO);
  ::close(saved_stdout);
  ::close(out[1]);
  ASSERT_TRUE(child) << child.error().message();
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  ASSERT_EQ(::waitpid(*child, &status, 0), *child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
  const std::string pid = std::to_string(*child);
  EXPECT_EQ(got, pid + "=" + pid + " " + pid + " 2 tap-5-q0:tap-6-q0 " + std::to_string(ib) + " " +
                     std::to_string(ia) + " 0\n");
  ::close(probe);
  EXPECT_EQ(inode_of(a[0]), ia) << "the parent keeps its own descriptors";
  for (int fd : {a[0], a[1], b[0], b[1], out[0]}) ::close(fd);
}

TEST(Upgrade, AProgramThatCannotBeExecutedEndsTheChildWith127) {
  auto child = spawn_with_fds("/nonexistent/unetbackd", {"unetbackd"}, {});
  ASSERT_TRUE(child) << child.error().message();
  int status = 0;
  ASSERT_EQ(::waitpid(*child, &status, 0), *child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127) << status;
}

}  // namespace
}  // namespace unetback::daemon
