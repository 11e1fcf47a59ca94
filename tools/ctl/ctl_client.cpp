#include "tools/ctl/ctl_client.hpp"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace unetback::ctl {
namespace {

// Replies are single lines; this only stops a broken peer from exhausting memory.
constexpr std::size_t kMaxReply = 64U * 1024 * 1024;

}  // namespace

Result<CtlClient> CtlClient::connect(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) return std::errc::filename_too_long;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return last_errno();
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return last_errno();
  return CtlClient(std::move(fd));
}

Result<std::string> CtlClient::request(std::string_view line, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto remaining_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
  };
  std::string out(line);
  out += '\n';
  std::size_t sent = 0;
  while (sent < out.size()) {
    pollfd p{fd_.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms()) <= 0) return std::errc::timed_out;
    const ssize_t n = ::send(fd_.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return last_errno();
    }
    sent += static_cast<std::size_t>(n);
  }
  for (;;) {
    if (const auto nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string reply = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return reply;
    }
    if (buffered_.size() > kMaxReply) return std::errc::message_size;
    pollfd p{fd_.get(), POLLIN, 0};
    const int r = ::poll(&p, 1, remaining_ms());
    if (r == 0) return std::errc::timed_out;
    if (r < 0) {
      if (errno == EINTR) continue;
      return last_errno();
    }
    char chunk[65536];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n == 0) return std::errc::connection_reset;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return last_errno();
    }
    buffered_.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace unetback::ctl
