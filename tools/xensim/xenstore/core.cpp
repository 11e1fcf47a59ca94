#include "tools/xensim/xenstore/core.hpp"

#include <cerrno>

#include "common/util/log.hpp"
#include "common/wire/xs_wire.hpp"
#include "tools/xensim/xenstore/path.hpp"

namespace unetback::xensim {

namespace {

using wire::XsType;

constexpr std::string_view kIntroduceDomain = "@introduceDomain";
constexpr std::string_view kReleaseDomain = "@releaseDomain";
constexpr std::string_view kOk{"OK\0", 3};

std::string with_nul(std::string_view s) {
  std::string out(s);
  out += '\0';
  return out;
}

// Request types only dom0 may send (XS_FLAG_PRIV in xenstored's wire_funcs table).
bool privileged_only(XsType t) {
  switch (t) {
    case XsType::control:
    case XsType::introduce:
    case XsType::release:
    case XsType::is_domain_introduced:
    case XsType::resume:
    case XsType::set_target: return true;
    default: return false;
  }
}

bool known_request(std::uint32_t type) {
  if (type >= wire::kXsTypeCount) return false;
  // XS_WATCH_EVENT and XS_ERROR are replies only; value 20 (XS_RESTRICT) was removed.
  return type != static_cast<std::uint32_t>(XsType::watch_event) &&
         type != static_cast<std::uint32_t>(XsType::error) && type != 20;
}

std::optional<DomId> parse_domid(std::string_view s) {
  auto v = hv::parse_xs_uint<std::uint16_t>(s);
  if (!v) return std::nullopt;
  return DomId{*v};
}

// NOLINTNEXTLINE(cert-err58-cpp): RateLimit only stores numbers and reads the clock.
log::RateLimit g_guest_log_limit;

}  // namespace

XenstoreCore::XenstoreCore(const XenstoreLimits& limits, Hooks hooks)
    : limits_(limits), hooks_(std::move(hooks)), store_(limits) {
  // Only dom0 may watch the special events unless dom0 grants more (SET_PERMS on "@…").
  const Perms dom0_only{hv::XsPerm{kDom0, hv::XsPerm::Kind::none}};
  special_perms_.emplace(std::string(kIntroduceDomain), dom0_only);
  special_perms_.emplace(std::string(kReleaseDomain), dom0_only);
}

ConnId XenstoreCore::connect(DomId dom) {
  const ConnId id{next_conn_++};
  conns_.emplace(id, Conn{dom, {}});
  return id;
}

void XenstoreCore::disconnect(ConnId conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  for (auto tx : it->second.txs) store_.transaction_drop(hv::XsTx{tx});
  watches_.remove_connection(conn);
  conns_.erase(it);
}

std::size_t XenstoreCore::connections_of(DomId dom) const {
  std::size_t n = 0;
  for (const auto& [id, c] : conns_)
    if (c.dom == dom) ++n;
  return n;
}

void XenstoreCore::send(ConnId conn, std::string msg) {
  if (hooks_.send) hooks_.send(conn, std::move(msg));
}

void XenstoreCore::fire(const Changes& changes) {
  for (const auto& c : changes)
    for (auto& ev : watches_.match(c)) send(ev.conn, encode_event(ev.payload));
}

void XenstoreCore::fire_special(std::string_view name) {
  auto it = special_perms_.find(name);
  for (auto& ev : watches_.match_special(name, it->second)) send(ev.conn, encode_event(ev.payload));
}

void XenstoreCore::handle(ConnId id, const XsMessage& msg) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::optional<WatchEvent> initial;
  Reply r = errno_code(ENOSYS);
  if (msg.hdr.type == static_cast<std::uint32_t>(XsType::watch)) {
    r = do_watch(id, it->second, msg.payload, initial);
  } else {
    r = dispatch(id, it->second, msg);
  }
  if (!r) {
    send(id, encode_error(msg.hdr, r.error().value()));
  } else if (r->size() > wire::kXsPayloadMax) {
    // xenstored's send_reply(): a reply that does not fit is E2BIG (libxenstore then falls
    // back to DIRECTORY_PART for directories).
    send(id, encode_error(msg.hdr, E2BIG));
  } else {
    send(id, encode_reply(msg.hdr, *r));
  }
  // "When a watch is first set up it is triggered once straight away" — after the reply.
  if (initial) send(id, encode_event(initial->payload));
}

