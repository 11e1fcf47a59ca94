// `unetback-ctl metrics --listen ADDR:PORT|unix:PATH`: a minimal HTTP/1.0-style server for
// Prometheus scrapes. GET /metrics answers with the daemon's counters (prometheus.hpp), any
// other path 404, another method 405, a request that is not HTTP 400, and 503 while the daemon
// cannot be reached, so the scraper records the gap instead of the server dying. Every
// connection is served at once beside the others (up to ServeOptions::max_clients; more wait
// in the listen backlog), each bounded by deadlines: a client that sends no complete request
// head in a short time, or does not read its answer, is dropped, and never delays another.
// Each is answered with Connection: close. The daemon is asked at most once per
// ServeOptions::min_interval however many clients scrape (snapshot_source).
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

/// `source`, asked at most once per `interval`: a call within `interval` of the last fetch
/// gets that fetch's answer again. However many clients scrape, and however often, the
/// daemon answers one `stats` request per interval.
[[nodiscard]] MetricsSource snapshot_source(MetricsSource source,
                                            std::chrono::milliseconds interval);

struct ServeOptions {
  /// From accept to the blank line ending the request head.
  std::chrono::milliseconds header_timeout{std::chrono::seconds(2)};
  /// From the answer being ready to the client having taken all of it.
  std::chrono::milliseconds write_timeout{std::chrono::seconds(10)};
  /// Connections served at once; more wait in the listen backlog.
  std::size_t max_clients = 64;
};

class MetricsServer {
 public:
  /// Binds and listens on "ADDR:PORT" (IPv4, or "[v6]:PORT"; port 0 picks a free one) or on
  /// "unix:PATH", a Unix socket of mode 0600 (a stale socket file there is replaced; a live
  /// one, or anything else, is refused). The Unix socket's file is removed with the server.
  static Result<MetricsServer> listen(std::string_view address);

  MetricsServer(MetricsServer&& o) noexcept;
  MetricsServer& operator=(MetricsServer&&) = delete;
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

  /// "ADDR:PORT" as bound (the real port when 0 was asked for), or "unix:PATH".
  [[nodiscard]] const std::string& address() const { return address_; }

  /// Serves every connection until `stop_fd` (if not -1) becomes readable. Errors of one
  /// connection are its own. Returns an error only if accept() or poll() fail for a reason
  /// other than a vanished client or a moment without descriptors.
  std::error_code serve(const MetricsSource& source, const ServeOptions& options = {},
                        int stop_fd = -1);

 private:
  static Result<MetricsServer> listen_unix(std::string_view path);
  MetricsServer(UniqueFd fd, std::string address, std::string unix_path)
      : fd_(std::move(fd)), address_(std::move(address)), unix_path_(std::move(unix_path)) {}
  UniqueFd fd_;
  std::string address_;
  std::string unix_path_;  // the socket file to remove (Unix socket only)
};

}  // namespace unetback::ctl
