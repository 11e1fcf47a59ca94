// Fuzz target: xensim's xenstored byte stream (tools/xensim/xenstore/wire_codec) and the
// request handling behind it (XenstoreCore).
//
// The input is what a client writes on its socket, cut into reads of arbitrary sizes. The
// incremental XsStreamParser must yield exactly the messages a one-shot model finds in the
// whole stream (header, then `len` payload bytes; a len above XENSTORE_PAYLOAD_MAX breaks
// the stream for good), whatever the cut points. Each message is then handled by a
// XenstoreCore from a guest connection or from dom0, and every request must get exactly
// one reply that echoes its req_id and tx_id and is well-formed (len = payload size); watch
// events carry ids 0. NUL-separated argument helpers are checked against their grammar.
#include <cstring>
#include <fuzzer/FuzzedDataProvider.h>
#include <vector>

#include "common/wire/xs_wire.hpp"
#include "fuzz/fuzz_check.hpp"
#include "tools/xensim/xenstore/core.hpp"
#include "tools/xensim/xenstore/wire_codec.hpp"

namespace {

using namespace unetback;

struct Model {
  std::vector<xensim::XsMessage> messages;
  bool broken = false;
  std::size_t pending = 0;
};

Model model_parse(std::string_view s) {
  Model m;
  std::size_t pos = 0;
  while (s.size() - pos >= sizeof(wire::XsMsgHeader)) {
    wire::XsMsgHeader h;
    std::memcpy(&h, s.data() + pos, sizeof(h));
    if (h.len > wire::kXsPayloadMax) {
      m.broken = true;
      return m;
    }
    if (s.size() - pos - sizeof(h) < h.len) break;
    xensim::XsMessage msg;
    msg.hdr = h;
    msg.payload = std::string(s.substr(pos + sizeof(h), h.len));
    m.messages.push_back(std::move(msg));
    pos += sizeof(h) + h.len;
  }
  m.pending = s.size() - pos;
  return m;
}

void check_args(std::string_view payload) {
  const auto one = xensim::one_arg(payload);
  const bool one_ok = !payload.empty() && payload.find('\0') == payload.size() - 1;
  FUZZ_CHECK(one.has_value() == one_ok);
  if (one) FUZZ_CHECK(*one == payload.substr(0, payload.size() - 1));
  // nul_strings: the NUL-terminated strings; their bytes plus NULs cover a prefix.
  std::size_t covered = 0;
  for (auto s : xensim::nul_strings(payload)) {
    FUZZ_CHECK(s.find('\0') == std::string_view::npos);
    FUZZ_CHECK(payload.substr(covered, s.size()) == s);
    covered += s.size() + 1;
    FUZZ_CHECK(covered <= payload.size() && payload[covered - 1] == '\0');
  }
  FUZZ_CHECK(payload.find('\0', covered) == std::string_view::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  // Cut points first (a few bytes), the stream after them.
  std::vector<std::size_t> cuts;
  const auto nr_cuts = in.ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < nr_cuts; ++i) cuts.push_back(in.ConsumeIntegralInRange<std::size_t>(0, 64));
  const bool from_dom0 = in.ConsumeBool();
  const std::string stream = in.ConsumeRemainingBytesAsString();

  xensim::XsStreamParser parser;
  std::vector<xensim::XsMessage> got;
  std::size_t pos = 0;
  bool ok = true;
  for (std::size_t i = 0; pos < stream.size() && ok; ++i) {
    const std::size_t n =
        i < cuts.size() ? std::min(cuts[i], stream.size() - pos) : stream.size() - pos;
    ok = parser.feed(std::span(stream.data() + pos, n), got);
    pos += n;
  }
  const Model want = model_parse(stream);
  FUZZ_CHECK(parser.broken() == want.broken);
  if (!want.broken) {
    FUZZ_CHECK(parser.pending() == want.pending);
    FUZZ_CHECK(got.size() == want.messages.size());
  } else {
    FUZZ_CHECK(got.size() <= want.messages.size());  // messages before the bad header
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    FUZZ_CHECK(std::memcmp(&got[i].hdr, &want.messages[i].hdr, sizeof(got[i].hdr)) == 0);
    FUZZ_CHECK(got[i].payload == want.messages[i].payload);
  }

  // The messages, handled by xenstored.
  struct Sent {
    wire::XsMsgHeader hdr;
    std::string payload;
  };
  std::vector<Sent> sent;
  xensim::XenstoreCore core(
      xensim::XenstoreLimits{},
      xensim::XenstoreCore::Hooks{[&](xensim::ConnId, std::string m) {
                                    FUZZ_CHECK(m.size() >= sizeof(wire::XsMsgHeader));
                                    Sent s;
                                    std::memcpy(&s.hdr, m.data(), sizeof(s.hdr));
                                    s.payload = m.substr(sizeof(s.hdr));
                                    FUZZ_CHECK(s.hdr.len == s.payload.size());
                                    FUZZ_CHECK(s.hdr.len <= wire::kXsPayloadMax);
                                    sent.push_back(std::move(s));
                                  },
                                  [](DomId) { return std::error_code{}; }, [](DomId) {}});
  core.create_domain_nodes(DomId{0}, "Domain-0");
  core.domain_introduced(DomId{0});
  core.create_domain_nodes(DomId{5}, "guest");
  core.domain_introduced(DomId{5});
  const auto conn = core.connect(from_dom0 ? DomId{0} : DomId{5});
  for (const auto& m : got) {
    check_args(m.payload);
    sent.clear();
    core.handle(conn, m);
    std::size_t replies = 0;
    for (const auto& s : sent) {
      if (s.hdr.type == static_cast<std::uint32_t>(wire::XsType::watch_event)) {
        FUZZ_CHECK(s.hdr.req_id == 0 && s.hdr.tx_id == 0);
        continue;
      }
      ++replies;
      FUZZ_CHECK(s.hdr.req_id == m.hdr.req_id);
      FUZZ_CHECK(s.hdr.tx_id == m.hdr.tx_id);
      FUZZ_CHECK(s.hdr.type == m.hdr.type ||
                 s.hdr.type == static_cast<std::uint32_t>(wire::XsType::error));
    }
    FUZZ_CHECK(replies == 1);
  }
  core.disconnect(conn);
  return 0;
}
