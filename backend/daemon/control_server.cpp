#include "backend/daemon/control_server.hpp"

#include <array>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <list>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

#include "backend/daemon/private_dir.hpp"
#include "common/control/json_writer.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::daemon {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

namespace {
constexpr std::string_view kControlLog = "control";
}  // namespace

// Named (not anonymous): ControlServer::Shared, which has external linkage, refers to it.
namespace control_detail {
class Connection;
}  // namespace control_detail
using control_detail::Connection;

struct ControlServer::Shared {
  Shared(asio::io_context& io, Handler h, Limits l, FdReserve* r)
      : acceptor(io), backoff(io), handler(std::move(h)), limits(l), reserve(r) {}
  Local::acceptor acceptor;
  asio::steady_timer backoff;  // between failed accepts
  Handler handler;
  Limits limits;
  FdReserve* reserve;
  log::RateLimit accept_log_limit{3, std::chrono::seconds(10)};
  bool stopped = false;
  // Weak: a connection lives as long as its pending operations; the list lets stop() close them.
  std::list<std::weak_ptr<Connection>> connections;

  void prune() {
    connections.remove_if([](const std::weak_ptr<Connection>& w) { return w.expired(); });
  }
};

namespace control_detail {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Local::socket socket, std::shared_ptr<ControlServer::Shared> shared)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), shared_(std::move(shared)) {}

  void start() {
    arm_timer();
    do_read();
  }

  void close() {
    boost::system::error_code ignored;
    socket_.shutdown(Local::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
  }

 private:
  void arm_timer() {
    timer_.expires_after(shared_->limits.idle_timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec) return;  // re-armed or cancelled
      self->close();
    });
  }

  void do_read() {
    socket_.async_read_some(asio::buffer(chunk_),
                            [self = shared_from_this()](const boost::system::error_code& ec,
                                                        std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(const boost::system::error_code& ec, std::size_t n) {
    if (ec || shared_->stopped) return close();
    arm_timer();
    in_.append(chunk_.data(), n);
    serve_next();
  }

  /// Answers the first complete request line and writes the answer; the next line is taken
  /// only once that answer is written, and more is read only when no complete line is left.
  /// So a client that pipelines requests (thousands of `stats` in one write) holds one
  /// answer in the daemon at a time, and one that does not read its answers stops being
  /// served (and is dropped at its idle timeout).
  void serve_next() {
    if (shared_->stopped) return close();
    const auto nl = in_.find('\n');
    if (nl == std::string::npos) {
      if (in_.size() > shared_->limits.max_line)
        return write_and_close(control::json_error("request line too long") + "\n");
      return do_read();
    }
    if (nl > shared_->limits.max_line)
      return write_and_close(control::json_error("request line too long") + "\n");
    out_ = answer(std::string_view(in_.data(), nl)) + "\n";
    in_.erase(0, nl + 1);
    asio::async_write(
        socket_, asio::buffer(out_),
        [self = shared_from_this()](const boost::system::error_code& wec, std::size_t) {
          if (wec) return self->close();
          self->serve_next();
        });
  }

  /// The handler's reply; a request that fails unexpectedly (out of memory) is that
  /// request's error, not the daemon's.
  std::string answer(std::string_view line) {
    try {
      return shared_->handler(line);
    } catch (const std::exception& e) {
      return control::json_error(std::string("internal error: ") + e.what());
    }
  }

  void write_and_close(std::string out) {
    out_ = std::move(out);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const boost::system::error_code&, std::size_t) {
                        self->close();
                      });
  }

  Local::socket socket_;
  asio::steady_timer timer_;
  std::shared_ptr<ControlServer::Shared> shared_;
  std::array<char, 4096> chunk_{};
  std::string in_;
  std::string out_;
};

}  // namespace control_detail