XenstoreCore::Reply XenstoreCore::dispatch(ConnId id, Conn& c, const XsMessage& msg) {
  const std::uint32_t type = msg.hdr.type;
  if (!known_request(type)) {
    log::write_limited(
        g_guest_log_limit, log::Level::warn, "xenstored",
        "dom" + std::to_string(c.dom.value()) + ": unknown request type " + std::to_string(type));
    return errno_code(ENOSYS);
  }
  const auto t = static_cast<XsType>(type);
  if (privileged_only(t) && !is_privileged(c.dom)) return errno_code(EACCES);

  // The header's tx_id names one of this connection's transactions (WATCH and UNWATCH
  // ignore it: "The tx_id in a WATCH request is ignored").
  const hv::XsTx tx{msg.hdr.tx_id};
  if (t != XsType::unwatch && tx.id != 0 && !c.txs.contains(tx.id)) return errno_code(ENOENT);

  const std::string_view payload = msg.payload;
  auto path_arg = [&]() -> std::optional<std::string> {
    auto a = one_arg(payload);
    if (!a) return std::nullopt;
    return canonicalize(c.dom, *a);
  };
  Changes changes;
  auto done = [&](std::error_code e) -> Reply {
    if (e) return e;
    fire(changes);
    return std::string(kOk);
  };

  switch (t) {
    case XsType::directory: return do_directory(c, tx, payload);
    case XsType::directory_part: return do_directory_part(c, tx, payload);
    case XsType::read: {
      auto p = path_arg();
      if (!p) return errno_code(EINVAL);
      return store_.read(c.dom, tx, *p);
    }
    case XsType::get_perms: {
      auto p = path_arg();
      if (!p) return errno_code(EINVAL);
      auto perms = store_.get_perms(c.dom, tx, *p);
      if (!perms) return perms.error();
      return perms_to_wire(*perms);
    }
    case XsType::write: {
      // "path\0value": the value is raw bytes up to the end of the payload.
      const auto nul = payload.find('\0');
      if (nul == std::string_view::npos) return errno_code(EINVAL);
      const auto path = canonicalize(c.dom, payload.substr(0, nul));
      return done(store_.write(c.dom, tx, path, payload.substr(nul + 1), changes));
    }
    case XsType::mkdir: {
      auto p = path_arg();
      if (!p) return errno_code(EINVAL);
      return done(store_.mkdir(c.dom, tx, *p, changes));
    }
    case XsType::rm: {
      auto p = path_arg();
      if (!p) return errno_code(EINVAL);
      return done(store_.rm(c.dom, tx, *p, changes));
    }
    case XsType::set_perms: return do_set_perms(c, tx, payload);
    case XsType::unwatch: return do_unwatch(id, c, payload);
    case XsType::transaction_start: {
      if (tx.id != 0) return errno_code(EBUSY);  // no nested transactions
      auto n = store_.transaction_start(c.dom);
      if (!n) return n.error();
      c.txs.insert(n->id);
      return with_nul(std::to_string(n->id));
    }
    case XsType::transaction_end: return do_transaction_end(c, tx, payload);
    case XsType::get_domain_path: {
      auto a = one_arg(payload);
      auto dom = a ? parse_domid(*a) : std::nullopt;
      if (!dom) return errno_code(EINVAL);
      return with_nul(domain_path(*dom));
    }
    case XsType::introduce: return do_introduce(payload);
    case XsType::release: return do_release(payload);
    case XsType::is_domain_introduced: {
      auto a = one_arg(payload);
      auto dom = a ? parse_domid(*a) : std::nullopt;
      if (!dom) return errno_code(EINVAL);
      return std::string(is_introduced(*dom) || is_privileged(*dom) ? "T\0" : "F\0", 2);
    }
    case XsType::resume: {
      // xensim tracks no shutdown state, so there is nothing to re-arm; only the lookup.
      auto a = one_arg(payload);
      auto dom = a ? parse_domid(*a) : std::nullopt;
      if (!dom) return errno_code(EINVAL);
      if (!is_introduced(*dom)) return errno_code(ENOENT);
      return std::string(kOk);
    }
    case XsType::reset_watches:
      // "Reset all watches and transactions of the caller."
      for (auto id_tx : c.txs) store_.transaction_drop(hv::XsTx{id_tx});
      c.txs.clear();
      watches_.remove_connection(id);
      return std::string(kOk);
    case XsType::control:
    case XsType::set_target:
    default: return errno_code(ENOSYS);
  }
}

