// Broker: xensim's hypervisor interface, the server side of DIR/hv.sock (protocol in
// common/hv/sim/broker_protocol.hpp). Accepts connections on the io_context, reads one
// request at a time from each, applies it to the DomainRegistry and replies (with
// descriptors). A connection's first request says who it is; closing a domU's connection
// is that domain's death.
//
// Single-threaded: everything runs on the io_context's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <sys/types.h>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/hv/sim/broker_protocol.hpp"
#include "tools/xensim/domain_registry.hpp"

namespace unetback::xensim {

class Broker {
 public:
  /// Listens on `socket_path` (a stale socket file there is replaced). Throws SetupError if
  /// it cannot, or if another broker answers there.
  Broker(boost::asio::io_context& io, std::filesystem::path socket_path, DomainRegistry& registry);
  /// Closes every connection (their domUs die) and unlinks the socket.
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  [[nodiscard]] std::size_t connection_count() const { return clients_.size(); }

  /// Whether a broker answers on `socket_path` (another xensim runs on that directory).
  [[nodiscard]] static bool answers(const std::filesystem::path& socket_path);

 private:
  struct Client;
  struct Outcome;

  void start_accept();
  void accept_ready();
  void start_read(const std::shared_ptr<Client>& c);
  void read_ready(const std::shared_ptr<Client>& c);
  Outcome handle(Client& c, const hv::sim::BrokerRequest& req);
  /// Why a restricted connection may not make `req` (empty: it may).
  [[nodiscard]] std::error_code restricted_refusal(const Client& c,
                                                   const hv::sim::BrokerRequest& req) const;
  void close_client(ClientId id);

  boost::asio::io_context& io_;
  std::filesystem::path path_;
  DomainRegistry& registry_;
  boost::asio::posix::stream_descriptor listener_;
  ClientId next_id_ = 1;
  std::unordered_map<ClientId, std::shared_ptr<Client>> clients_;
};

}  // namespace unetback::xensim
