// NotifySocket: the service manager's end of sd_notify(3) for tests: a datagram socket bound at
// a path (what $NOTIFY_SOCKET names), from which each notification is read as systemd reads it,
// its text and the fds it carries (SCM_RIGHTS), received close-on-exec.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::test {

struct Notification {
  std::string text;
  std::vector<UniqueFd> fds;
};

class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    sock_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    ok_ = sock_ && path_.size() < sizeof a.sun_path;
    if (!ok_) return;
    std::copy(path_.begin(), path_.end(), a.sun_path);
    ok_ = ::bind(sock_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    // Large enough for every notification of a test between two reads.
    const int size = 4 << 20;
    (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
  }
  ~NotifySocket() { ::unlink(path_.c_str()); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  /// The next notification, waiting up to `timeout` for one; nullopt if none came.
  std::optional<Notification> receive(std::chrono::milliseconds timeout) {
    pollfd p{sock_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
    return receive();
  }

  /// The next notification already sent, or nullopt if none waits.
  std::optional<Notification> receive() {
    char text[512] = {};
    iovec iov{text, sizeof text - 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return std::nullopt;
    Notification out{std::string(text, static_cast<std::size_t>(n)), {}};
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < k; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        out.fds.emplace_back(fd);
      }
    }
    return out;
  }

 private:
  std::string path_;
  UniqueFd sock_;
  bool ok_ = false;
};

}  // namespace unetback::test
