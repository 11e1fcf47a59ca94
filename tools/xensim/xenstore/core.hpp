// XenstoreCore: xenstored's request handling, independent of sockets. It owns the store, the
// watch registry and the domain table, takes whole messages from connections (each bound to
// the domain it came from) and emits replies and watch events through a callback. The Asio
// server (server.hpp) only moves bytes; tests drive this class directly.
//
// Semantics follow Xen 4.17's C xenstored (Xen's docs/misc/xenstore.txt, xenstored_core.c):
// replies echo type, req_id and tx_id; errors are ERROR with an errno name; unknown types get
// ENOSYS; malformed arguments EINVAL; INTRODUCE, RELEASE, RESUME, IS_DOMAIN_INTRODUCED,
// SET_TARGET and CONTROL are for dom0 only (EACCES). SET_TARGET and CONTROL answer ENOSYS:
// xensim has no device-model domains and no debug commands.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "common/hv/xenstore.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "tools/xensim/xenstore/limits.hpp"
#include "tools/xensim/xenstore/store.hpp"
#include "tools/xensim/xenstore/watches.hpp"
#include "tools/xensim/xenstore/wire_codec.hpp"

namespace unetback::xensim {

class XenstoreCore {
 public:
  struct Hooks {
    /// Queue one encoded message for a connection.
    std::function<void(ConnId, std::string)> send;
    /// Wire INTRODUCE: make the domain reachable (xensim: create its socket).
    std::function<std::error_code(DomId)> open_domain;
    /// Wire RELEASE: close the domain's socket and connections (each through disconnect()).
    std::function<void(DomId)> close_domain;
  };

  XenstoreCore(const XenstoreLimits& limits, Hooks hooks);

  // --- connections -------------------------------------------------------------------
  ConnId connect(DomId dom);
  /// Drops the connection's watches and open transactions.
  void disconnect(ConnId conn);
  [[nodiscard]] std::size_t connections_of(DomId dom) const;
  /// Handles one request from `conn` (which must be connected).
  void handle(ConnId conn, const XsMessage& msg);

  // --- domains -----------------------------------------------------------------------
  /// Writes the nodes libxl creates for a new domain (libxl_create.c libxl__domain_make):
  /// /local/domain/<id> {name, domid} owned by dom0 and readable by the domain; cpu, memory,
  /// device, control read-only to it; data, drivers, feature, attr, error, control/shutdown,
  /// control/feature-{poweroff,reboot,suspend}, control/sysrq, device/suspend/event-channel
  /// owned by it. For dom0: /local/domain/0 with name and domid.
  void create_domain_nodes(DomId id, std::string_view name);
  /// Marks the domain introduced and fires @introduceDomain.
  void domain_introduced(DomId id);
  /// Marks the domain released and fires @releaseDomain (its nodes stay, as on Xen).
  void domain_released(DomId id);
  [[nodiscard]] bool is_introduced(DomId id) const { return introduced_.contains(id); }

  // --- in-process access as dom0, outside transactions; watches fire ------------------
  Result<std::string> read(std::string_view path);
  std::error_code write(std::string_view path, std::string_view value);
  std::error_code mkdir(std::string_view path);
  std::error_code rm(std::string_view path);
  Result<std::vector<std::string>> directory(std::string_view path);
  Result<Perms> get_perms(std::string_view path);
  std::error_code set_perms(std::string_view path, std::span<const hv::XsPerm> perms);

  [[nodiscard]] const Store& store() const { return store_; }
  [[nodiscard]] const WatchRegistry& watches() const { return watches_; }

 private:
  struct Conn {
    DomId dom;
    std::set<std::uint32_t> txs;
  };

  // Each handler returns the reply payload, or an errno for an ERROR reply.
  using Reply = Result<std::string>;
  Reply dispatch(ConnId id, Conn& c, const XsMessage& msg);
  Reply do_directory(Conn& c, hv::XsTx tx, std::string_view payload);
  Reply do_directory_part(Conn& c, hv::XsTx tx, std::string_view payload);
  Reply do_watch(ConnId id, Conn& c, std::string_view payload, std::optional<WatchEvent>& initial);
  Reply do_unwatch(ConnId id, Conn& c, std::string_view payload);
  Reply do_transaction_end(Conn& c, hv::XsTx tx, std::string_view payload);
  Reply do_introduce(std::string_view payload);
  Reply do_release(std::string_view payload);
  Reply do_set_perms(Conn& c, hv::XsTx tx, std::string_view payload);

  void fire(const Changes& changes);
  void fire_special(std::string_view name);
  void send(ConnId conn, std::string msg);

  XenstoreLimits limits_;
  Hooks hooks_;
  Store store_;
  WatchRegistry watches_;
  std::unordered_map<ConnId, Conn> conns_;
  std::uint64_t next_conn_ = 1;
  std::set<DomId> introduced_;
  /// Permissions of "@introduceDomain" / "@releaseDomain" (SET_PERMS on a special path).
  std::map<std::string, Perms, std::less<>> special_perms_;
};

}  // namespace unetback::xensim
