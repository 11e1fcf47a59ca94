// FrameBatchWriter: a pass's frames reach the fd whole, in order, with one syscall per pass
// through io_uring (where the kernel offers it) and one per frame without it. A
// SOCK_SEQPACKET pair keeps message boundaries, as a TAP keeps frames.
#include "common/net/frame_batch_writer.hpp"

#include <array>
#include <csignal>
#include <cstring>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::net {
namespace {

struct BatchWritePair {
  UniqueFd writer_end, reader_end;
  BatchWritePair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    writer_end.reset(sv[0]);
    reader_end.reset(sv[1]);
    // Room for a whole pass of small frames without blocking.
    const int big = 4 << 20;
    ::setsockopt(writer_end.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    ::setsockopt(reader_end.get(), SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
};

/// Frame i: a header whose hdr_len is i, then two pieces "frame-<i>" and i+1 bytes of 'x'.
struct Frames {
  std::vector<std::string> head, tail;
  explicit Frames(int n) {
    for (int i = 0; i < n; ++i) {
      head.push_back("frame-" + std::to_string(i));
      tail.emplace_back(static_cast<std::size_t>(i + 1), 'x');
    }
  }
  std::string expected(int i) const { return head[i] + tail[i]; }
};

void add_all(FrameBatchWriter& w, Frames& f) {
  for (std::size_t i = 0; i < f.head.size(); ++i) {
    VirtioNetHdr h{};
    h.hdr.hdr_len = static_cast<std::uint16_t>(i);
    const std::array<iovec, 2> iov{iovec{f.head[i].data(), f.head[i].size()},
                                   iovec{f.tail[i].data(), f.tail[i].size()}};
    ASSERT_FALSE(w.add(h, iov));
  }
}

void expect_frames_in_order(int fd, const Frames& f) {
  for (std::size_t i = 0; i < f.head.size(); ++i) {
    std::array<std::byte, 512> buf{};
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    ASSERT_GT(n, static_cast<ssize_t>(kVnetHdrLen)) << "frame " << i;
    VirtioNetHdr h{};
    std::memcpy(&h, buf.data(), kVnetHdrLen);
    EXPECT_EQ(h.hdr.hdr_len, i);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()) + kVnetHdrLen,
                          static_cast<std::size_t>(n) - kVnetHdrLen),
              f.expected(static_cast<int>(i)));
  }
  std::array<std::byte, 16> extra{};
  EXPECT_LT(::recv(fd, extra.data(), extra.size(), MSG_DONTWAIT), 0) << "no frame beyond";
}

TEST(FrameBatchWriter, APassOfFramesIsOneSyscallThroughIoUring) {
  BatchWritePair p;
  FrameBatchWriter w(p.writer_end.get(), 64);
  if (w.mode() != FrameBatchWriter::Mode::io_uring)
    GTEST_SKIP() << "io_uring unavailable here (the writev path is tested below)";
  Frames f(40);
  add_all(w, f);
  EXPECT_EQ(w.syscalls(), 0u) << "nothing written before flush";
  std::vector<std::error_code> results(w.queued(), std::make_error_code(std::errc::io_error));
  w.flush(results);
  EXPECT_EQ(w.syscalls(), 1u);
  for (const auto& r : results) EXPECT_FALSE(r) << r.message();
  expect_frames_in_order(p.reader_end.get(), f);
}

TEST(FrameBatchWriter, WithoutIoUringEachFrameIsOneWritev) {
  BatchWritePair p;
  FrameBatchWriter w(p.writer_end.get(), 64, /*allow_io_uring=*/false);
  EXPECT_EQ(w.mode(), FrameBatchWriter::Mode::writev);
  Frames f(10);
  add_all(w, f);
  std::vector<std::error_code> results(w.queued());
  w.flush(results);
  EXPECT_EQ(w.syscalls(), 10u);
  for (const auto& r : results) EXPECT_FALSE(r);
  expect_frames_in_order(p.reader_end.get(), f);
}

TEST(FrameBatchWriter, MoreFramesThanTheCapacityAreAllWrittenInOrder) {
  BatchWritePair p;
  FrameBatchWriter w(p.writer_end.get(), 4);
  Frames f(11);
  add_all(w, f);
  std::vector<std::error_code> results(w.queued());
  w.flush(results);
  for (const auto& r : results) EXPECT_FALSE(r);
  expect_frames_in_order(p.reader_end.get(), f);
  // A second pass reuses the writer.
  Frames g(3);
  add_all(w, g);
  std::vector<std::error_code> again(w.queued());
  w.flush(again);
  expect_frames_in_order(p.reader_end.get(), g);
}

TEST(FrameBatchWriter, EachFailedWriteIsReportedForItsFrame) {
  ::signal(SIGPIPE, SIG_IGN);  // as unetbackd does: the error comes back as EPIPE
  for (const bool uring : {true, false}) {
    BatchWritePair p;
    FrameBatchWriter w(p.writer_end.get(), 8, uring);
    p.reader_end.reset();  // the peer is gone: every write fails (EPIPE)
    Frames f(3);
    add_all(w, f);
    std::vector<std::error_code> results(w.queued());
    w.flush(results);
    for (const auto& r : results) EXPECT_EQ(r, std::errc::broken_pipe) << "uring " << uring;
  }
}

TEST(FrameBatchWriter, AFrameOfTooManyPiecesIsRefusedAtOnce) {
  BatchWritePair p;
  FrameBatchWriter w(p.writer_end.get(), 8);
  std::vector<iovec> iov(FrameBatchWriter::kMaxIov, iovec{nullptr, 0});
  EXPECT_EQ(w.add(VirtioNetHdr{}, iov), std::errc::message_size);
  EXPECT_EQ(w.queued(), 0u);
}

}  // namespace
}  // namespace unetback::net
