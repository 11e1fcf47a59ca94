#include "tools/xensim/xenstore/server.hpp"

#include <array>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <deque>
#include <sys/stat.h>
#include <unordered_set>
#include <utility>

#include "common/util/log.hpp"
#include "common/wire/xs_wire.hpp"
#include "tools/xensim/xenstore/wire_codec.hpp"

namespace unetback::xensim {

namespace asio = boost::asio;
using Stream = asio::local::stream_protocol;

namespace {
constexpr std::string_view kLogPrefix = "xenstored";
// NOLINTNEXTLINE(cert-err58-cpp): RateLimit only stores numbers and reads the clock.
log::RateLimit g_conn_log_limit;

void guest_log(const std::string& msg) {
  log::write_limited(g_conn_log_limit, log::Level::warn, kLogPrefix, msg);
}
}  // namespace

// Handlers hold these by shared_ptr; `closed` tells a late handler (after close or after the
// server is gone) to touch nothing but itself.
struct XenstoreServer::Listener {
  Listener(asio::io_context& io, DomId d, std::filesystem::path p)
      : dom(d), path(std::move(p)), acceptor(io) {}
  DomId dom;
  std::filesystem::path path;
  Stream::acceptor acceptor;
  bool closed = false;
};

struct XenstoreServer::Connection {
  Connection(Stream::socket s, ConnId i, DomId d) : id(i), dom(d), sock(std::move(s)) {}
  ConnId id;
  DomId dom;
  Stream::socket sock;
  XsStreamParser parser;
  std::array<char, 4096 + sizeof(wire::XsMsgHeader)> rbuf{};
  std::deque<std::string> outq;
  // The watch events in outq not yet being written (whole messages), for the duplicate check.
  std::unordered_set<std::string> queued_events;
  bool writing = false;
  bool closing = false;  // output is dropped, a close is scheduled
  bool closed = false;
};

XenstoreServer::XenstoreServer(asio::io_context& io, std::filesystem::path dir,
                               XenstoreLimits limits)
    : io_(io),
      dir_(std::move(dir)),
      limits_(limits),
      core_(limits, XenstoreCore::Hooks{
                        [this](ConnId id, std::string msg) { queue_output(id, std::move(msg)); },
                        [this](DomId d) { return open_listener(d); },
                        [this](DomId d) { close_domain_sockets(d); },
                    }) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw SetupError("xenstored: cannot create " + dir_.string() + ": " + ec.message());
}

XenstoreServer::~XenstoreServer() {
  for (auto& [id, c] : conns_) {
    c->closed = true;
    boost::system::error_code ignored;
    c->sock.close(ignored);
  }
  conns_.clear();
  for (auto& [dom, l] : listeners_) {
    l->closed = true;
    boost::system::error_code ignored;
    l->acceptor.close(ignored);
    std::error_code ec;
    std::filesystem::remove(l->path, ec);
  }
  listeners_.clear();
}

std::filesystem::path XenstoreServer::socket_path(DomId id) const {
  return dir_ / ("dom" + std::to_string(id.value()) + ".sock");
}

std::error_code XenstoreServer::open_listener(DomId id) {
  if (listeners_.contains(id)) return {};
  auto l = std::make_shared<Listener>(io_, id, socket_path(id));
  std::error_code fs_ec;
  std::filesystem::remove(l->path, fs_ec);  // a stale socket from an earlier run
  boost::system::error_code ec;
  l->acceptor.open(Stream(), ec);
  if (!ec) l->acceptor.bind(Stream::endpoint(l->path.string()), ec);
  if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return std::error_code(ec.value(), std::generic_category());
  // Like xenstored's own socket: only its owner (root on a real host) may connect.
  ::chmod(l->path.c_str(), 0600);
  listeners_.emplace(id, l);
  start_accept(l);
  return {};
}

void XenstoreServer::introduce_domain(DomId id, std::string_view name) {
  if (auto ec = open_listener(id)) {
    throw SetupError("xenstored: cannot listen on " + socket_path(id).string() + ": " +
                     ec.message());
  }
  core_.create_domain_nodes(id, name);
  core_.domain_introduced(id);
}

void XenstoreServer::release_domain(DomId id) {
  close_domain_sockets(id);
  core_.domain_released(id);
}

void XenstoreServer::close_domain_sockets(DomId id) {
  if (auto it = listeners_.find(id); it != listeners_.end()) {
    it->second->closed = true;
    boost::system::error_code ignored;
    it->second->acceptor.close(ignored);
    std::error_code ec;
    std::filesystem::remove(it->second->path, ec);
    listeners_.erase(it);
  }
  std::vector<ConnId> ids;
  for (const auto& [cid, c] : conns_)
    if (c->dom == id) ids.push_back(cid);
  for (auto cid : ids) close_connection(cid);
}

