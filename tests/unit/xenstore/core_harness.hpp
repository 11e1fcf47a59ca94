// Drives XenstoreCore with encoded messages, as a socket client would, and sorts what it
// sends back into replies and watch events per connection.
#pragma once

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/wire/xs_wire.hpp"
#include "tools/xensim/xenstore/core.hpp"
#include "tools/xensim/xenstore/wire_codec.hpp"

namespace unetback::xensim::test {

/// The guest domain the scenarios connect as, beside dom0.
inline constexpr DomId kDom1{1};

using wire::XsType;

struct Answer {
  std::uint32_t type = 0;
  std::uint32_t req_id = 0;
  std::uint32_t tx_id = 0;
  std::string payload;
  [[nodiscard]] bool is_error() const { return type == static_cast<std::uint32_t>(XsType::error); }
  /// "ENOENT" for an error reply, "" otherwise.
  [[nodiscard]] std::string error() const {
    return is_error() ? payload.substr(0, payload.find('\0')) : std::string();
  }
};

inline std::string z(std::string_view s) {
  std::string out(s);
  out += '\0';
  return out;
}

class CoreHarness {
 public:
  explicit CoreHarness(XenstoreLimits limits = {})
      : core(limits, XenstoreCore::Hooks{
                         [this](ConnId id, std::string m) { on_send(id, std::move(m)); },
                         [this](DomId d) {
                           opened.push_back(d);
                           return std::error_code{};
                         },
                         [this](DomId d) { closed.push_back(d); },
                     }) {
    core.create_domain_nodes(kDom0, "Domain-0");
    core.domain_introduced(kDom0);
  }

  ConnId connect(DomId d) { return core.connect(d); }

  /// Sends one request and returns its reply (the one non-event message it produced).
  Answer request(ConnId c, XsType type, std::string_view payload, std::uint32_t tx = 0) {
    XsMessage m;
    m.hdr.type = static_cast<std::uint32_t>(type);
    m.hdr.req_id = ++req_;
    m.hdr.tx_id = tx;
    m.hdr.len = static_cast<std::uint32_t>(payload.size());
    m.payload = std::string(payload);
    return raw(c, m);
  }
  Answer raw(ConnId c, const XsMessage& m) {
    replies[c].clear();
    core.handle(c, m);
    auto& r = replies[c];
    if (r.size() != 1) return Answer{0xFFFFFFFF, 0, 0, "no single reply"};
    return r.front();
  }

  // Convenience wrappers; payloads as libxenstore builds them.
  Answer write(ConnId c, std::string_view path, std::string_view value, std::uint32_t tx = 0) {
    return request(c, XsType::write, z(path) + std::string(value), tx);
  }
  Answer read(ConnId c, std::string_view path, std::uint32_t tx = 0) {
    return request(c, XsType::read, z(path), tx);
  }
  Answer rm(ConnId c, std::string_view path, std::uint32_t tx = 0) {
    return request(c, XsType::rm, z(path), tx);
  }
  Answer mkdir(ConnId c, std::string_view path, std::uint32_t tx = 0) {
    return request(c, XsType::mkdir, z(path), tx);
  }
  Answer dir(ConnId c, std::string_view path, std::uint32_t tx = 0) {
    return request(c, XsType::directory, z(path), tx);
  }
  Answer set_perms(ConnId c, std::string_view path, std::vector<std::string> perms,
                   std::uint32_t tx = 0) {
    std::string p = z(path);
    for (auto& s : perms) p += z(s);
    return request(c, XsType::set_perms, p, tx);
  }
  Answer get_perms(ConnId c, std::string_view path) {
    return request(c, XsType::get_perms, z(path));
  }
  Answer watch(ConnId c, std::string_view path, std::string_view token) {
    return request(c, XsType::watch, z(path) + z(token));
  }
  std::uint32_t tx_start(ConnId c) {
    auto a = request(c, XsType::transaction_start, z(""));
    if (a.is_error()) return 0;
    return static_cast<std::uint32_t>(std::stoul(a.payload));
  }
  Answer tx_end(ConnId c, std::uint32_t tx, bool commit) {
    return request(c, XsType::transaction_end, z(commit ? "T" : "F"), tx);
  }

  /// Watch events received by `c` since the last call, as "path|token".
  std::vector<std::string> take_events(ConnId c) {
    std::vector<std::string> out;
    for (auto& p : events[c]) {
      auto nul = p.find('\0');
      out.push_back(p.substr(0, nul) + "|" + p.substr(nul + 1, p.find('\0', nul + 1) - nul - 1));
    }
    events[c].clear();
    return out;
  }

  XenstoreCore core;
  std::map<ConnId, std::vector<Answer>> replies;
  std::map<ConnId, std::vector<std::string>> events;
  std::vector<DomId> opened, closed;

 private:
  void on_send(ConnId id, std::string m) {
    wire::XsMsgHeader h;
    std::memcpy(&h, m.data(), sizeof(h));
    std::string payload = m.substr(sizeof(h));
    if (h.len != payload.size()) throw std::runtime_error("bad length in sent message");
    if (h.type == static_cast<std::uint32_t>(XsType::watch_event)) {
      if (h.req_id != 0 || h.tx_id != 0) throw std::runtime_error("event with ids");
      events[id].push_back(std::move(payload));
    } else {
      replies[id].push_back(Answer{h.type, h.req_id, h.tx_id, std::move(payload)});
    }
  }
  std::uint32_t req_ = 100;
};

}  // namespace unetback::xensim::test