XenstoreCore::Reply XenstoreCore::do_directory(Conn& c, hv::XsTx tx, std::string_view payload) {
  auto a = one_arg(payload);
  if (!a) return errno_code(EINVAL);
  auto l = store_.list(c.dom, tx, canonicalize(c.dom, *a));
  if (!l) return l.error();
  return join_nul(l->children);
}

XenstoreCore::Reply XenstoreCore::do_directory_part(Conn& c, hv::XsTx tx,
                                                    std::string_view payload) {
  // "<path>|<offset>" -> "<gencnt>|<child-leaf-name>|*", the list continuing at byte
  // <offset> of the full NUL-separated child list. The last part ends with an extra empty
  // string, which tells libxenstore's xs_directory_part() that the list is complete.
  const auto args = nul_strings(payload);
  if (args.size() != 2 || payload.back() != '\0') return errno_code(EINVAL);
  auto off = hv::parse_xs_uint<std::uint32_t>(args[1]);
  if (!off) return errno_code(EINVAL);
  auto l = store_.list(c.dom, tx, canonicalize(c.dom, args[0]));
  if (!l) return l.error();
  const std::string all = join_nul(l->children);
  std::string out = with_nul(std::to_string(l->generation));
  if (*off >= all.size()) {
    out += '\0';
    return out;
  }
  const std::size_t room = wire::kXsPayloadMax - out.size() - 1;
  std::size_t end = *off;
  while (end < all.size()) {
    const std::size_t name_end = all.find('\0', end) + 1;
    if (name_end - *off > room) break;
    end = name_end;
  }
  out.append(all, *off, end - *off);
  if (end == all.size()) out += '\0';
  return out;
}

XenstoreCore::Reply XenstoreCore::do_watch(ConnId id, Conn& c, std::string_view payload,
                                           std::optional<WatchEvent>& initial) {
  const auto args = nul_strings(payload);
  if (args.size() != 2) return errno_code(EINVAL);
  std::string path;
  std::optional<std::string> relative_base;
  if (args[0].starts_with('@')) {
    if (!is_special_path(args[0])) return errno_code(EINVAL);
    path = std::string(args[0]);
  } else {
    if (!args[0].starts_with('/')) relative_base = domain_path(c.dom);
    path = canonicalize(c.dom, args[0]);
    if (!is_valid_path(path)) return errno_code(EINVAL);
  }
  if (auto e = watches_.add(id, c.dom, path, std::string(args[1]), relative_base,
                            limits_.max_watches_per_domain))
    return e;
  initial = watches_.initial_event(id, path, args[1]);
  return std::string(kOk);
}

XenstoreCore::Reply XenstoreCore::do_unwatch(ConnId id, Conn& c, std::string_view payload) {
  const auto args = nul_strings(payload);
  if (args.size() != 2) return errno_code(EINVAL);
  if (!watches_.remove(id, canonicalize(c.dom, args[0]), args[1])) return errno_code(ENOENT);
  return std::string(kOk);
}

XenstoreCore::Reply XenstoreCore::do_transaction_end(Conn& c, hv::XsTx tx,
                                                     std::string_view payload) {
  auto a = one_arg(payload);
  if (!a || (*a != "T" && *a != "F")) return errno_code(EINVAL);
  if (tx.id == 0) return errno_code(ENOENT);
  c.txs.erase(tx.id);
  Changes changes;
  if (auto e = store_.transaction_end(tx, *a == "T", changes)) return e;
  fire(changes);
  return std::string(kOk);
}

XenstoreCore::Reply XenstoreCore::do_introduce(std::string_view payload) {
  // "<domid>|<mfn>|<evtchn>|?": xensim has no ring page or event channel to map; the
  // domain's socket is its connection.
  const auto args = nul_strings(payload);
  if (args.size() < 3) return errno_code(EINVAL);
  auto dom = parse_domid(args[0]);
  if (!dom || *dom == kDom0 || is_reserved(*dom)) return errno_code(EINVAL);
  if (is_introduced(*dom)) return std::string(kOk);
  if (hooks_.open_domain) {
    if (auto e = hooks_.open_domain(*dom)) return e;
  }
  domain_introduced(*dom);
  return std::string(kOk);
}

XenstoreCore::Reply XenstoreCore::do_release(std::string_view payload) {
  auto a = one_arg(payload);
  auto dom = a ? parse_domid(*a) : std::nullopt;
  if (!dom || dom->value() == 0) return errno_code(EINVAL);
  if (!is_introduced(*dom)) return errno_code(ENOENT);
  if (hooks_.close_domain) hooks_.close_domain(*dom);
  domain_released(*dom);
  return std::string(kOk);
}

