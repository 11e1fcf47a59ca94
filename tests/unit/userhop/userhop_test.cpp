// The user-hop forwarder's pure parts: its command line, and the frame pump over
// SOCK_SEQPACKET socketpairs (one read is one frame, as on a TAP).
#include <array>
#include <cstddef>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>
#include <variant>
#include <vector>

#include "common/util/unique_fd.hpp"
#include "tools/userhop/frame_pump.hpp"
#include "tools/userhop/userhop_options.hpp"

namespace unetback::userhop {
namespace {

using Args = std::vector<std::string_view>;

std::variant<UserhopOptions, HelpRequested, std::string> parse(Args a) {
  return parse_userhop_options(a);
}

TEST(UserhopOptions, ParsesBothTapsWithTheirNamespaces) {
  auto r = parse({"--a", "ubh-a", "--b", "ubh-b", "--netns-a", "ubb-ha", "--netns-b", "ubb-hb",
                  "--mtu", "9000", "--budget", "32"});
  const auto* o = std::get_if<UserhopOptions>(&r);
  ASSERT_NE(o, nullptr) << std::get<std::string>(r);
  EXPECT_EQ(o->tap_a, "ubh-a");
  EXPECT_EQ(o->tap_b, "ubh-b");
  EXPECT_EQ(o->netns_a, "ubb-ha");
  EXPECT_EQ(o->netns_b, "ubb-hb");
  EXPECT_EQ(o->mtu, 9000U);
  EXPECT_EQ(o->budget, 32U);
  EXPECT_TRUE(o->offloads);
}

TEST(UserhopOptions, SameNameIsFineInDifferentNamespacesOnly) {
  EXPECT_TRUE(std::holds_alternative<UserhopOptions>(
      parse({"--a", "tap0", "--b", "tap0", "--netns-a", "x", "--netns-b", "y"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse({"--a", "tap0", "--b", "tap0"})));
}

TEST(UserhopOptions, RefusesBadInput) {
  EXPECT_TRUE(std::holds_alternative<std::string>(parse({"--a", "x"})));  // no --b
  EXPECT_TRUE(std::holds_alternative<std::string>(parse({"--a", "x", "--b"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse({"--a", "a/b", "--b", "y"})));
  EXPECT_TRUE(
      std::holds_alternative<std::string>(parse({"--a", "x", "--b", "y", "--netns-a", "../etc"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse({"--a", "x", "--b", "y", "--mtu", "67"})));
  EXPECT_TRUE(
      std::holds_alternative<std::string>(parse({"--a", "x", "--b", "y", "--budget", "0"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse({"--a", "x", "--b", "y", "--bogus", "1"})));
  EXPECT_TRUE(std::holds_alternative<HelpRequested>(parse({"--help"})));
}

TEST(UserhopOptions, ErrorsNameTheOptionAndTheEqualsFormWorks) {
  const auto error = [](Args a) {
    auto r = parse(a);
    return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string();
  };
  // An unknown last option is unknown, not an option short of its value.
  EXPECT_EQ(error({"--a", "x", "--b", "y", "--bogus"}), "unknown option --bogus");
  EXPECT_EQ(error({"--a", "x", "--b", "y", "stray", "1"}), "unexpected argument 'stray'");
  EXPECT_EQ(error({"--a", "x", "--b"}), "--b needs a value");
  EXPECT_EQ(error({"--a", "x", "--b", "y", "--no-offloads=1"}), "--no-offloads takes no value");
  const auto r = parse({"--a=x", "--b=y", "--budget=8"});
  const auto* o = std::get_if<UserhopOptions>(&r);
  ASSERT_NE(o, nullptr) << std::get<std::string>(r);
  EXPECT_EQ(o->tap_b, "y");
  EXPECT_EQ(o->budget, 8U);
}

// Two SOCK_SEQPACKET pairs: the test writes into src[0], the pump reads src[1] and writes
// dst[0], the test reads dst[1].
struct Wire {
  std::array<UniqueFd, 2> src;
  std::array<UniqueFd, 2> dst;
  Wire() {
    int s[2];
    int d[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, s), 0);
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, d), 0);
    src = {UniqueFd(s[0]), UniqueFd(s[1])};
    dst = {UniqueFd(d[0]), UniqueFd(d[1])};
  }
};

std::vector<std::byte> frame(std::size_t len, unsigned seed) {
  std::vector<std::byte> f(len);
  for (std::size_t i = 0; i < len; ++i) f[i] = static_cast<std::byte>((seed + i) & 0xFF);
  return f;
}

TEST(FramePump, ForwardsEachFrameWholeAndUnchanged) {
  Wire w;
  const std::array<std::size_t, 3> sizes{12 + 60, 12 + 1514, 12 + 30000};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto f = frame(sizes[i], static_cast<unsigned>(i));
    ASSERT_EQ(::write(w.src[0].get(), f.data(), f.size()), static_cast<ssize_t>(f.size()));
  }
  FramePump pump(w.src[1].get(), w.dst[0].get());
  EXPECT_EQ(pump.pump(64), PumpStatus::drained);
  EXPECT_EQ(pump.counters().frames, 3U);
  EXPECT_EQ(pump.counters().bytes, sizes[0] + sizes[1] + sizes[2]);
  std::vector<std::byte> got(FramePump::kDefaultBufferSize);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const ssize_t n = ::read(w.dst[1].get(), got.data(), got.size());
    ASSERT_EQ(n, static_cast<ssize_t>(sizes[i]));
    got.resize(static_cast<std::size_t>(n));
    EXPECT_EQ(got, frame(sizes[i], static_cast<unsigned>(i)));
    got.resize(FramePump::kDefaultBufferSize);
  }
}

TEST(FramePump, StopsAtTheBudgetAndResumes) {
  Wire w;
  for (unsigned i = 0; i < 5; ++i) {
    auto f = frame(100, i);
    ASSERT_EQ(::write(w.src[0].get(), f.data(), f.size()), 100);
  }
  FramePump pump(w.src[1].get(), w.dst[0].get());
  EXPECT_EQ(pump.pump(2), PumpStatus::more);
  EXPECT_EQ(pump.counters().frames, 2U);
  EXPECT_EQ(pump.pump(2), PumpStatus::more);
  EXPECT_EQ(pump.pump(2), PumpStatus::drained);
  EXPECT_EQ(pump.counters().frames, 5U);
}

TEST(FramePump, DropsAndCountsWhenTheDestinationIsFull) {
  Wire w;
  // Fill the destination until it refuses (nobody reads dst[1]).
  auto big = frame(8192, 1);
  std::size_t sent = 0;
  while (::write(w.dst[0].get(), big.data(), big.size()) > 0) ++sent;
  ASSERT_GT(sent, 0U);
  auto f = frame(8192, 2);
  ASSERT_EQ(::write(w.src[0].get(), f.data(), f.size()), 8192);
  FramePump pump(w.src[1].get(), w.dst[0].get());
  EXPECT_EQ(pump.pump(8), PumpStatus::drained);
  EXPECT_EQ(pump.counters().frames, 0U);
  EXPECT_EQ(pump.counters().write_dropped, 1U);
}

TEST(FramePump, ReportsAClosedSource) {
  Wire w;
  w.src[0].reset();
  FramePump pump(w.src[1].get(), w.dst[0].get());
  EXPECT_EQ(pump.pump(8), PumpStatus::closed);
}

TEST(FramePump, ReportsAFailingSource) {
  Wire w;
  UniqueFd not_readable(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(not_readable);
  FramePump pump(not_readable.get(), w.dst[0].get());
  EXPECT_EQ(pump.pump(8), PumpStatus::failed);
  EXPECT_EQ(pump.counters().read_errors, 1U);
  EXPECT_EQ(pump.error(), std::errc::bad_file_descriptor);
}

}  // namespace
}  // namespace unetback::userhop
