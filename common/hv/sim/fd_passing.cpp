#include "common/hv/sim/fd_passing.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>

#include "common/hv/sim/broker_protocol.hpp"

namespace unetback::hv::sim {

namespace {
constexpr std::size_t kControlLen = CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage);
}

std::error_code send_packet(int sock, std::span<const std::byte> data, std::span<const int> fds) {
  if (fds.size() > kMaxFdsPerMessage) return errno_code(EINVAL);
  iovec iov{const_cast<std::byte*>(data.data()), data.size()};
  alignas(cmsghdr) char control[kControlLen] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0)
      return static_cast<std::size_t>(n) == data.size() ? std::error_code{} : errno_code(EMSGSIZE);
    if (errno != EINTR) return last_errno();
  }
}

Result<std::size_t> recv_packet(int sock, std::span<std::byte> buf, std::vector<UniqueFd>& fds) {
  fds.clear();
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[kControlLen] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return last_errno();
  // Take ownership of every descriptor first, so none leaks whatever happens next.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0 && fds.size() < kMaxFdsPerMessage) {
    // The buffer had room: the kernel dropped descriptors it could not install here
    // (scm_detach_fds: EMFILE, or over the limit), not a sender's excess.
    fds.clear();
    return errno_code(EMFILE);
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || fds.size() > kMaxFdsPerMessage) {
    fds.clear();
    return errno_code(EMSGSIZE);
  }
  return static_cast<std::size_t>(n);
}

}  // namespace unetback::hv::sim