void XenstoreServer::start_accept(const std::shared_ptr<Listener>& l) {
  l->acceptor.async_accept([this, l](boost::system::error_code ec, Stream::socket sock) {
    if (l->closed) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      guest_log("accept on " + l->path.string() + ": " + ec.message());
    } else if (core_.connections_of(l->dom) >= limits_.max_connections_per_domain) {
      guest_log("dom" + std::to_string(l->dom.value()) + ": too many connections, refused");
    } else {
      const ConnId id = core_.connect(l->dom);
      auto c = std::make_shared<Connection>(std::move(sock), id, l->dom);
      conns_.emplace(id, c);
      start_read(c);
    }
    start_accept(l);
  });
}

void XenstoreServer::start_read(const std::shared_ptr<Connection>& c) {
  c->sock.async_read_some(
      asio::buffer(c->rbuf), [this, c](boost::system::error_code ec, std::size_t n) {
        if (c->closed) return;
        if (ec) {
          close_connection(c->id);
          return;
        }
        std::vector<XsMessage> msgs;
        const bool ok = c->parser.feed(std::span<const char>(c->rbuf.data(), n), msgs);
        for (const auto& m : msgs) {
          if (c->closing || c->closed) break;
          core_.handle(c->id, m);
        }
        if (c->closed) return;
        if (!ok) {
          guest_log("dom" + std::to_string(c->dom.value()) +
                    ": message longer than XENSTORE_PAYLOAD_MAX, connection closed");
          close_connection(c->id);
          return;
        }
        if (!c->closing) start_read(c);
      });
}

namespace {

/// True for a WATCH_EVENT whose path is a node (not "@introduceDomain"/"@releaseDomain").
bool is_node_event(const std::string& msg) {
  wire::XsMsgHeader hdr{};
  if (msg.size() <= sizeof hdr) return false;
  std::memcpy(&hdr, msg.data(), sizeof hdr);
  return hdr.type == static_cast<std::uint32_t>(wire::XsType::watch_event) &&
         msg[sizeof hdr] != '@';
}

}  // namespace

void XenstoreServer::queue_output(ConnId id, std::string msg) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  auto& c = it->second;
  if (c->closing || c->closed) return;
  // As Xen's xenstored (4.17, tools/xenstore/xenstored_core.c send_event(): "Check whether an
  // identical event is pending already. Special events are excluded from that check."): an
  // event equal to one still queued for this connection is dropped, for every domain. The
  // client reads the node when the queued one arrives, so it misses nothing (XSA-349).
  const bool node_event = is_node_event(msg);
  if (node_event && c->queued_events.contains(msg)) return;
  // Xen limits what it queues for an unprivileged domain only (send_event's
  // domain_memory_add_chk quota and the 20 s timeout_watch_event_msec, both checked with
  // domain_is_unprivileged()); the privileged domain's connection is never dropped for
  // unread output. With duplicates merged, what waits for dom0 is bounded by the distinct
  // nodes the guests may create (their node quota), not by their write rate.
  if (c->dom != kDom0 && c->outq.size() >= limits_.max_queued_messages_per_connection) {
    guest_log("dom" + std::to_string(c->dom.value()) +
              ": client does not read its replies/events, connection closed");
    close_connection_later(c);
    return;
  }
  if (node_event) c->queued_events.insert(msg);
  c->outq.push_back(std::move(msg));
  if (!c->writing) start_write(c);
}

void XenstoreServer::start_write(const std::shared_ptr<Connection>& c) {
  c->writing = true;
  // Once its first byte may be on the wire, a message is no longer "pending".
  c->queued_events.erase(c->outq.front());
  asio::async_write(c->sock, asio::buffer(c->outq.front()),
                    [this, c](boost::system::error_code ec, std::size_t) {
                      c->writing = false;
                      if (c->closed) return;
                      if (ec) {
                        close_connection(c->id);
                        return;
                      }
                      c->outq.pop_front();
                      if (!c->outq.empty()) start_write(c);
                    });
}

void XenstoreServer::close_connection_later(const std::shared_ptr<Connection>& c) {
  // Called while XenstoreCore may be inside handle() for this very connection: closing
  // (which drops the core's connection state) must wait until that call has returned.
  c->closing = true;
  asio::post(io_, [this, c] {
    if (!c->closed) close_connection(c->id);
  });
}

void XenstoreServer::close_connection(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  auto c = it->second;
  c->closed = true;
  boost::system::error_code ignored;
  c->sock.close(ignored);
  conns_.erase(it);
  core_.disconnect(id);
}

}  // namespace unetback::xensim
