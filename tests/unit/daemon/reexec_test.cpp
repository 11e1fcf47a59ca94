// Upgrading in place: the environment and the fds a re-executed unetbackd finds, checked by
// executing a shell in a child the way the daemon executes itself.
#include "backend/daemon/reexec.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace unetback::daemon {
namespace {

TEST(UpgradeInPlace, TheNewImageGetsFreshListenVariablesAndKeepsTheRest) {
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

TEST(UpgradeInPlace, TheProgramPathNamesThisProgramFile) {
  const std::string p = program_path_now();
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.front(), '/');
  EXPECT_EQ(::access(p.c_str(), X_OK), 0) << p;
}

ino_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// The child places two pipes' read ends (opened at whatever numbers, the first of them at 3
// where something else sat) and executes a shell that reports what it got: the same pid in
// LISTEN_PID, the names, and the inodes at 3 and 4, which the parent compares with its own.
TEST(UpgradeInPlace, TheFdsArriveAtThreeOnwardsOpenAcrossTheExecWithTheirNames) {
  int a[2], b[2], out[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const ino_t ia = inode_of(a[0]), ib = inode_of(b[0]);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    std::vector<std::pair<std::string, UniqueFd>> fds;
    fds.emplace_back("tap-5-q0", UniqueFd(::dup(b[0])));
    fds.emplace_back("tap-6-q0", UniqueFd(::dup(a[0])));
    const std::string why = exec_with_fds(
        "/bin/sh",
        {"sh", "-c",
         "echo \"$LISTEN_PID=$$ $LISTEN_FDS $LISTEN_FDNAMES $(stat -L -c %i /proc/$$/fd/3) "
         "$(stat -L -c %i /proc/$$/fd/4)\""},
        std::move(fds));
    (void)!::write(STDOUT_FILENO, why.data(), why.size());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
  const std::string pid = std::to_string(child);
  EXPECT_EQ(got, pid + "=" + pid + " 2 tap-5-q0:tap-6-q0 " + std::to_string(ib) + " " +
                     std::to_string(ia) + "\n");
  for (int fd : {a[0], a[1], b[0], b[1], out[0]}) ::close(fd);
}

TEST(UpgradeInPlace, AProgramThatCannotBeExecutedIsAnErrorNotAnExit) {
  std::vector<std::pair<std::string, UniqueFd>> none;
  const std::string why = exec_with_fds("/nonexistent/unetbackd", {"unetbackd"}, std::move(none));
  EXPECT_NE(why.find("cannot execute /nonexistent/unetbackd"), std::string::npos) << why;
}

}  // namespace
}  // namespace unetback::daemon
