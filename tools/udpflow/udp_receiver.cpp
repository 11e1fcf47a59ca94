#include "tools/udpflow/udp_receiver.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <vector>

#include "tools/udpflow/seq_tracker.hpp"
#include "tools/udpflow/udp_socket.hpp"

namespace unetback::udpflow {

namespace {

constexpr std::size_t kBatch = 256;
constexpr std::size_t kCmsgSpace = CMSG_SPACE(sizeof(std::uint32_t));

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Result<RecvOutcome> run_recv(const RecvOptions& opts, const std::atomic<bool>& stop) {
  const IpAddress any{"0.0.0.0", false};
  const IpAddress& bind_ip = opts.bind ? *opts.bind : any;
  auto addr = make_sockaddr(bind_ip, opts.port);
  if (!addr) return addr.error();
  auto sock = udp_socket(bind_ip.ipv6);
  if (!sock) return sock.error();
  const int fd = sock->get();
  // A large buffer, so the loss measured is the path's and not this socket's (capped by
  // net.core.rmem_max); the socket's own overflows are reported apart (SO_RXQ_OVFL).
  const int rcvbuf = 8 << 20;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
  if (::bind(fd, addr->get(), addr->len) < 0) return last_errno();

  std::vector<std::array<std::byte, kSeqLen>> heads(kBatch);
  std::vector<std::array<char, kCmsgSpace>> cmsgs(kBatch);
  std::vector<iovec> iovs(kBatch);
  std::vector<mmsghdr> msgs(kBatch);

  SeqTracker seqs;
  bool unnumbered = false;  // a datagram too short for a sequence number: no loss figure
  RecvOutcome out;
  RecvReport& r = out.report;
  const Clock::time_point start = Clock::now();
  const Clock::time_point first_deadline = start + to_duration(opts.wait);
  std::optional<Clock::time_point> window_start;
  if (opts.from_start) window_start = start;
  Clock::time_point now = start;
  bool window_over = false;
  while (!window_over && !stop.load(std::memory_order_relaxed)) {
    const Clock::time_point until =
        window_start ? *window_start + to_duration(opts.seconds) : first_deadline;
    if (now >= until) {
      window_over = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_timeout_ms(now, until));
    now = Clock::now();
    if (ready <= 0) continue;  // timeout or EINTR: the loop re-checks the clock and `stop`
    for (std::size_t i = 0; i < kBatch; ++i) {
      iovs[i] = {heads[i].data(), heads[i].size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = cmsgs[i].data();
      msgs[i].msg_hdr.msg_controllen = cmsgs[i].size();
    }
    // MSG_TRUNC: msg_len is the datagram's real length, though only 8 bytes are copied.
    const int n = ::recvmmsg(fd, msgs.data(), kBatch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
    now = Clock::now();
    if (n <= 0) continue;
    if (!window_start) window_start = now;  // the window opens with the first datagram
    if (now >= *window_start + to_duration(opts.seconds)) break;  // arrived after the window
    for (int i = 0; i < n; ++i) {
      const std::size_t len = msgs[i].msg_len;
      ++r.packets;
      r.bytes += len;
      if (len >= kSeqLen)
        seqs.on_packet(*decode_seq(heads[i]));
      else
        unnumbered = true;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
          std::uint32_t drops = 0;
          std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
          r.socket_drops = std::max<std::uint64_t>(r.socket_drops, drops);
        }
      }
    }
  }
  out.got_first = window_start.has_value() && (opts.from_start || r.packets > 0);
  if (window_start) {
    const Clock::time_point end = std::min(now, *window_start + to_duration(opts.seconds));
    r.seconds = std::chrono::duration<double>(end - *window_start).count();
  }
  if (!unnumbered && !seqs.empty()) {
    r.lost = seqs.lost();
    r.duplicates = seqs.duplicates();
    r.reordered = seqs.reordered();
  }
  return out;
}

}  // namespace unetback::udpflow
