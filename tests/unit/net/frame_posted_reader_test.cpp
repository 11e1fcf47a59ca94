// FramePostedReader: reads posted on a non-blocking fd wait in the kernel for frames to come
// (io_uring parks them; Linux 6.1's TAP leaves no other way to batch), each frame that comes
// completes one of them without a syscall of the reader's, the ring's fd turns readable, and
// the frames are reported in the order they came. Cancelling returns every buffer, and no
// buffer is written after. A SOCK_SEQPACKET pair keeps frame boundaries, as a TAP does, and
// its reads park in io_uring as a 6.1 TAP's do.
#include "common/net/frame_posted_reader.hpp"

#include <array>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::net {
namespace {

struct PostedReadPair {
  UniqueFd sender, receiver;
  PostedReadPair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    sender.reset(sv[0]);
    receiver.reset(sv[1]);
    EXPECT_EQ(::fcntl(receiver.get(), F_SETFL, O_NONBLOCK), 0);
  }
  void send(const std::string& f) const {
    ASSERT_EQ(::send(sender.get(), f.data(), f.size(), 0), static_cast<ssize_t>(f.size()));
  }
};

std::string frame(int i) {
  return "frame-" + std::to_string(i) + std::string(static_cast<std::size_t>(i % 50), 'x');
}

using namespace std::chrono_literals;

// How long a wait for something that must come may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr auto kHangGuard = 30s;

/// Whether thread `tid` of this process sleeps in epoll_wait now (its
/// /proc/self/task/<tid>/syscall names the system call it sleeps in); nullopt if the kernel
/// does not say.
std::optional<bool> sleeps_in_epoll_wait(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  if (!(f >> first)) return std::nullopt;
  if (first == "running") return false;
  const long nr = std::strtol(first.c_str(), nullptr, 10);
  bool epoll = nr == SYS_epoll_pwait;
#ifdef SYS_epoll_wait
  epoll = epoll || nr == SYS_epoll_wait;
#endif
#ifdef SYS_epoll_pwait2
  epoll = epoll || nr == SYS_epoll_pwait2;
#endif
  return epoll;
}

