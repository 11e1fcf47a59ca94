#include "tools/xensim/broker.hpp"

#include <boost/asio/post.hpp>
#include <cstring>
#include <optional>
#include <signal.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/hv/sim/fd_passing.hpp"
#include "common/util/log.hpp"

namespace unetback::xensim {

using hv::sim::BrokerOp;
using hv::sim::BrokerReply;
using hv::sim::BrokerRequest;

namespace {

// backend: a backend process inside a driver domain (unetbackd --backend-domid N).
enum class ClientRole : std::uint8_t { unregistered, dom0, domu, backend };

std::string name_of(const BrokerRequest& req) {
  return std::string(req.name, strnlen(req.name, sizeof(req.name)));
}

bool dom0_only(BrokerOp op) {
  switch (op) {
    case BrokerOp::create_domain:
    case BrokerOp::destroy_domain:
    case BrokerOp::get_domain_memory:
    case BrokerOp::fault_revoke_grant:
    case BrokerOp::fault_corrupt_grant:
    case BrokerOp::fault_drop_events:
    case BrokerOp::fault_stall_domain: return true;
    default: return false;
  }
}

/// What a connection may no longer do once restricted (RESTRICT_CLIENT): the toolstack's
/// operations, which Xen reaches through privcmd (EPERM after IOCTL_PRIVCMD_RESTRICT).
bool toolstack_op(BrokerOp op) {
  switch (op) {
    case BrokerOp::create_domain:
    case BrokerOp::destroy_domain:
    case BrokerOp::domain_exists:
    case BrokerOp::fault_revoke_grant:
    case BrokerOp::fault_corrupt_grant:
    case BrokerOp::fault_drop_events:
    case BrokerOp::fault_stall_domain: return true;
    default: return false;
  }
}

}  // namespace

struct Broker::Client {
  Client(boost::asio::io_context& io, int fd, ClientId cid, pid_t p)
      : sd(io, fd), id(cid), pid(p) {}
  boost::asio::posix::stream_descriptor sd;
  ClientId id;
  pid_t pid;
  ClientRole role = ClientRole::unregistered;
  DomId domid{};
  /// RESTRICT_CLIENT's domain: the only one this connection's event channels bind to.
  std::optional<DomId> serves;
};

/// A reply and the descriptors to attach (borrowed from the registry, sent at once).
struct Broker::Outcome {
  BrokerReply reply;
  std::vector<int> fds;
};

namespace {

sockaddr_un address_of(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof(addr.sun_path)) throw SetupError("socket path too long: " + p);
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  return addr;
}

}  // namespace

bool Broker::answers(const std::filesystem::path& socket_path) {
  const sockaddr_un addr = address_of(socket_path);
  UniqueFd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  return probe &&
         ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

Broker::Broker(boost::asio::io_context& io, std::filesystem::path socket_path,
               DomainRegistry& registry)
    : io_(io), path_(std::move(socket_path)), registry_(registry), listener_(io) {
  const sockaddr_un addr = address_of(path_);
  const std::string p = path_.string();
  if (answers(path_)) throw SetupError("another xensim is already running on " + p);
  ::unlink(p.c_str());  // a stale socket of a xensim that died

  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw SetupError("socket: " + last_errno().message());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
    throw SetupError("cannot bind " + p + ": " + last_errno().message());
  if (::listen(fd.get(), 64) != 0) throw SetupError("listen " + p + ": " + last_errno().message());
  listener_.assign(fd.release());
  start_accept();
}

Broker::~Broker() {
  std::vector<ClientId> ids;
  for (const auto& [id, c] : clients_) ids.push_back(id);
  for (const ClientId id : ids) close_client(id);
  boost::system::error_code ignored;
  listener_.close(ignored);
  ::unlink(path_.c_str());
}

void Broker::start_accept() {
  listener_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& ec) {
                         if (ec) return;  // closed: we are shutting down
                         accept_ready();
                         start_accept();
                       });
}

void Broker::accept_ready() {
  for (;;) {
    const int fd =
        ::accept4(listener_.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR)
        log::write(log::Level::warn, "xensim", "accept: " + last_errno().message());
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) cred.pid = 0;
    auto c = std::make_shared<Client>(io_, fd, next_id_++, cred.pid);
    clients_.emplace(c->id, c);
    start_read(c);
  }
}

void Broker::start_read(const std::shared_ptr<Client>& c) {
  c->sd.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                   [this, c](const boost::system::error_code& ec) {
                     if (ec) return;  // closed by close_client
                     read_ready(c);
                   });
}

