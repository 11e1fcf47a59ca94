#include "tools/ctl/metrics_server.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "common/util/parse_decimal.hpp"
#include "tools/ctl/prometheus.hpp"

namespace unetback::ctl {
namespace {

// A scrape request is a few hundred bytes; more than this is not one.
constexpr std::size_t kMaxHead = 8192;
// How long a finished connection may still send before it is closed (serve).
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

bool head_complete(std::string_view head) {
  return head.find("\r\n\r\n") != std::string_view::npos ||
         head.find("\n\n") != std::string_view::npos;
}

/// One connection: reading its request head, writing its answer, or lingering (reading and
/// dropping what it still sends after the answer, so that closing does not reset it).
struct Client {
  enum class Phase : std::uint8_t { head, answer, linger };
  UniqueFd fd;
  Phase phase = Phase::head;
  std::chrono::steady_clock::time_point deadline;
  std::string head;
  std::string out;
  std::size_t sent = 0;
};

/// Reads what `c` sent (up to the end of its request head while that is read); false when it
/// hung up or failed (the connection is then done).
bool take_input(Client& c) {
  for (;;) {
    char chunk[2048];
    const ssize_t n = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      if (c.phase != Client::Phase::head) continue;  // lingering: dropped
      c.head.append(chunk, static_cast<std::size_t>(n));
      if (c.head.size() > kMaxHead || head_complete(c.head)) return true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

/// Sends what is left of the answer; false when the client is gone.
bool send_answer(Client& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    c.sent += static_cast<std::size_t>(n);
  }
  return true;
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
  if (address.starts_with("unix:")) return listen_unix(address.substr(5));
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
  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  std::error_code ec;
  if (!fd) ec = last_errno();
  const int one = 1;
  if (!ec) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!ec && ::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) ec = last_errno();
  ::freeaddrinfo(res);
  if (!ec && ::listen(fd.get(), SOMAXCONN) != 0) ec = last_errno();
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
  return MetricsServer(std::move(fd), shown + ":" + std::to_string(bound_port), {});
}

Result<MetricsServer> MetricsServer::listen_unix(std::string_view path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa.sun_path || path.find('\0') != path.npos)
    return std::errc::invalid_argument;
  std::memcpy(sa.sun_path, path.data(), path.size());
  const std::string file(path);
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) {
    // Only a socket nobody serves any more is ours to replace.
    if (!S_ISSOCK(st.st_mode)) return std::errc::file_exists;
    const UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return last_errno();
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0)
      return std::errc::address_in_use;
    if (::unlink(file.c_str()) != 0) return last_errno();
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return last_errno();
  // 0600 from its creation: no moment in which another local user may connect.
  const mode_t old_mask = ::umask(0177);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) return std::error_code(bind_errno, std::system_category());
  MetricsServer server(std::move(fd), "unix:" + file, file);
  if (::listen(server.fd_.get(), SOMAXCONN) != 0) return last_errno();
  return server;
}

MetricsServer::MetricsServer(MetricsServer&& o) noexcept
    : fd_(std::move(o.fd_)),
      address_(std::move(o.address_)),
      unix_path_(std::exchange(o.unix_path_, std::string())) {}

MetricsServer::~MetricsServer() {
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

MetricsSource snapshot_source(MetricsSource source, std::chrono::milliseconds interval) {
  struct Snapshot {
    std::optional<std::chrono::steady_clock::time_point> taken;
    MetricsFetch fetch;
  };
  return [source = std::move(source), interval, last = std::make_shared<Snapshot>()] {
    const auto now = std::chrono::steady_clock::now();
    if (!last->taken || now - *last->taken >= interval) {
      last->fetch = source();
      last->taken = now;
    }
    return last->fetch;
  };
}

std::error_code MetricsServer::serve(const MetricsSource& source, const ServeOptions& options,
                                     int stop_fd) {
  using Clock = std::chrono::steady_clock;
  std::vector<Client> clients;
  std::vector<pollfd> polled;
  for (;;) {
    // What each connection waits for, and the nearest deadline.
    polled.clear();
    polled.push_back({clients.size() < options.max_clients ? fd_.get() : -1, POLLIN, 0});
    polled.push_back({stop_fd, POLLIN, 0});
    auto wake = Clock::time_point::max();
    for (const auto& c : clients) {
      polled.push_back(
          {c.fd.get(), static_cast<short>(c.phase == Client::Phase::answer ? POLLOUT : POLLIN), 0});
      wake = std::min(wake, c.deadline);
    }
    const int timeout = wake == Clock::time_point::max() ? -1 : remaining_ms(wake);
    const int r = ::poll(polled.data(), polled.size(), timeout);
    if (r < 0 && errno != EINTR) return last_errno();
    if (polled[1].revents != 0) return {};
    const auto now = Clock::now();
    // Each connection's turn; one that is done, failed or past its deadline goes.
    for (std::size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      const int ev = r > 0 ? polled[i + 2].revents : 0;
      bool keep = true;
      if (ev != 0 && c.phase != Client::Phase::answer) {
        keep = take_input(c);
        if (keep && c.phase == Client::Phase::head &&
            (c.head.size() > kMaxHead || head_complete(c.head))) {
          const HttpResponse answer_now = c.head.size() > kMaxHead
                                              ? plain(431, "request head too large")
                                              : answer(parse_request_line(c.head), source);
          c.out = serialize(answer_now);
          c.head.clear();
          c.phase = Client::Phase::answer;
          c.deadline = Clock::now() + options.write_timeout;
        }
      }
      if (keep && c.phase == Client::Phase::answer && (ev != 0 || c.sent == 0)) {
        keep = send_answer(c);
        if (keep && c.sent == c.out.size()) {
          // Closing with unread request bytes would reset the connection, and the client
          // could lose the answer (a 400 or 431 to a request it is still sending): say we
          // are done, then read and drop what it still sends, briefly.
          ::shutdown(c.fd.get(), SHUT_WR);
          c.phase = Client::Phase::linger;
          c.deadline = std::min(c.deadline, Clock::now() + kLinger);
        }
      }
      if (keep && now >= c.deadline) keep = false;
      if (!keep) {
        clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
        polled.erase(polled.begin() + static_cast<std::ptrdiff_t>(i) + 2);
        --i;
      }
    }
    if (r <= 0 || (polled[0].revents & POLLIN) == 0) continue;
    // New connections, as many as there is room for.
    while (clients.size() < options.max_clients) {
      UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (conn) {
        Client c;
        c.fd = std::move(conn);
        c.deadline = Clock::now() + options.header_timeout;
        clients.push_back(std::move(c));
        continue;
      }
      // A client that connected and went away before accept(), or none left: not a failure.
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      // Out of descriptors or memory for a moment: the client waits in the backlog, and the
      // connections being served go on (the next accept is tried after the next event).
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) break;
      return last_errno();
    }
  }
}

}  // namespace unetback::ctl
