// FrameBatchReader: the frames waiting on a non-blocking fd land whole and in order in the
// buffers offered, through io_uring with one syscall for the whole batch (the empty read that
// ends a plain read() loop included), and with one read() per frame plus the ending one
// without it. A read io_uring would park never holds the caller. A SOCK_SEQPACKET pair keeps
// message boundaries, as a TAP keeps frames.
#include "common/net/frame_batch_reader.hpp"

#include <array>
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::net {
namespace {

struct BatchReadPair {
  UniqueFd sender, receiver;
  explicit BatchReadPair(bool nonblocking = true) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    sender.reset(sv[0]);
    receiver.reset(sv[1]);
    if (nonblocking) {
      EXPECT_EQ(::fcntl(receiver.get(), F_SETFL, O_NONBLOCK), 0);
    }
  }
  void send_frames(int first, int count) const {
    for (int i = first; i < first + count; ++i) {
      const std::string f =
          "frame-" + std::to_string(i) + std::string(static_cast<std::size_t>(i), 'x');
      ASSERT_EQ(::send(sender.get(), f.data(), f.size(), 0), static_cast<ssize_t>(f.size()));
    }
  }
};

std::string expected(int i) {
  return "frame-" + std::to_string(i) + std::string(static_cast<std::size_t>(i), 'x');
}

/// n buffers of 256 bytes, filled with a marker so an untouched buffer can be told.
struct BatchBuffers {
  std::vector<std::array<std::byte, 256>> mem;
  std::vector<std::span<std::byte>> spans;
  std::vector<std::size_t> sizes;
  explicit BatchBuffers(std::size_t n) : mem(n), sizes(n, 12345) {
    for (auto& m : mem) {
      m.fill(std::byte{0xa5});
      spans.emplace_back(m);
    }
  }
  std::string frame(std::size_t i) const {
    return {reinterpret_cast<const char*>(mem[i].data()), sizes[i]};
  }
  bool untouched(std::size_t i) const {
    for (auto b : mem[i]) {
      if (b != std::byte{0xa5}) return false;
    }
    return true;
  }
};

TEST(FrameBatchReader, FiveWaitingFramesAndTheEndOfTheBatchCostOneIoUringEnter) {
  BatchReadPair p;
  FrameBatchReader r(p.receiver.get(), 16);
  if (r.mode() != FrameBatchReader::Mode::io_uring)
    GTEST_SKIP() << "io_uring unavailable here (the read() path is tested below)";
  p.send_frames(0, 5);
  BatchBuffers b(8);
  EXPECT_EQ(r.read(b.spans, b.sizes), 8u);
  EXPECT_EQ(r.syscalls(), 1u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(b.frame(i), expected(static_cast<int>(i)));
  for (std::size_t i = 5; i < 8; ++i) {
    EXPECT_EQ(b.sizes[i], 0u) << "read " << i << " found nothing";
    EXPECT_TRUE(b.untouched(i));
  }
  EXPECT_EQ(r.parked_reads(), 0u);
  EXPECT_EQ(r.mode(), FrameBatchReader::Mode::io_uring);
}

TEST(FrameBatchReader, MoreFramesThanACallTakesAreLeftForTheNextInOrder) {
  BatchReadPair p;
  FrameBatchReader r(p.receiver.get(), 4);
  if (r.mode() != FrameBatchReader::Mode::io_uring) GTEST_SKIP() << "io_uring unavailable here";
  p.send_frames(0, 6);
  BatchBuffers b(8);
  EXPECT_EQ(r.read(b.spans, b.sizes), 4u) << "capacity 4: four reads per call";
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(b.frame(i), expected(static_cast<int>(i)));
  BatchBuffers c(8);
  EXPECT_EQ(r.read(c.spans, c.sizes), 4u);
  EXPECT_EQ(c.frame(0), expected(4));
  EXPECT_EQ(c.frame(1), expected(5));
  EXPECT_EQ(c.sizes[2], 0u);
  EXPECT_EQ(r.syscalls(), 2u);
}

TEST(FrameBatchReader, WithoutIoUringEachFrameIsOneReadAndTheEmptyReadEndsTheBatch) {
  BatchReadPair p;
  FrameBatchReader r(p.receiver.get(), 16, /*allow_io_uring=*/false);
  ASSERT_EQ(r.mode(), FrameBatchReader::Mode::read);
  p.send_frames(0, 3);
  BatchBuffers b(8);
  EXPECT_EQ(r.read(b.spans, b.sizes), 4u) << "three frames and the read that found nothing";
  EXPECT_EQ(r.syscalls(), 4u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(b.frame(i), expected(static_cast<int>(i)));
  EXPECT_EQ(b.sizes[3], 0u);
  EXPECT_TRUE(b.untouched(4)) << "not tried";
}

// io_uring parks a read of an empty non-blocking socket or TAP until data comes unless the
// read carries RWF_NOWAIT (O_NONBLOCK alone is not enough on Linux >= 6.0): a batch on an
// empty fd answers at once and leaves everything in place.
TEST(FrameBatchReader, AnEmptyFdAnswersTheBatchAtOnceWithoutParkingAnyRead) {
  BatchReadPair p;
  FrameBatchReader r(p.receiver.get(), 4);
  if (r.mode() != FrameBatchReader::Mode::io_uring) GTEST_SKIP() << "io_uring unavailable here";
  BatchBuffers b(4);
  EXPECT_EQ(r.read(b.spans, b.sizes), 4u);
  EXPECT_EQ(r.syscalls(), 1u);
  EXPECT_EQ(r.parked_reads(), 0u);
  EXPECT_EQ(r.mode(), FrameBatchReader::Mode::io_uring);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(b.untouched(i));
  p.send_frames(3, 1);
  BatchBuffers c(4);
  EXPECT_EQ(r.read(c.spans, c.sizes), 4u);
  EXPECT_EQ(c.frame(0), expected(3));
}

// Should a kernel park a read all the same (here: RWF_NOWAIT left off on purpose), it must not
// hold the queue's thread, and the parked read must not take a frame into a buffer its owner
// has given back: the reader cancels it, waits for the cancel, then reads with read().
TEST(FrameBatchReader, AParkedReadIsCancelledSoItNeverWritesIntoAReturnedBuffer) {
  BatchReadPair p;
  FrameBatchReader r(p.receiver.get(), 4, /*allow_io_uring=*/true, /*nowait=*/false);
  if (r.mode() != FrameBatchReader::Mode::io_uring) GTEST_SKIP() << "io_uring unavailable here";
  BatchBuffers b(4);
  EXPECT_EQ(r.read(b.spans, b.sizes), 4u) << "returned although nothing could be read";
  EXPECT_EQ(r.parked_reads(), 4u);
  EXPECT_EQ(r.mode(), FrameBatchReader::Mode::read) << "io_uring given up for this fd";
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(b.sizes[i], 0u);
  p.send_frames(7, 1);
  std::array<char, 256> got{};
  const ssize_t n = ::recv(p.receiver.get(), got.data(), got.size(), MSG_DONTWAIT);
  ASSERT_GT(n, 0) << "the frame is still in the fd: no cancelled read took it";
  EXPECT_EQ(std::string(got.data(), static_cast<std::size_t>(n)), expected(7));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(b.untouched(i)) << "buffer " << i;
}

}  // namespace
}  // namespace unetback::net