void Broker::read_ready(const std::shared_ptr<Client>& c) {
  for (;;) {
    BrokerRequest req{};
    std::vector<UniqueFd> fds;
    auto n = hv::sim::recv_packet(c->sd.native_handle(), std::as_writable_bytes(std::span(&req, 1)),
                                  fds);
    if (!n && n.error() == std::errc::resource_unavailable_try_again) break;
    if (!n || *n == 0) {  // closed, or an error on the socket: the process is gone
      close_client(c->id);
      return;
    }
    Outcome out;
    if (*n != sizeof(req) || req.magic != hv::sim::kBrokerMagic) {
      out.reply.error = EPROTO;
    } else if (req.version != hv::sim::kBrokerVersion) {
      out.reply.error = EPROTO;
      log::write(log::Level::warn, "xensim",
                 "client pid " + std::to_string(c->pid) + " speaks broker protocol version " +
                     std::to_string(req.version) + ", not " +
                     std::to_string(hv::sim::kBrokerVersion));
    } else {
      out = handle(*c, req);
    }
    out.reply.op = req.op;
    out.reply.seq = req.seq;
    if (out.reply.error != 0) out.fds.clear();
    out.reply.nr_fds = static_cast<std::uint32_t>(out.fds.size());
    if (auto ec = hv::sim::send_packet(c->sd.native_handle(),
                                       std::as_bytes(std::span(&out.reply, 1)), out.fds)) {
      // A client that does not read its replies (or vanished) is dropped.
      close_client(c->id);
      return;
    }
    if (!clients_.contains(c->id)) return;  // handle() closed it (a domU destroying itself)
  }
  start_read(c);
}