namespace {

void do_accept(const std::shared_ptr<ControlServer::Shared>& shared);

/// Out of descriptors, the client that made accept fail is still queued: with a spare lent
/// by the reserve, take it off the queue, tell it why and close it.
void turn_away_one(ControlServer::Shared& shared) {
  if (shared.reserve == nullptr || !shared.reserve->release_spare()) return;
  UniqueFd fd(
      ::accept4(shared.acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (fd) {
    const std::string msg = control::json_error("the daemon is out of file descriptors") + "\n";
    (void)!::send(fd.get(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  fd.reset();
  shared.reserve->restore_spares();
}

/// A failed accept: log (limited), answer what we can, and accept again after a pause, since
/// the cause (EMFILE, ENFILE, ENOMEM) makes an immediate retry fail the same way.
void accept_failed(const std::shared_ptr<ControlServer::Shared>& shared,
                   const boost::system::error_code& ec) {
  log::write_limited(shared->accept_log_limit, log::Level::warn, kControlLog,
                     "accept: " + ec.message() + "; retrying in " +
                         std::to_string(shared->limits.accept_backoff.count()) + " ms");
  if (ec == asio::error::no_descriptors || ec.value() == ENFILE) turn_away_one(*shared);
  shared->backoff.expires_after(shared->limits.accept_backoff);
  shared->backoff.async_wait([shared](const boost::system::error_code& wec) {
    if (wec || shared->stopped) return;
    do_accept(shared);
  });
}

void do_accept(const std::shared_ptr<ControlServer::Shared>& shared) {
  shared->acceptor.async_accept(
      [shared](const boost::system::error_code& ec, Local::socket socket) {
        if (shared->stopped) return;
        if (ec) {
          if (ec == asio::error::operation_aborted) return;
          // A client that gave up before we took it: nothing to wait for.
          if (ec == asio::error::connection_aborted) return do_accept(shared);
          return accept_failed(shared, ec);
        }
        // Descriptors came back: the spares lent under EMFILE are held again.
        if (shared->reserve != nullptr) shared->reserve->restore_spares();
        shared->prune();
        if (shared->connections.size() >= shared->limits.max_connections) {
          // Best effort and non-blocking: the client learns why, the daemon never waits.
          const std::string msg = control::json_error("too many connections") + "\n";
          socket.non_blocking(true);
          boost::system::error_code ignored;
          socket.write_some(asio::buffer(msg), ignored);
          socket.close(ignored);
        } else {
          socket.non_blocking(true);
          auto connection = std::make_shared<Connection>(std::move(socket), shared);
          shared->connections.push_back(connection);
          connection->start();
        }
        do_accept(shared);
      });
}

// True if something accepts connections on `path`.
bool socket_is_live(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

}  // namespace

ControlServer::ControlServer(asio::io_context& io, std::string path, Handler handler, Limits limits,
                             FdReserve* reserve)
    : path_(std::move(path)),
      shared_(std::make_shared<Shared>(io, std::move(handler), limits, reserve)) {
  if (path_.empty() || path_.size() >= sizeof(sockaddr_un{}.sun_path))
    throw SetupError("control socket path '" + path_ + "' is empty or too long");
  if (const auto slash = path_.rfind('/'); slash != std::string::npos && slash > 0) {
    const std::string parent = path_.substr(0, slash);
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
      throw SetupError("cannot create " + parent + ": " + last_errno().message());
    require_private_directory(parent, "the control socket's directory");
  }
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw SetupError("control socket path " + path_ + " exists and is not a socket");
    if (socket_is_live(path_)) throw SetupError("another daemon is listening on " + path_);
    ::unlink(path_.c_str());  // stale: left by a daemon that did not stop cleanly
  }
  boost::system::error_code ec;
  auto& acc = shared_->acceptor;
  if (!ec) acc.open(Local(), ec);
  if (!ec) acc.bind(Local::endpoint(path_), ec);
  if (ec) throw SetupError("control socket " + path_ + ": " + ec.message());
  // Before listen(): nobody can connect while the mode is still the umask's.
  if (::chmod(path_.c_str(), 0600) != 0) {
    const auto err = last_errno();
    ::unlink(path_.c_str());
    throw SetupError("chmod " + path_ + ": " + err.message());
  }
  acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    ::unlink(path_.c_str());
    throw SetupError("control socket " + path_ + ": listen: " + ec.message());
  }
  acc.non_blocking(true);
  do_accept(shared_);
}

ControlServer::~ControlServer() {
  shared_->stopped = true;
  try {
    boost::system::error_code ignored;
    shared_->backoff.cancel();  // throws only when the reactor refuses: nothing to do then
    shared_->acceptor.close(ignored);
    for (auto& w : shared_->connections)
      if (auto s = w.lock()) s->close();
    shared_->connections.clear();
  } catch (...) {
  }
  ::unlink(path_.c_str());
}

std::size_t ControlServer::connections() const {
  shared_->prune();
  return shared_->connections.size();
}

}  // namespace unetback::daemon
