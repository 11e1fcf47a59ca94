// ControlServer: the daemon's Unix stream socket for unetback-ctl. One request per line, one
// JSON line per reply, on the daemon's io_context (never a thread of its own).
//
// A client cannot crash or block the daemon: every operation is asynchronous; a line longer
// than Limits::max_line is answered with an error and the connection closed; the next request
// is read only once the previous reply is written (a client that does not read its replies
// stalls only itself, and is dropped after Limits::idle_timeout); at most
// Limits::max_connections clients at once (more are told so and closed).
//
// Out of descriptors (EMFILE/ENFILE), a pending client would make every accept fail at once
// and the loop spin. With an FdReserve the server closes one spare, accepts the client, tells
// it why and closes it, and reopens the spare; either way it logs (rate-limited) and waits
// Limits::accept_backoff before accepting again, so clients are answered again as soon as
// descriptors come back.
//
// The socket is created mode 0600 (the control socket changes daemon-wide tunables: root
// only). A stale socket file is replaced; a live one (another daemon answers) is a SetupError.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it

#include "common/util/fd_reserve.hpp"

namespace unetback::daemon {

class ControlServer {
 public:
  /// Answers one request line (without its newline) with one reply (without a newline).
  using Handler = std::function<std::string(std::string_view line)>;

  struct Limits {
    std::size_t max_line = 4096;
    std::size_t max_connections = 16;
    std::chrono::milliseconds idle_timeout = std::chrono::seconds(60);
    /// After an accept that failed (EMFILE, ENFILE, ENOMEM...), the pause before the next.
    std::chrono::milliseconds accept_backoff = std::chrono::milliseconds(100);
  };

  /// Binds and listens on `path` (creating its parent directory if missing) and starts
  /// accepting. Throws SetupError naming the path on failure. `reserve` (may be null, must
  /// outlive the server) lends a spare descriptor to answer a client under EMFILE.
  ControlServer(boost::asio::io_context& io, std::string path, Handler handler, Limits limits,
                FdReserve* reserve = nullptr);
  ControlServer(boost::asio::io_context& io, std::string path, Handler handler)
      : ControlServer(io, std::move(path), std::move(handler), Limits{}) {}
  /// Closes the listener and every connection and removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  /// Connections open now.
  [[nodiscard]] std::size_t connections() const;

  struct Shared;  // state the connections share with the server (defined in the .cpp)

 private:
  std::string path_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace unetback::daemon
