// Protocol framing, DIRECTORY_PART, privileged requests, quotas and hostile input.
#include <cstring>
#include <gtest/gtest.h>
#include <random>

#include "tests/unit/xenstore/core_harness.hpp"

using namespace unetback;
using namespace unetback::xensim;
using namespace unetback::xensim::test;

namespace {

std::string header(std::uint32_t type, std::uint32_t req, std::uint32_t tx, std::uint32_t len) {
  wire::XsMsgHeader h{type, req, tx, len};
  std::string s(sizeof(h), '\0');
  std::memcpy(s.data(), &h, sizeof(h));
  return s;
}

std::span<const char> bytes(const std::string& s) {
  return {s.data(), s.size()};
}

TEST(XsStreamParser, SplitsMessagesAcrossArbitraryChunks) {
  const std::string stream = header(2, 1, 0, 3) + std::string("/a\0", 3) + header(1, 2, 0, 0) +
                             header(11, 3, 7, 4) + std::string("/b\0v", 4);
  for (std::size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    XsStreamParser p;
    std::vector<XsMessage> out;
    for (std::size_t i = 0; i < stream.size(); i += chunk)
      ASSERT_TRUE(p.feed(bytes(stream.substr(i, chunk)), out));
    ASSERT_EQ(out.size(), 3u) << chunk;
    EXPECT_EQ(out[0].payload, std::string("/a\0", 3));
    EXPECT_EQ(out[1].payload, "");
    EXPECT_EQ(out[2].hdr.tx_id, 7u);
    EXPECT_EQ(out[2].payload, std::string("/b\0v", 4));
    EXPECT_EQ(p.pending(), 0u);
  }
}

TEST(XsStreamParser, PayloadOverXenstorePayloadMaxBreaksTheStream) {
  XsStreamParser p;
  std::vector<XsMessage> out;
  EXPECT_TRUE(p.feed(bytes(header(2, 1, 0, wire::kXsPayloadMax)), out));
  XsStreamParser q;
  EXPECT_FALSE(q.feed(bytes(header(2, 1, 0, wire::kXsPayloadMax + 1)), out));
  EXPECT_TRUE(q.broken());
  EXPECT_FALSE(q.feed(bytes(header(2, 1, 0, 0)), out));
  EXPECT_TRUE(out.empty());
}

TEST(XsStreamParser, RandomBytesNeverCrashTheParserOrTheCore) {
  std::mt19937 rng(12345);
  CoreHarness h;
  for (int round = 0; round < 3000; ++round) {
    const DomId dom{static_cast<std::uint16_t>(round % 3)};
    auto conn = h.connect(dom);
    XsStreamParser p;
    std::vector<XsMessage> msgs;
    std::string junk;
    // Mostly well-framed messages of random type and payload, sometimes raw garbage.
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const std::uint32_t len = rng() % 64;
      std::string payload(len, '\0');
      for (auto& ch : payload) {
        const auto r = rng() % 8;
        ch = r == 0 ? '\0' : r == 1 ? '/' : r == 2 ? '@' : static_cast<char>('a' + rng() % 4);
      }
      const std::uint32_t type = rng() % 3 == 0 ? rng() : rng() % 26;
      junk += (rng() % 10 == 0) ? std::string(len, static_cast<char>(rng()))
                                : header(type, rng(), rng() % 4, len) + payload;
    }
    if (!p.feed(bytes(junk), msgs)) continue;
    for (const auto& m : msgs) h.core.handle(conn, m);
    h.core.disconnect(conn);
  }
  EXPECT_GT(h.core.store().node_count(), 0u);
}

class XenstoreProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    h.core.create_domain_nodes(kDom1, "guest1");
    h.core.domain_introduced(kDom1);
    d0 = h.connect(kDom0);
    d1 = h.connect(kDom1);
  }
  XenstoreLimits limits() {
    XenstoreLimits l;
    l.max_nodes_per_domain = 50;
    l.max_watches_per_domain = 4;
    l.max_transactions_per_domain = 2;
    return l;
  }
  CoreHarness h{limits()};  // NOLINT(readability-identifier-naming): shorthand
  ConnId d0, d1;            // NOLINT(readability-identifier-naming): shorthand
};

