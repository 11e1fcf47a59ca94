// XenstoreServer: xensim's xenstored on Unix sockets, one listening socket per domain
// (DIR/dom<N>.sock). The socket a client connects to is its domain identity, so unmodified
// libxenstore clients pick their domain with XENSTORED_PATH=DIR/dom<N>.sock; dom0 is
// privileged. Requests are handled by XenstoreCore; this class only moves bytes.
//
// Threading: single-threaded. Every method must be called on the thread running the
// io_context (or before it runs). Replies go through a per-connection output queue
// (async_write chained), so a slow client never blocks the loop. As on Xen, a watch event
// identical to one still queued for the connection is dropped (XSA-349; Xen 4.17
// xenstored_core.c send_event()), and the privileged domain is never disconnected for
// output it does not read; a guest's connection with more than
// XenstoreLimits::max_queued_messages_per_connection unread messages (watch events on many
// distinct nodes it does not read) is disconnected. A message announcing more than
// XENSTORE_PAYLOAD_MAX bytes closes that connection only, as on Xen.
#pragma once

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/hv/xenstore.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "tools/xensim/xenstore/core.hpp"
#include "tools/xensim/xenstore/limits.hpp"

namespace unetback::xensim {

class XenstoreServer {
 public:
  /// Creates `dir` if needed. No socket exists until introduce_domain().
  XenstoreServer(boost::asio::io_context& io, std::filesystem::path dir,
                 XenstoreLimits limits = {});
  /// Closes every socket and connection and unlinks the dom<N>.sock files.
  ~XenstoreServer();
  XenstoreServer(const XenstoreServer&) = delete;
  XenstoreServer& operator=(const XenstoreServer&) = delete;

  /// Creates DIR/dom<id>.sock and the domain's nodes as libxl does (see
  /// XenstoreCore::create_domain_nodes; for dom0: /local/domain/0 {name, domid}), then fires
  /// @introduceDomain. Throws SetupError if the socket cannot be created.
  void introduce_domain(DomId id, std::string_view name);
  /// Closes the domain's socket and connections (dropping their watches and transactions)
  /// and fires @releaseDomain. The nodes stay, as on Xen: the toolstack removes them.
  void release_domain(DomId id);
  [[nodiscard]] bool is_introduced(DomId id) const { return core_.is_introduced(id); }
  [[nodiscard]] std::filesystem::path socket_path(DomId id) const;
  [[nodiscard]] std::size_t connection_count() const { return conns_.size(); }

  // In-process access for the broker, as dom0, outside transactions; watches fire.
  Result<std::string> read(std::string_view path) { return core_.read(path); }
  std::error_code write(std::string_view path, std::string_view value) {
    return core_.write(path, value);
  }
  std::error_code mkdir(std::string_view path) { return core_.mkdir(path); }
  std::error_code rm(std::string_view path) { return core_.rm(path); }
  Result<std::vector<std::string>> directory(std::string_view path) {
    return core_.directory(path);
  }
  Result<Perms> get_perms(std::string_view path) { return core_.get_perms(path); }
  std::error_code set_perms(std::string_view path, std::span<const hv::XsPerm> perms) {
    return core_.set_perms(path, perms);
  }

  [[nodiscard]] const XenstoreCore& core() const { return core_; }

 private:
  struct Listener;
  struct Connection;

  std::error_code open_listener(DomId id);
  void close_domain_sockets(DomId id);
  void start_accept(const std::shared_ptr<Listener>& l);
  void start_read(const std::shared_ptr<Connection>& c);
  void start_write(const std::shared_ptr<Connection>& c);
  void queue_output(ConnId id, std::string msg);
  void close_connection(ConnId id);
  void close_connection_later(const std::shared_ptr<Connection>& c);

  boost::asio::io_context& io_;
  std::filesystem::path dir_;
  XenstoreLimits limits_;
  XenstoreCore core_;
  std::map<DomId, std::shared_ptr<Listener>> listeners_;
  std::unordered_map<ConnId, std::shared_ptr<Connection>> conns_;
};

}  // namespace unetback::xensim
