#include "common/hv/sim/broker_client.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/hv/sim/fd_passing.hpp"

namespace unetback::hv::sim {

namespace {

// The broker answers at once; a reply this late means it is wedged or gone.
constexpr int kReplyTimeoutSeconds = 10;

}  // namespace

BrokerRequest make_request(BrokerOp op, std::string_view name) {
  BrokerRequest r;
  r.op = op;
  const std::size_t n = std::min(name.size(), kMaxDomainNameLen);
  if (n != 0) std::memcpy(r.name, name.data(), n);
  return r;
}

BrokerClient::BrokerClient(std::string socket_path) : path_(std::move(socket_path)) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(addr.sun_path))
    throw SetupError("xensim socket path too long: " + path_);
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  sock_ = UniqueFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!sock_) throw SetupError("socket(AF_UNIX, SOCK_SEQPACKET): " + last_errno().message());
  if (::connect(sock_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const auto ec = last_errno();
    throw SetupError("cannot connect to the xensim broker at " + path_ + ": " + ec.message() +
                     " (is xensim running with --dir on that directory?)");
  }
  timeval tv{kReplyTimeoutSeconds, 0};
  ::setsockopt(sock_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(sock_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

Result<BrokerResponse> BrokerClient::call(BrokerRequest req) {
  std::lock_guard lock(mu_);
  req.magic = kBrokerMagic;
  req.version = kBrokerVersion;
  req.seq = next_seq_++;
  if (auto ec = send_packet(sock_.get(), std::as_bytes(std::span(&req, 1)), {})) return ec;

  BrokerResponse resp;
  auto n = recv_packet(sock_.get(), std::as_writable_bytes(std::span(&resp.reply, 1)), resp.fds);
  if (!n) return n.error();
  if (*n == 0) return errno_code(ECONNRESET);  // the broker went away
  const BrokerReply& r = resp.reply;
  if (*n != sizeof(BrokerReply) || r.magic != kBrokerMagic || r.version != kBrokerVersion ||
      r.seq != req.seq || r.op != req.op)
    return errno_code(EPROTO);
  if (r.error != 0) return errno_code(r.error);
  if (resp.fds.size() != r.nr_fds) return errno_code(EPROTO);
  return resp;
}

}  // namespace unetback::hv::sim