XenstoreCore::Reply XenstoreCore::do_set_perms(Conn& c, hv::XsTx tx, std::string_view payload) {
  const auto args = nul_strings(payload);
  if (args.size() < 2) return errno_code(EINVAL);
  Perms perms;
  for (std::size_t i = 1; i < args.size(); ++i) {
    auto p = hv::parse_xs_perm(args[i]);
    if (!p) return errno_code(EINVAL);
    perms.push_back(*p);
  }
  if (args[0].starts_with('@')) {
    // Only the two special events carry permissions; changing them needs write+owner.
    auto it = special_perms_.find(args[0]);
    if (it == special_perms_.end()) return errno_code(EINVAL);
    if (!allowed(c.dom, it->second, kAccessWrite | kAccessOwner)) return errno_code(EACCES);
    it->second = std::move(perms);
    return std::string(kOk);
  }
  Changes changes;
  if (auto e = store_.set_perms(c.dom, tx, canonicalize(c.dom, args[0]), std::move(perms), changes))
    return e;
  fire(changes);
  return std::string(kOk);
}

void XenstoreCore::create_domain_nodes(DomId id, std::string_view name) {
  const std::string home = domain_path(id);
  auto tx = store_.transaction_start(kDom0);
  if (!tx) return;  // dom0 has no transaction limit
  Changes changes;
  auto mk = [&](std::string_view rel, const Perms& perms) {
    const std::string p = rel.empty() ? home : home + "/" + std::string(rel);
    (void)store_.mkdir(kDom0, *tx, p, changes);
    (void)store_.set_perms(kDom0, *tx, p, perms, changes);
  };
  (void)store_.rm(kDom0, *tx, home, changes);
  if (is_privileged(id)) {
    mk("", Perms{hv::XsPerm{kDom0, hv::XsPerm::Kind::none}});
  } else {
    const Perms ro{hv::XsPerm{kDom0, hv::XsPerm::Kind::none},
                   hv::XsPerm{id, hv::XsPerm::Kind::read}};
    const Perms rw{hv::XsPerm{id, hv::XsPerm::Kind::none}};
    mk("", ro);
    for (auto rel : {"cpu", "memory", "device", "control"}) mk(rel, ro);
    for (auto rel : {"control/shutdown", "control/feature-poweroff", "control/feature-reboot",
                     "control/feature-suspend", "control/sysrq", "device/suspend/event-channel",
                     "data", "drivers", "feature", "attr", "error"})
      mk(rel, rw);
  }
  (void)store_.write(kDom0, *tx, home + "/name", name, changes);
  (void)store_.write(kDom0, *tx, home + "/domid", std::to_string(id.value()), changes);
  changes.clear();
  // Only dom0's own transaction touched these nodes, unless a client raced us between the
  // start and here, which cannot happen on one thread: the commit does not conflict.
  (void)store_.transaction_end(*tx, true, changes);
  fire(changes);
}

void XenstoreCore::domain_introduced(DomId id) {
  if (!introduced_.insert(id).second) return;
  fire_special(kIntroduceDomain);
}

void XenstoreCore::domain_released(DomId id) {
  if (introduced_.erase(id) == 0) return;
  fire_special(kReleaseDomain);
}

Result<std::string> XenstoreCore::read(std::string_view path) {
  return store_.read(kDom0, {}, path);
}

std::error_code XenstoreCore::write(std::string_view path, std::string_view value) {
  Changes changes;
  auto e = store_.write(kDom0, {}, path, value, changes);
  fire(changes);
  return e;
}

std::error_code XenstoreCore::mkdir(std::string_view path) {
  Changes changes;
  auto e = store_.mkdir(kDom0, {}, path, changes);
  fire(changes);
  return e;
}

std::error_code XenstoreCore::rm(std::string_view path) {
  Changes changes;
  auto e = store_.rm(kDom0, {}, path, changes);
  fire(changes);
  return e;
}

Result<std::vector<std::string>> XenstoreCore::directory(std::string_view path) {
  auto l = store_.list(kDom0, {}, path);
  if (!l) return l.error();
  return std::move(l->children);
}

Result<Perms> XenstoreCore::get_perms(std::string_view path) {
  return store_.get_perms(kDom0, {}, path);
}

std::error_code XenstoreCore::set_perms(std::string_view path, std::span<const hv::XsPerm> perms) {
  Changes changes;
  auto e = store_.set_perms(kDom0, {}, path, Perms(perms.begin(), perms.end()), changes);
  fire(changes);
  return e;
}

}  // namespace unetback::xensim