TEST_F(XenstoreProtocol, UnknownAndReplyOnlyTypesAreEnosys) {
  for (std::uint32_t t : {20u, 15u, 16u, 23u, 0xFFFFu, 0xFFFFFFFFu})
    EXPECT_EQ(h.request(d0, static_cast<XsType>(t), z("/")).error(), "ENOSYS") << t;
  EXPECT_EQ(h.request(d0, XsType::control, z("print") + z("x")).error(), "ENOSYS");
}

TEST_F(XenstoreProtocol, MissingNulsAreEinval) {
  EXPECT_EQ(h.request(d0, XsType::read, "/a").error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::read, "").error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::read, z("/a") + z("b")).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::write, "/a").error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::rm, "").error(), "EINVAL");
}

TEST_F(XenstoreProtocol, PrivilegedRequestsAreDom0Only) {
  EXPECT_EQ(h.request(d1, XsType::introduce, z("5") + z("0") + z("0")).error(), "EACCES");
  EXPECT_EQ(h.request(d1, XsType::release, z("1")).error(), "EACCES");
  EXPECT_EQ(h.request(d1, XsType::is_domain_introduced, z("1")).error(), "EACCES");
  EXPECT_EQ(h.request(d1, XsType::resume, z("1")).error(), "EACCES");
  EXPECT_EQ(h.request(d1, XsType::set_target, z("1") + z("2")).error(), "EACCES");
  EXPECT_TRUE(h.opened.empty());
  EXPECT_EQ(h.request(d0, XsType::introduce, z("0") + z("0") + z("0")).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::introduce, z("7")).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::release, z("0")).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::is_domain_introduced, z("0")).payload, z("T"));
  EXPECT_EQ(h.request(d0, XsType::is_domain_introduced, z("1")).payload, z("T"));
  EXPECT_EQ(h.request(d0, XsType::resume, z("1")).payload, z("OK"));
}

TEST_F(XenstoreProtocol, DirectoryTooBigForOneReplyIsE2bigAndDirectoryPartPagesIt) {
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    names.push_back("entry-with-a-longish-name-" + std::to_string(i));
    ASSERT_FALSE(h.write(d0, "/big/" + names.back(), "").is_error());
  }
  EXPECT_EQ(h.dir(d0, "/big").error(), "E2BIG");

  std::string all;
  std::string gen;
  std::uint32_t off = 0;
  for (int guard = 0; guard < 100; ++guard) {
    auto a = h.request(d0, XsType::directory_part, z("/big") + z(std::to_string(off)));
    ASSERT_FALSE(a.is_error()) << a.error();
    ASSERT_LE(a.payload.size(), wire::kXsPayloadMax);
    const auto g = a.payload.substr(0, a.payload.find('\0'));
    if (gen.empty()) gen = g;
    EXPECT_EQ(g, gen);
    std::string part = a.payload.substr(g.size() + 1);
    // The last part ends with an empty name: two NULs (or just one for an empty rest).
    const bool last =
        part.size() >= 1 && (part.size() == 1 || part.ends_with(std::string(2, '\0')));
    if (last) part.pop_back();
    all += part;
    off += static_cast<std::uint32_t>(part.size());
    if (last) break;
  }
  std::string expect;
  for (auto& n : names) expect += z(n);
  EXPECT_EQ(all, expect);
  // Past the end: the generation and an empty name.
  auto past = h.request(d0, XsType::directory_part, z("/big") + z("999999"));
  EXPECT_EQ(past.payload, z(gen) + z(""));
  EXPECT_EQ(h.request(d0, XsType::directory_part, z("/big")).error(), "EINVAL");
  // The generation changes when the children do.
  h.write(d0, "/big/new", "");
  auto again = h.request(d0, XsType::directory_part, z("/big") + z("0"));
  EXPECT_NE(again.payload.substr(0, again.payload.find('\0')), gen);
}

