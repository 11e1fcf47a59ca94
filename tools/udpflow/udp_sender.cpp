#include "tools/udpflow/udp_sender.hpp"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include "tools/udpflow/seq_tracker.hpp"
#include "tools/udpflow/udp_socket.hpp"

namespace unetback::udpflow {

namespace {

using namespace std::chrono_literals;

/// Datagrams per sendmmsg: enough to amortise the syscall at small sizes, and at most about
/// 1 MiB of payload per batch at large ones.
std::size_t batch_for(std::uint32_t size) {
  return std::clamp<std::size_t>((std::size_t{1} << 20) / size, 1, 64);
}
/// A full device queue clears as the device sends; retry after about one batch's time.
constexpr auto kEnobufsBackoff = 50us;
/// After any other error (e.g. no route), do not retry in a tight loop.
constexpr auto kErrorBackoff = 1ms;

}  // namespace

Result<SendReport> run_send(const SendOptions& opts, const std::atomic<bool>& stop) {
  auto dest = make_sockaddr(opts.to, opts.port);
  if (!dest) return dest.error();
  auto sock = udp_socket(opts.to.ipv6);
  if (!sock) return sock.error();
  const int fd = sock->get();
  // A bigger socket buffer smooths bursts (capped by net.core.wmem_max; failure is harmless).
  const int sndbuf = 4 << 20;
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  if (::connect(fd, dest->get(), dest->len) < 0) return last_errno();

  const std::size_t batch = batch_for(opts.size);
  std::vector<std::byte> bufs(batch * opts.size);
  std::vector<iovec> iovs(batch);
  std::vector<mmsghdr> msgs(batch);
  for (std::size_t i = 0; i < batch; ++i) {
    iovs[i] = {bufs.data() + i * opts.size, opts.size};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const bool numbered = opts.size >= kSeqLen;

  SendReport r;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(opts.seconds));
  Clock::time_point now = start;
  while (now < deadline && !stop.load(std::memory_order_relaxed)) {
    std::size_t want = batch;
    if (opts.pps) {
      // Paced: send what is due by now (at most a batch, so a stall is not made up in one
      // burst), else sleep until the next datagram is due.
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const auto due_total = static_cast<std::uint64_t>(elapsed * static_cast<double>(*opts.pps));
      if (due_total <= r.packets) {
        const auto next =
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                        static_cast<double>(r.packets + 1) / static_cast<double>(*opts.pps)));
        std::this_thread::sleep_until(std::min(next, deadline));
        now = Clock::now();
        continue;
      }
      want = std::min<std::uint64_t>(want, due_total - r.packets);
    }
    if (numbered)
      for (std::size_t i = 0; i < want; ++i)
        encode_seq(std::span(bufs.data() + i * opts.size, opts.size), r.packets + i);
    const int n = ::sendmmsg(fd, msgs.data(), static_cast<unsigned>(want), 0);
    if (n > 0) {
      r.packets += static_cast<std::uint64_t>(n);
      r.bytes += static_cast<std::uint64_t>(n) * opts.size;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ++r.eagain;
      pollfd p{fd, POLLOUT, 0};
      (void)::poll(&p, 1, std::min(poll_timeout_ms(Clock::now(), deadline), 10));
    } else if (errno == ENOBUFS) {
      ++r.enobufs;
      std::this_thread::sleep_for(kEnobufsBackoff);
    } else if (errno != EINTR) {
      // ECONNREFUSED: an ICMP port unreachable from an earlier datagram (nobody listening
      // yet); the next send goes out again.
      ++r.errors;
      std::this_thread::sleep_for(kErrorBackoff);
    }
    now = Clock::now();
  }
  r.seconds = std::chrono::duration<double>(std::min(now, deadline) - start).count();
  return r;
}

}  // namespace unetback::udpflow
