// BrokerClient: one connection to the xensim broker (DIR/hv.sock). Requests are synchronous
// (one in flight at a time, serialised by a mutex, so every object of one SimHypervisor can
// share the connection from any thread). The connection is the domain's identity: closing
// it ends a domU.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "common/hv/sim/broker_protocol.hpp"
#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::hv::sim {

struct BrokerResponse {
  BrokerReply reply;
  std::vector<UniqueFd> fds;
};

class BrokerClient {
 public:
  /// Connects to `socket_path`. Throws SetupError naming it when nothing listens there
  /// (xensim is not running) or the connection fails.
  explicit BrokerClient(std::string socket_path);

  /// Sends `req` (magic, version and seq filled in) and waits for its reply, at most a few
  /// seconds. A reply with an error becomes that errno; a reply carrying fewer descriptors
  /// than it announces is EPROTO.
  Result<BrokerResponse> call(BrokerRequest req);

  [[nodiscard]] const std::string& socket_path() const { return path_; }

 private:
  std::string path_;
  UniqueFd sock_;
  std::mutex mu_;
  std::uint32_t next_seq_ = 1;
};

/// A request for `op` with `name` copied in (truncated to kMaxDomainNameLen).
[[nodiscard]] BrokerRequest make_request(BrokerOp op, std::string_view name = {});

}  // namespace unetback::hv::sim