bool ring_readable(const FramePostedReader& r, int timeout_ms) {
  pollfd p{r.ring_fd(), POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

struct PostedBuffers {
  std::vector<std::array<std::byte, 256>> mem;
  explicit PostedBuffers(std::size_t n) : mem(n) {
    for (auto& m : mem) m.fill(std::byte{0xa5});
  }
  std::span<std::byte> operator[](std::size_t i) { return mem[i]; }
  std::string text(std::uint32_t i, std::size_t len) const {
    return {reinterpret_cast<const char*>(mem[i].data()), len};
  }
  bool untouched(std::size_t i) const {
    for (auto b : mem[i]) {
      if (b != std::byte{0xa5}) return false;
    }
    return true;
  }
};

/// A reader of `depth` on a fresh pair with `buffers` buffers; every completion lands in
/// `got` (tag, length), in order.
class PostedReads : public ::testing::Test {
 protected:
  void open(std::size_t depth, std::size_t buffers) {
    r_.emplace(p_.receiver.get(), depth);
    b_.emplace(buffers);
  }
  FramePostedReader& r() { return *r_; }
  auto on_frame() {
    return [this](std::uint32_t tag, std::size_t len) { got_.emplace_back(tag, len); };
  }
  /// Posts buffers 0..n-1 (tag: the index) and submits them in one call.
  void post_and_submit(std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) ASSERT_TRUE(r().post((*b_)[i], i));
    ASSERT_FALSE(r().submit(on_frame()));
  }
  /// The frames completed so far, as text, in order.
  std::vector<std::string> frames() const {
    std::vector<std::string> out;
    for (const auto& [tag, len] : got_) {
      if (len != 0) out.push_back(b_->text(tag, len));
    }
    return out;
  }

  PostedReadPair p_;
  std::optional<FramePostedReader> r_;
  std::optional<PostedBuffers> b_;
  std::vector<std::pair<std::uint32_t, std::size_t>> got_;
};

TEST_F(PostedReads, FramesThatComeAfterThePostCompleteTheParkedReadsWithoutASyscall) {
  open(8, 8);
  if (!r().is_open()) GTEST_SKIP() << "io_uring unavailable here";
  post_and_submit(4);
  EXPECT_TRUE(got_.empty()) << "nothing to read yet: the reads wait in the kernel";
  EXPECT_EQ(r().in_flight(), 4U);
  EXPECT_FALSE(ring_readable(r(), 0));
  for (int i = 0; i < 3; ++i) p_.send(frame(i));
  ASSERT_TRUE(ring_readable(r(), 2000)) << "each frame completes a parked read";
  EXPECT_EQ(r().reap(on_frame()), 3U);
  EXPECT_EQ(frames(), (std::vector<std::string>{frame(0), frame(1), frame(2)}))
      << "frames are reported whole, in the order they came";
  EXPECT_EQ(r().in_flight(), 1U);
  EXPECT_EQ(r().syscalls(), 1U) << "one io_uring_enter posted the reads; the frames cost none";
  r().cancel_all(on_frame());
}

TEST_F(PostedReads, AFrameFromAnotherThreadWakesTheReaderAsleepInEpollOnTheRing) {
  // The daemon's queue thread sleeps in epoll_wait with the ring's fd in its set: a frame
  // written by another thread must wake it (the parked read's completion runs as this
  // thread's task work, which interrupts the wait), or guest RX would stall until some
  // other event came.
  open(4, 4);
  if (!r().is_open()) GTEST_SKIP() << "io_uring unavailable here";
  post_and_submit(4);
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(::epoll_ctl(ep.get(), EPOLL_CTL_ADD, r().ring_fd(), &ev), 0);
  // The frame is sent once this thread sleeps in epoll_wait (where the kernel cannot tell,
  // at once: the test then shows only that the frame is seen).
  const pid_t waiter = ::gettid();
  std::thread sender([&] {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (sleeps_in_epoll_wait(waiter).value_or(true) == false &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    p_.send(frame(42));
  });
  int n = 0;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (n <= 0 && std::chrono::steady_clock::now() < deadline) {
    n = ::epoll_wait(ep.get(), &ev, 1, 1000);  // EINTR: the task work ran, wait again
    if (n < 0) {
      EXPECT_EQ(errno, EINTR);
    }
  }
  sender.join();
  ASSERT_EQ(n, 1) << "the ring's fd turned readable while this thread slept";
  (void)r().reap(on_frame());
  EXPECT_EQ(frames(), std::vector<std::string>{frame(42)});
  r().cancel_all(on_frame());
}

TEST_F(PostedReads, FramesAlreadyWaitingCompleteInsideTheSubmittingCall) {
  open(8, 4);
  if (!r().is_open()) GTEST_SKIP() << "io_uring unavailable here";
  p_.send(frame(7));
  p_.send(frame(8));
  post_and_submit(4);
  (void)r().reap(on_frame());
  EXPECT_EQ(frames(), (std::vector<std::string>{frame(7), frame(8)}));
  EXPECT_EQ(r().in_flight(), 2U) << "the other two wait for frames";
  r().cancel_all(on_frame());
}

TEST(FramePostedReader, NoMoreThanDepthReadsArePosted) {
  PostedReadPair p;
  FramePostedReader r(p.receiver.get(), 2);
  if (!r.is_open()) GTEST_SKIP() << "io_uring unavailable here";
  PostedBuffers b(3);
  EXPECT_TRUE(r.post(b[0], 0));
  EXPECT_TRUE(r.post(b[1], 1));
  EXPECT_FALSE(r.post(b[2], 2));
  std::size_t back = 0;
  r.cancel_all([&](std::uint32_t, std::size_t) { ++back; });
  EXPECT_EQ(back, 2U) << "queued reads, never submitted, come back too";
}

TEST_F(PostedReads, CancelReturnsEveryBufferAndNoneIsWrittenAfterwards) {
  open(8, 8);
  if (!r().is_open()) GTEST_SKIP() << "io_uring unavailable here";
  post_and_submit(8);
  r().cancel_all(on_frame());
  EXPECT_EQ(got_.size(), 8U);
  EXPECT_TRUE(frames().empty());
  EXPECT_EQ(r().in_flight(), 0U);
  p_.send(frame(1));
  // A frame goes to one reader only: if this recv gets it, no cancelled read took it, and
  // none can write a buffer with it afterwards.
  pollfd pfd{p_.receiver.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, static_cast<int>(std::chrono::milliseconds(kHangGuard).count())), 1)
      << "the frame never reached the fd: a cancelled read took it";
  char c[256];
  EXPECT_EQ(::recv(p_.receiver.get(), c, sizeof c, 0), static_cast<ssize_t>(frame(1).size()))
      << "the frame is still the fd's: no cancelled read took it";
  EXPECT_FALSE(ring_readable(r(), 0)) << "a completion came after cancel_all";
  for (std::size_t i = 0; i < 8; ++i) EXPECT_TRUE(b_->untouched(i)) << "buffer " << i;
}

TEST(FramePostedReader, AThousandFramesInBurstsArriveWholeAndInOrderWithBuffersPostedAgain) {
  PostedReadPair p;
  FramePostedReader r(p.receiver.get(), 16);
  if (!r.is_open()) GTEST_SKIP() << "io_uring unavailable here";
  PostedBuffers b(16);
  int next_expected = 0, sent = 0;
  std::vector<std::uint32_t> free_bufs;
  const auto on_frame = [&](std::uint32_t tag, std::size_t len) {
    if (len != 0) {
      EXPECT_EQ(b.text(tag, len), frame(next_expected)) << "frame " << next_expected;
      ++next_expected;
    }
    free_bufs.push_back(tag);
  };
  for (std::uint32_t i = 0; i < 16; ++i) free_bufs.push_back(i);
  std::uint64_t submits = 0;
  while (next_expected < 1000) {
    for (const auto t : free_bufs) ASSERT_TRUE(r.post(b[t], t));
    free_bufs.clear();
    ASSERT_FALSE(r.submit(on_frame));
    ++submits;
    const int burst = std::min(1 + sent % 13, 1000 - sent);
    for (int i = 0; i < burst; ++i) p.send(frame(sent++));
    if (next_expected < sent) {
      ASSERT_TRUE(ring_readable(r, 2000));
    }
    (void)r.reap(on_frame);
  }
  EXPECT_EQ(next_expected, 1000);
  EXPECT_LE(r.syscalls(), submits) << "one io_uring_enter per burst, none per frame";
  r.cancel_all(on_frame);
}

}  // namespace
}  // namespace unetback::net