Broker::Outcome Broker::handle(Client& c, const BrokerRequest& req) {
  Outcome out;
  BrokerReply& r = out.reply;
  auto fail = [&](std::error_code ec) {
    r.error = ec ? ec.value() : EIO;
    return out;
  };
  const bool registered = c.role != ClientRole::unregistered;
  const bool is_register = req.op == BrokerOp::register_dom0 ||
                           req.op == BrokerOp::register_domain || req.op == BrokerOp::claim_domain;
  if (is_register && registered) return fail(errno_code(EISCONN));
  if (!is_register && !registered) return fail(errno_code(ENOTCONN));
  // A driver domain's backend maps and copies other domains' grants, as dom0's does; the
  // grant entries say whether they may (SimGrantTable checks the granted domid).
  const bool backend_may = c.role == ClientRole::backend && req.op == BrokerOp::get_domain_memory;
  if (dom0_only(req.op) && c.role != ClientRole::dom0 && !backend_may)
    return fail(errno_code(EPERM));
  if (c.serves) {
    if (auto ec = restricted_refusal(c, req)) return fail(ec);
  }

  auto give_domain = [&](Domain& d) {
    r.domid = d.id.value();
    r.nr_frames = d.nr_frames;
    r.nr_grant_entries = d.nr_grant_entries;
    out.fds = {d.memory.get(), d.grants.get(), d.control.get()};
  };

  switch (req.op) {
    case BrokerOp::register_dom0: {
      c.role = ClientRole::dom0;
      c.domid = kDom0;
      r.domid = 0;
      out.fds = {registry_.find(kDom0)->control.get()};
      return out;
    }
    case BrokerOp::register_domain: {
      std::string name = name_of(req);
      if (name.empty()) name = "domU-pid" + std::to_string(c.pid);
      auto id = registry_.create(name, req.arg0);
      if (!id) return fail(id.error());
      (void)registry_.attach(*id, c.id, c.pid);
      c.role = ClientRole::domu;
      c.domid = *id;
      give_domain(*registry_.find(*id));
      return out;
    }
    case BrokerOp::claim_domain: {
      const DomId id{req.domid};
      if (req.arg0 == hv::sim::kClaimAsBackend) {
        if (auto ec = registry_.join_backend(id, c.id, c.pid)) return fail(ec);
        c.role = ClientRole::backend;
        c.domid = id;
        r.domid = id.value();
        out.fds = {registry_.find(id)->control.get()};
        return out;
      }
      if (auto ec = registry_.attach(id, c.id, c.pid)) return fail(ec);
      c.role = ClientRole::domu;
      c.domid = id;
      give_domain(*registry_.find(id));
      return out;
    }
    case BrokerOp::create_domain: {
      auto id =
          registry_.create(name_of(req), req.arg0, (req.arg1 & hv::sim::kCreateDriverDomain) != 0);
      if (!id) return fail(id.error());
      r.domid = id->value();
      return out;
    }
    case BrokerOp::destroy_domain: {
      const DomId id{req.domid};
      Domain* d = registry_.find(id);
      if (d == nullptr) return fail(errno_code(ESRCH));
      if (id == kDom0) return fail(errno_code(EINVAL));
      if (d->client && d->pid > 0) ::kill(d->pid, SIGKILL);
      // A driver domain dies with everything that runs in it.
      for (const auto& [cid, pid] : d->backends)
        if (pid > 0) ::kill(pid, SIGKILL);
      registry_.release(id);
      return out;
    }
    case BrokerOp::get_domain_memory: {
      Domain* d = registry_.find(DomId{req.domid});
      if (d == nullptr || d->nr_frames == 0) return fail(errno_code(ESRCH));
      auto pins = registry_.new_pin_table(d->id, c.id);
      if (!pins) return fail(pins.error());
      give_domain(*d);
      out.fds.push_back(*pins);
      return out;
    }
    case BrokerOp::domain_exists: {
      r.arg = registry_.exists(DomId{req.domid}) ? 1 : 0;
      return out;
    }
    case BrokerOp::evtchn_alloc_unbound: {
      auto port = registry_.alloc_unbound(c.domid, c.id, DomId{req.domid});
      if (!port) return fail(port.error());
      r.port = *port;
      out.fds = {registry_.find(c.domid)->ports.at(*port).eventfd.get()};
      return out;
    }
    case BrokerOp::evtchn_bind_interdomain: {
      auto port = registry_.bind_interdomain(c.domid, c.id, DomId{req.domid}, req.port);
      if (!port) return fail(port.error());
      r.port = *port;
      out.fds = {registry_.find(c.domid)->ports.at(*port).eventfd.get()};
      return out;
    }
    case BrokerOp::evtchn_unbind: {
      if (auto ec = registry_.close_port(c.domid, c.id, req.port)) return fail(ec);
      return out;
    }
    case BrokerOp::evtchn_peer: {
      auto info = registry_.peer(c.domid, req.port);
      if (!info) return fail(info.error());
      r.bind_gen = info->bind_gen;
      if (info->bound) {
        r.domid = info->domid.value();
        r.port = info->port;
        out.fds = {info->eventfd, info->control};
      }
      return out;
    }
    case BrokerOp::fault_revoke_grant: {
      if (auto ec = registry_.revoke_grant(DomId{req.domid}, req.arg0)) return fail(ec);
      return out;
    }
    case BrokerOp::fault_corrupt_grant: {
      if (auto ec =
              registry_.corrupt_grant(DomId{req.domid}, req.arg0, DomId{req.domid2}, req.arg1))
        return fail(ec);
      return out;
    }
    case BrokerOp::fault_drop_events: {
      if (auto ec = registry_.drop_events(DomId{req.domid}, req.port, req.arg0)) return fail(ec);
      return out;
    }
    case BrokerOp::fault_stall_domain: {
      if (auto ec = registry_.stall(DomId{req.domid}, req.arg0 != 0)) return fail(ec);
      return out;
    }
    case BrokerOp::restrict_client: {
      const DomId serves{req.domid};
      if (serves == kDom0 || is_reserved(serves)) return fail(errno_code(EINVAL));
      if (c.serves) return fail(errno_code(EACCES));
      c.serves = serves;
      return out;
    }
  }
  return fail(errno_code(ENOSYS));
}

std::error_code Broker::restricted_refusal(const Client& c, const BrokerRequest& req) const {
  if (toolstack_op(req.op)) return errno_code(EPERM);
  switch (req.op) {
    case BrokerOp::evtchn_alloc_unbound: return errno_code(EACCES);
    case BrokerOp::evtchn_bind_interdomain:
      return DomId{req.domid} == *c.serves ? std::error_code{} : errno_code(EACCES);
    case BrokerOp::evtchn_peer:
    case BrokerOp::evtchn_unbind:
      // Only the ports this connection bound, as /dev/xen/evtchn acts on its own ports only.
      return registry_.owns_port(c.domid, c.id, req.port) ? std::error_code{}
                                                          : errno_code(ENOTCONN);
    default: return {};
  }
}

void Broker::close_client(ClientId id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  auto c = it->second;
  clients_.erase(it);
  boost::system::error_code ignored;
  c->sd.close(ignored);
  if (c->role == ClientRole::domu) {
    registry_.client_closed(id, c->domid);
  } else if (c->role == ClientRole::dom0) {
    registry_.client_closed(id, std::nullopt);
  } else if (c->role == ClientRole::backend) {
    registry_.backend_closed(id, c->domid);
  }
}

}  // namespace unetback::xensim