TEST_F(XenstoreProtocol, NodeQuotaGivesEnospcAndDom0IsUnlimited) {
  const auto base = h.core.store().nodes_owned_by(kDom1);
  int created = 0;
  std::string last_error;
  for (int i = 0; i < 100; ++i) {
    auto a = h.write(d1, "data/n" + std::to_string(i), "v");
    if (a.is_error()) {
      last_error = a.error();
      break;
    }
    ++created;
  }
  EXPECT_EQ(last_error, "ENOSPC");
  EXPECT_EQ(base + static_cast<std::size_t>(created), 50u);
  EXPECT_EQ(h.core.store().nodes_owned_by(kDom1), 50u);
  // Writing existing nodes still works; removing frees quota.
  EXPECT_FALSE(h.write(d1, "data/n0", "again").is_error());
  EXPECT_FALSE(h.rm(d1, "data/n0").is_error());
  EXPECT_FALSE(h.write(d1, "data/fresh", "v").is_error());
  for (int i = 0; i < 100; ++i)
    ASSERT_FALSE(h.write(d0, "/d0/n" + std::to_string(i), "").is_error());
}

TEST_F(XenstoreProtocol, NodeQuotaCountsNodesCreatedInsideATransaction) {
  const auto tx = h.tx_start(d1);
  std::string err;
  for (int i = 0; i < 100 && err.empty(); ++i)
    err = h.write(d1, "data/t" + std::to_string(i), "", tx).error();
  EXPECT_EQ(err, "ENOSPC");
  EXPECT_FALSE(h.tx_end(d1, tx, true).is_error());
  EXPECT_EQ(h.core.store().nodes_owned_by(kDom1), 50u);
}

TEST_F(XenstoreProtocol, OversizedEntryFromDomUIsEnospc) {
  EXPECT_EQ(h.write(d1, "data/big", std::string(3000, 'x')).error(), "ENOSPC");
  EXPECT_FALSE(h.write(d0, "/local/domain/1/data/big", std::string(3000, 'x')).is_error());
}

TEST_F(XenstoreProtocol, TooManyPermissionEntriesFromDomUIsEnospc) {
  h.write(d1, "data/p", "");
  EXPECT_EQ(h.set_perms(d1, "data/p", {"n1", "r2", "r3", "r4", "r5", "r6"}).error(), "ENOSPC");
  EXPECT_FALSE(h.set_perms(d1, "data/p", {"n1", "r2", "r3", "r4", "r5"}).is_error());
}

TEST_F(XenstoreProtocol, WatchQuotaGivesE2big) {
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(h.watch(d1, "data", "t" + std::to_string(i)).is_error());
  EXPECT_EQ(h.watch(d1, "data", "t4").error(), "E2BIG");
  for (int i = 0; i < 10; ++i) ASSERT_FALSE(h.watch(d0, "/", "t" + std::to_string(i)).is_error());
}

TEST_F(XenstoreProtocol, TransactionQuotaGivesEnospc) {
  auto other = h.connect(kDom1);
  EXPECT_NE(h.tx_start(d1), 0u);
  EXPECT_NE(h.tx_start(other), 0u);
  EXPECT_EQ(h.request(d1, XsType::transaction_start, z("")).error(), "ENOSPC");
  for (int i = 0; i < 10; ++i) EXPECT_NE(h.tx_start(d0), 0u);
}

TEST_F(XenstoreProtocol, OverlongEventsAreNotSent) {
  const std::string token(wire::kXsPayloadMax, 't');
  EXPECT_FALSE(h.watch(d0, "/e", token).is_error());
  EXPECT_TRUE(h.take_events(d0).empty());
}

}  // namespace
