#include "tools/ctl/metrics_server.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util/parse_decimal.hpp"
#include "tools/ctl/prometheus.hpp"

namespace unetback::ctl {
namespace {

// A scrape request is a few hundred bytes; more than this is not one.
constexpr std::size_t kMaxHead = 8192;
// How long a finished connection may still send before it is closed (serve_one).
constexpr std::chrono::milliseconds kLinger{500};

std::string_view reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
  }
  return "Error";
}

HttpResponse plain(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body) + "\n"};
}

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

/// Reads until the blank line ending the head. nullopt: the client sent nothing complete in
/// time or hung up; a head over kMaxHead comes back as it is (too long, answered 431).
std::optional<std::string> read_head(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string head;
  for (;;) {
    if (head.find("\r\n\r\n") != std::string::npos || head.find("\n\n") != std::string::npos)
      return head;
    if (head.size() > kMaxHead) return head;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r == 0) return std::nullopt;
    if (r < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    char chunk[2048];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n == 0) return std::nullopt;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::nullopt;
    }
    head.append(chunk, static_cast<std::size_t>(n));
  }
}

void write_all(int fd, std::string_view bytes, std::chrono::steady_clock::time_point deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd p{fd, POLLOUT, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r == 0) return;  // a client that does not read: dropped
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::optional<HttpRequestLine> parse_request_line(std::string_view head) {
  const auto eol = head.find('\n');
  std::string_view line = head.substr(0, eol);
  if (line.ends_with('\r')) line.remove_suffix(1);
  const auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return std::nullopt;
  const auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return std::nullopt;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!version.starts_with("HTTP/") || target.find(' ') != std::string_view::npos)
    return std::nullopt;
  for (const char c : method)
    if (c < 'A' || c > 'Z') return std::nullopt;
  return HttpRequestLine{std::string(method), std::string(target)};
}

std::string serialize(const HttpResponse& r) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(reason(r.status)) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\n";
  if (r.status == 405) out += "Allow: GET\r\n";
  out += "\r\n";
  out += r.body;
  return out;
}

HttpResponse answer(const std::optional<HttpRequestLine>& request, const MetricsSource& source) {
  if (!request) return plain(400, "not an HTTP request");
  const std::string_view path =
      std::string_view(request->target)
          .substr(0, std::min(request->target.find('?'), request->target.size()));
  if (path != "/metrics") return plain(404, "not found: the metrics are at /metrics");
  if (request->method != "GET") return plain(405, "only GET");
  MetricsFetch f = source();
  if (!f.ok) return plain(503, "unetbackd not reachable: " + f.text);
  return {200, std::string(kPrometheusContentType), std::move(f.text)};
}

Result<MetricsServer> MetricsServer::listen(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::errc::invalid_argument;
  std::string host(address.substr(0, colon));
  const std::string port(address.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || !parse_decimal<std::uint16_t>(port)) return std::errc::invalid_argument;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr)
    return std::errc::invalid_argument;
  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  std::error_code ec;
  if (!fd) ec = last_errno();
  const int one = 1;
  if (!ec) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!ec && ::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) ec = last_errno();
  ::freeaddrinfo(res);
  if (!ec && ::listen(fd.get(), 16) != 0) ec = last_errno();
  if (ec) return ec;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) return last_errno();
  char text[INET6_ADDRSTRLEN] = {};
  std::uint16_t bound_port = 0;
  std::string shown;
  if (bound.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&bound);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    bound_port = ntohs(a->sin6_port);
    shown = "[" + std::string(text) + "]";
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&bound);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    bound_port = ntohs(a->sin_port);
    shown = text;
  }
  return MetricsServer(std::move(fd), shown + ":" + std::to_string(bound_port));
}

std::error_code MetricsServer::serve_one(const MetricsSource& source,
                                         std::chrono::milliseconds client_timeout) {
  UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!conn) {
    // A client that connected and went away before accept(), or a signal: not our failure.
    if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EPROTO) return {};
    // Out of descriptors or memory for a moment: the client waits in the backlog.
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      ::poll(nullptr, 0, 100);
      return {};
    }
    return last_errno();
  }
  const auto deadline = std::chrono::steady_clock::now() + client_timeout;
  const auto head = read_head(conn.get(), deadline);
  if (!head) return {};  // said nothing in time, or hung up: nothing to answer
  HttpResponse r = head->size() > kMaxHead ? plain(431, "request head too large")
                                           : answer(parse_request_line(*head), source);
  write_all(conn.get(), serialize(r), deadline);
  // Closing with unread request bytes would reset the connection, and the client could lose
  // the answer (a 400 or 431 to a request it is still sending): say we are done, then read
  // and drop what it still sends, briefly.
  ::shutdown(conn.get(), SHUT_WR);
  const auto linger = std::min(deadline, std::chrono::steady_clock::now() + kLinger);
  char sink[4096];
  for (;;) {
    pollfd p{conn.get(), POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(linger)) != 1 || ::recv(conn.get(), sink, sizeof sink, 0) <= 0)
      break;
  }
  return {};
}

}  // namespace unetback::ctl
