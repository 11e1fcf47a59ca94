// ControlServer over a real Unix socket in a temporary directory, on an io_context driven by
// the test: request/reply lines, limits, and clients that misbehave.
#include "backend/daemon/control_server.hpp"

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"
#include "tests/support/fd_limit.hpp"

namespace unetback::daemon {
namespace {

using namespace std::chrono_literals;

// How long a wait for something that must happen may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr auto kHangGuard = 30s;

class ControlServerTest : public ::testing::Test {
 protected:
  std::string dir_;
  std::string path_;
  boost::asio::io_context io_;

  void SetUp() override {
    char tmpl[] = "/tmp/unetback-ctl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/run/d.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string echo(std::string_view line) { return "got:" + std::string(line); }

  UniqueFd connect_client() {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << std::strerror(errno);
    return fd;
  }
  static void send_all(int fd, std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      ASSERT_GT(n, 0) << std::strerror(errno);
      s.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Runs the io_context until `pred` holds; false if it did not within kHangGuard.
  template <typename P>
  bool run_until(P pred) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      io_.run_for(5ms);
      io_.restart();
    }
    return true;
  }
  // Bytes `fd` sent that its peer has not read yet (SIOCOUTQ on a Unix stream socket).
  static int unread_by_peer(int fd) {
    int n = -1;
    return ::ioctl(fd, SIOCOUTQ, &n) == 0 ? n : -1;
  }
  // Bytes waiting to be read on `fd`.
  static int readable_bytes(int fd) {
    int n = -1;
    return ::ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
  }
  // Runs the io_context until `fd` has a full line (or EOF), at most kHangGuard.
  std::optional<std::string> recv_line(int fd, std::string& buf) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto nl = buf.find('\n'); nl != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        return line;
      }
      io_.run_for(5ms);
      io_.restart();
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) == 1) {
        char chunk[4096];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return std::nullopt;
        buf.append(chunk, static_cast<std::size_t>(n));
      }
    }
    return std::nullopt;
  }
  // True once the server closed `fd` (EOF), within kHangGuard.
  bool closed_by_server(int fd) {
    std::string buf;
    while (recv_line(fd, buf)) {
    }
    char c;
    return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
  }
};

TEST_F(ControlServerTest, AnswersOneLinePerRequestIncludingPipelinedOnes) {
  ControlServer server(io_, path_, echo);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U) << "root only: it changes daemon tunables";
  auto fd = connect_client();
  send_all(fd.get(), "list\nstats 5/0\n");
  std::string buf;
  EXPECT_EQ(recv_line(fd.get(), buf), "got:list");
  EXPECT_EQ(recv_line(fd.get(), buf), "got:stats 5/0");
  // A request split across writes is joined: the server has read the first part before the
  // rest is sent.
  send_all(fd.get(), "ge");
  ASSERT_TRUE(run_until([&] { return unread_by_peer(fd.get()) == 0; }));
  send_all(fd.get(), "t x\n");
  EXPECT_EQ(recv_line(fd.get(), buf), "got:get x");
}

TEST_F(ControlServerTest, OverlongLineIsRefusedAndTheConnectionClosed) {
  ControlServer server(io_, path_, echo, {.max_line = 64});
  auto fd = connect_client();
  send_all(fd.get(), std::string(100, 'a'));  // no newline at all
  std::string buf;
  EXPECT_EQ(recv_line(fd.get(), buf), R"({"error":"request line too long"})");
  EXPECT_TRUE(closed_by_server(fd.get()));
  // The server still serves others.
  auto fd2 = connect_client();
  send_all(fd2.get(), "list\n");
  std::string buf2;
  EXPECT_EQ(recv_line(fd2.get(), buf2), "got:list");
}

TEST_F(ControlServerTest, ConnectionCountIsCapped) {
  ControlServer server(io_, path_, echo, {.max_connections = 2});
  auto a = connect_client();
  auto b = connect_client();
  ASSERT_TRUE(run_until([&] { return server.connections() == 2U; }));
  auto c = connect_client();
  std::string buf;
  EXPECT_EQ(recv_line(c.get(), buf), R"({"error":"too many connections"})");
  EXPECT_TRUE(closed_by_server(c.get()));
  a.reset();
  ASSERT_TRUE(run_until([&] { return server.connections() == 1U; }))
      << "the server did not notice the client that left";
  auto d = connect_client();
  send_all(d.get(), "list\n");
  EXPECT_EQ(recv_line(d.get(), buf), "got:list");
}

// Issue 15 #12: with the descriptor table full, a waiting client makes every accept fail
// (EMFILE) at once. The server must not spin on it nor log each failure: it turns the client
// away with the reason (a spare descriptor lent by the reserve), logs a line or two, backs
// off, and serves the next client once descriptors are back. The table stays full for a
// second (and until the client has its answer); the handlers the server ran meanwhile are
// counted. A spinning server runs ~10^5 a second; one that backs off runs a few. The count
// is a ceiling that a slow machine only lowers: every handler is the server's own
// reaction to an event (a failed accept, its back-off timer), never more on a slower run.
TEST_F(ControlServerTest, FullFdTableTurnsClientsAwayWithoutSpinningAndRecovers) {
  std::size_t log_lines = 0;
  log::set_sink([&](log::Level, std::string_view prefix, std::string_view) {
    if (prefix == "control") ++log_lines;
  });
  FdReserve reserve(1, 0);
  ControlServer server(io_, path_, echo, {}, &reserve);
  auto early = connect_client();  // queued before the table fills
  std::size_t handlers = 0;
  std::string buf;
  std::optional<std::string> told;
  {
    const test::LoweredFdLimit full(0);
    ASSERT_TRUE(full.ok());
    const auto until = std::chrono::steady_clock::now() + 1s;
    const auto guard = std::chrono::steady_clock::now() + kHangGuard;
    while ((std::chrono::steady_clock::now() < until || readable_bytes(early.get()) <= 0) &&
           std::chrono::steady_clock::now() < guard) {
      handlers += io_.run_for(10ms);
      io_.restart();
    }
    told = recv_line(early.get(), buf);
  }
  log::set_sink({});
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(*told, R"({"error":"the daemon is out of file descriptors"})");
  EXPECT_TRUE(closed_by_server(early.get()));
  // Before: one failed accept and one log line per wakeup, ~10^5 a second.
  EXPECT_LT(handlers, 100U) << "the accept loop spins";
  EXPECT_LE(log_lines, 3U) << "every failed accept is logged";
  EXPECT_EQ(reserve.spares_held(), 1U) << "the spare was not taken back";
  auto next = connect_client();
  send_all(next.get(), "list\n");
  EXPECT_EQ(recv_line(next.get(), buf), "got:list");
}

