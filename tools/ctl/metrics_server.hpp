// `unetback-ctl metrics --listen ADDR:PORT`: a minimal HTTP/1.0-style server for Prometheus
// scrapes. GET /metrics answers with the daemon's counters (prometheus.hpp), any other path
// 404, another method 405, a request that is not HTTP 400, and 503 while the daemon cannot be
// reached, so the scraper records the gap instead of the server dying. One connection at a
// time, each bounded by a deadline (a client that sends nothing, or reads nothing, is dropped
// when it passes), each answered with Connection: close.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::ctl {

/// The request line of an HTTP request head ("GET /metrics HTTP/1.1").
struct HttpRequestLine {
  std::string method;
  std::string target;
};

/// The request line of `head` (the bytes up to the blank line), or nullopt if it is not
/// "METHOD SP TARGET SP HTTP/x.y".
[[nodiscard]] std::optional<HttpRequestLine> parse_request_line(std::string_view head);

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
};

/// The response as bytes on the wire (status line, Content-Type, Content-Length, Connection:
/// close, then the body).
[[nodiscard]] std::string serialize(const HttpResponse& r);

/// What a scrape gets: the exposition text, or why there is none (the daemon is not
/// reachable, its reply is not JSON, ...).
struct MetricsFetch {
  bool ok = false;
  std::string text;
};
using MetricsSource = std::function<MetricsFetch()>;

/// The answer to a request (nullopt: the head was not HTTP). Calls `source` only for
/// GET /metrics (a query string is ignored).
[[nodiscard]] HttpResponse answer(const std::optional<HttpRequestLine>& request,
                                  const MetricsSource& source);

class MetricsServer {
 public:
  /// Binds and listens on "ADDR:PORT" (IPv4, or "[v6]:PORT"); port 0 picks a free one.
  static Result<MetricsServer> listen(std::string_view address);

  /// "ADDR:PORT" as bound (the real port when 0 was asked for).
  [[nodiscard]] const std::string& address() const { return address_; }

  /// Accepts one connection and answers it; a client slower than `client_timeout` (to send
  /// its request head, or to take the response) is dropped. Errors of that connection are
  /// its own: the server keeps listening. Returns an error only if accept() itself fails for
  /// a reason other than a vanished client.
  std::error_code serve_one(const MetricsSource& source,
                            std::chrono::milliseconds client_timeout = std::chrono::seconds(5));

 private:
  MetricsServer(UniqueFd fd, std::string address)
      : fd_(std::move(fd)), address_(std::move(address)) {}
  UniqueFd fd_;
  std::string address_;
};

}  // namespace unetback::ctl
