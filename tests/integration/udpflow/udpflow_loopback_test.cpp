// unetback-udpflow end to end on loopback (no root): a receiver process and a sender process,
// as the bench runs them. Only 127.0.0.1 traffic; every wait is bounded.
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/support/spawn.hpp"

namespace {

using namespace std::chrono_literals;

std::string udpflow_bin() {
  const char* env = std::getenv("UDPFLOW_BIN");
  return env ? env : UDPFLOW_BIN_DEFAULT;
}

/// A free UDP port on 127.0.0.1 (bound, read back, released; the tiny race is acceptable
/// for a test that only runs on loopback).
std::uint16_t free_udp_port() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A child running unetback-udpflow with its stdout captured. Killed and reaped if the test
/// leaves before it exits.
class Udpflow {
 public:
  explicit Udpflow(const std::vector<std::string>& args) {
    std::vector<std::string> argv{udpflow_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    unetback::test::SpawnOptions opts;
    opts.out = unetback::test::Output::pipe();
    proc_ = unetback::test::Process(argv, opts);
  }

  [[nodiscard]] bool started() const { return proc_.started(); }

  /// Reads stdout and reaps the child, within `timeout`. The exit code, or nullopt on timeout
  /// (the destructor then kills it).
  std::optional<int> finish(std::chrono::milliseconds timeout) {
    const auto st = proc_.wait(timeout);
    if (!st) return std::nullopt;
    return unetback::test::exit_code(*st);
  }
  [[nodiscard]] const std::string& output() const { return proc_.output(); }

 private:
  unetback::test::Process proc_;
};

/// The integer after `"key":` in a flat JSON object, if present.
std::optional<std::uint64_t> json_uint(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(json.c_str() + at + key.size() + 3, nullptr, 10);
}

struct FlowRun {
  std::string sender, receiver;
};

FlowRun run_flow(std::uint32_t size) {
  const std::uint16_t port = free_udp_port();
  EXPECT_NE(port, 0);
  Udpflow recv({"recv", "--port", std::to_string(port), "--bind", "127.0.0.1", "--seconds", "0.5",
                "--wait", "10", "--json"});
  EXPECT_TRUE(recv.started());
  std::this_thread::sleep_for(200ms);  // let the receiver bind before the first datagram
  Udpflow send({"send", "--to", "127.0.0.1:" + std::to_string(port), "--size", std::to_string(size),
                "--seconds", "0.3", "--json"});
  EXPECT_TRUE(send.started());
  EXPECT_EQ(send.finish(10s), 0);
  EXPECT_EQ(recv.finish(15s), 0);
  return {send.output(), recv.output()};
}

TEST(UdpflowLoopback, NumberedFlowIsReceivedWithLossAccounting) {
  const FlowRun r = run_flow(100);
  const auto sent = json_uint(r.sender, "packets");
  const auto got = json_uint(r.receiver, "packets");
  ASSERT_TRUE(sent) << r.sender;
  ASSERT_TRUE(got) << r.receiver;
  EXPECT_GT(*sent, 0u);
  EXPECT_GT(*got, 0u);
  EXPECT_LE(*got, *sent);
  EXPECT_EQ(json_uint(r.receiver, "bytes"), *got * 100);
  // Sequence numbers were carried: the receiver reports a loss figure, and never more loss
  // than datagrams sent.
  const auto lost = json_uint(r.receiver, "lost");
  ASSERT_TRUE(lost) << r.receiver;
  EXPECT_LE(*lost, *sent);
}

TEST(UdpflowLoopback, OneBytePayloadsAreCountedWithoutLossFigure) {
  const FlowRun r = run_flow(1);
  const auto got = json_uint(r.receiver, "packets");
  ASSERT_TRUE(got) << r.receiver;
  EXPECT_GT(*got, 0u);
  EXPECT_EQ(json_uint(r.receiver, "bytes"), *got);
  EXPECT_FALSE(json_uint(r.receiver, "lost")) << r.receiver;
}

TEST(UdpflowLoopback, ReceiverWithoutTrafficGivesUpAfterWait) {
  const std::uint16_t port = free_udp_port();
  Udpflow recv({"recv", "--port", std::to_string(port), "--bind", "127.0.0.1", "--seconds", "1",
                "--wait", "0.2"});
  ASSERT_TRUE(recv.started());
  EXPECT_EQ(recv.finish(10s), 1);
  EXPECT_NE(recv.output().find("received=0 "), std::string::npos) << recv.output();
}

TEST(UdpflowLoopback, UsageErrorExitsWithTwo) {
  Udpflow bad({"send", "--to", "127.0.0.1:9", "--size", "0", "--seconds", "1"});
  ASSERT_TRUE(bad.started());
  EXPECT_EQ(bad.finish(10s), 2);
}

}  // namespace
