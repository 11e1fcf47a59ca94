// The evtchn device's batch calls: every pending port in one read() and every unmask in one
// write(), as Linux's /dev/xen/evtchn takes them (4 bytes a port). A non-blocking pipe stands
// in for the device's byte stream: what the "kernel" queued is what one read returns.
#include "common/hv/xen/evtchn_device.hpp"

#include <array>
#include <cstdint>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::hv {
namespace {

struct Pipe {
  UniqueFd r, w;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    r.reset(fds[0]);
    w.reset(fds[1]);
  }
  void raise(std::initializer_list<std::uint32_t> ports) const {
    const std::vector<std::uint32_t> v(ports);
    ASSERT_EQ(::write(w.get(), v.data(), v.size() * 4), static_cast<ssize_t>(v.size() * 4));
  }
};

TEST(EvtchnDevice, TheTxAndRxPortsOfOneWakeupComeInOneRead) {
  Pipe p;
  p.raise({7, 8});
  std::array<Port, 8> out{};
  auto n = read_pending_ports(p.r.get(), out);
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 2u);
  EXPECT_EQ(out[0], Port{7});
  EXPECT_EQ(out[1], Port{8});
  auto again = read_pending_ports(p.r.get(), out);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0u) << "nothing left: EAGAIN is an empty batch, not an error";
}

TEST(EvtchnDevice, MorePendingPortsThanRoomAreLeftForTheNextRead) {
  Pipe p;
  p.raise({1, 2, 3});
  std::array<Port, 2> out{};
  auto n = read_pending_ports(p.r.get(), out);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 2u);
  auto rest = read_pending_ports(p.r.get(), out);
  ASSERT_TRUE(rest);
  ASSERT_EQ(*rest, 1u);
  EXPECT_EQ(out[0], Port{3});
}

TEST(EvtchnDevice, AReadOfAClosedHandleIsAnErrorNotAnEmptyBatch) {
  std::array<Port, 2> out{};
  auto n = read_pending_ports(-1, out);
  EXPECT_FALSE(n);
  EXPECT_EQ(n.error(), std::errc::bad_file_descriptor);
}

TEST(EvtchnDevice, BothPortsAreUnmaskedWithOneWriteOfFourBytesEach) {
  Pipe p;
  const std::array<Port, 2> ports{Port{7}, Port{8}};
  EXPECT_FALSE(write_unmask_ports(p.w.get(), ports));
  std::array<std::uint32_t, 4> got{};
  ASSERT_EQ(::read(p.r.get(), got.data(), sizeof got), 8) << "one write of two ports";
  EXPECT_EQ(got[0], 7u);
  EXPECT_EQ(got[1], 8u);
  EXPECT_FALSE(write_unmask_ports(p.w.get(), {})) << "nothing to unmask: no write, no error";
}

}  // namespace
}  // namespace unetback::hv