TEST_F(ControlServerTest, IdleClientIsDropped) {
  constexpr auto kIdle = 50ms;
  ControlServer server(io_, path_, echo, {.idle_timeout = kIdle});
  const auto t0 = std::chrono::steady_clock::now();  // before the server's idle timer starts
  auto fd = connect_client();
  EXPECT_TRUE(closed_by_server(fd.get()));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, kIdle) << "dropped before its idle timeout";
  EXPECT_TRUE(run_until([&] { return server.connections() == 0U; }));
}

TEST_F(ControlServerTest, ClientThatNeverReadsBlocksOnlyItself) {
  // A handler with a large reply: the first client never reads its replies.
  ControlServer server(io_, path_, [](std::string_view) { return std::string(64 * 1024, 'x'); });
  auto hog = connect_client();
  std::string many;
  for (int i = 0; i < 200; ++i) many += "list\n";
  ::send(hog.get(), many.data(), many.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // The server is answering the hog (its replies wait unread in the hog's socket).
  ASSERT_TRUE(run_until([&] { return readable_bytes(hog.get()) > 0; }));
  auto other = connect_client();
  send_all(other.get(), "list\n");
  std::string buf;
  auto line = recv_line(other.get(), buf);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->size(), 64U * 1024);
}

// A client writes 100 requests at once and reads nothing. Each answer is 1 MiB, more than
// the socket holds: the daemon answers the first, and takes the next request only once that
// answer is written, so it holds one answer, not a hundred. Once the client reads, every
// answer comes, whole and in order.
TEST_F(ControlServerTest, PipelinedRequestsAreAnsweredOneAtATimeAsTheClientReads) {
  constexpr int kRequests = 100;
  constexpr std::size_t kAnswer = 1 << 20;
  std::size_t asked = 0;
  ControlServer server(io_, path_, [&asked](std::string_view line) {
    ++asked;
    return std::string(line) + ":" + std::string(kAnswer, 'x');
  });
  auto fd = connect_client();
  std::string many;
  for (int i = 0; i < kRequests; ++i) many += "stats " + std::to_string(i) + "\n";
  send_all(fd.get(), many);
  ASSERT_TRUE(run_until([&] { return asked >= 1 && readable_bytes(fd.get()) > 0; }));
  // Everything the server can do without the client reading, done.
  while (io_.poll() > 0) io_.restart();
  io_.restart();
  EXPECT_EQ(asked, 1U) << "requests answered before the first answer was taken";

  std::string got;
  std::size_t lines = 0;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (lines < kRequests && std::chrono::steady_clock::now() < deadline) {
    io_.run_for(1ms);
    io_.restart();
    std::string chunk(1 << 16, '\0');
    const ssize_t n = ::recv(fd.get(), chunk.data(), chunk.size(), MSG_DONTWAIT);
    if (n <= 0) continue;
    got.append(chunk.data(), static_cast<std::size_t>(n));
    for (auto nl = got.find('\n'); nl != std::string::npos; nl = got.find('\n')) {
      const std::string prefix = "stats " + std::to_string(lines) + ":";
      ASSERT_EQ(nl, prefix.size() + kAnswer) << "answer " << lines;
      ASSERT_EQ(got.compare(0, prefix.size(), prefix), 0) << "answer " << lines;
      got.erase(0, nl + 1);
      ++lines;
    }
  }
  EXPECT_EQ(lines, static_cast<std::size_t>(kRequests));
  EXPECT_EQ(asked, static_cast<std::size_t>(kRequests));
}

TEST_F(ControlServerTest, StaleSocketIsReplacedButALiveOneIsNot) {
  {
    // A socket file nobody listens on (a daemon that crashed).
    ::mkdir((dir_ + "/run").c_str(), 0755);
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  ControlServer server(io_, path_, echo);
  EXPECT_THROW(ControlServer(io_, path_, echo), SetupError);
  EXPECT_TRUE(std::filesystem::exists(path_)) << "the live server's socket stays";
}

TEST_F(ControlServerTest, RefusesAPathThatIsNotASocket) {
  ::mkdir((dir_ + "/run").c_str(), 0755);
  {
    std::FILE* f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  EXPECT_THROW(ControlServer(io_, path_, echo), SetupError);
}

TEST_F(ControlServerTest, SocketFileIsRemovedOnDestruction) {
  { ControlServer server(io_, path_, echo); }
  EXPECT_FALSE(std::filesystem::exists(path_));
}

}  // namespace
}  // namespace unetback::daemon
