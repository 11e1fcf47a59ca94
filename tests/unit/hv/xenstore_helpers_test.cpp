// The XenStore code every implementation shares: permission strings, strict parsing of
// (hostile) frontend-written numbers, transact() retries, and the RAII transaction and
// watch handles. The RAII and retry tests use a scripted XenStore double that records the
// calls, because what they assert is exactly which calls are made.
#include <cstdint>
#include <deque>
#include <gtest/gtest.h>
#include <limits>
#include <string>
#include <vector>

#include "common/hv/xenstore.hpp"

namespace unetback::hv {
namespace {

using namespace std::string_literals;

// ---- parse_xs_perm / format_xs_perm ----

TEST(XsPerm, ParsesEachKindWithDomid) {
  EXPECT_EQ(parse_xs_perm("n0"), (XsPerm{DomId{0}, XsPerm::Kind::none}));
  EXPECT_EQ(parse_xs_perm("r5"), (XsPerm{DomId{5}, XsPerm::Kind::read}));
  EXPECT_EQ(parse_xs_perm("w12"), (XsPerm{DomId{12}, XsPerm::Kind::write}));
  EXPECT_EQ(parse_xs_perm("b65535"), (XsPerm{DomId{65535}, XsPerm::Kind::both}));
}

TEST(XsPerm, RejectsMalformedStrings) {
  for (const std::string& s : {""s, "r"s, "5"s, "x1"s, "R1"s, "r-1"s, "r+1"s, "r 1"s, "r1 "s,
                               "r1x"s, "r0x10"s, "r65536"s, "rr1"s, "r\0"s + "1"s}) {
    EXPECT_FALSE(parse_xs_perm(s).has_value()) << "'" << s << "'";
  }
}

TEST(XsPerm, FormatsAsXenstoredDoesAndRoundTrips) {
  EXPECT_EQ(format_xs_perm({DomId{0}, XsPerm::Kind::none}), "n0");
  EXPECT_EQ(format_xs_perm({DomId{7}, XsPerm::Kind::read}), "r7");
  EXPECT_EQ(format_xs_perm({DomId{3}, XsPerm::Kind::write}), "w3");
  EXPECT_EQ(format_xs_perm({DomId{65535}, XsPerm::Kind::both}), "b65535");
  for (auto kind :
       {XsPerm::Kind::none, XsPerm::Kind::read, XsPerm::Kind::write, XsPerm::Kind::both}) {
    const XsPerm p{DomId{42}, kind};
    EXPECT_EQ(parse_xs_perm(format_xs_perm(p)), p);
  }
}

// ---- parse_xs_uint ----

TEST(ParseXsUint, AcceptsPlainDecimal) {
  EXPECT_EQ(parse_xs_uint<std::uint32_t>("0"), 0u);
  EXPECT_EQ(parse_xs_uint<std::uint32_t>("1"), 1u);
  EXPECT_EQ(parse_xs_uint<std::uint32_t>("4096"), 4096u);
  // Leading zeros are still decimal (xenbus_scanf("%u") reads them the same way).
  EXPECT_EQ(parse_xs_uint<std::uint16_t>("007"), 7u);
}

TEST(ParseXsUint, AcceptsTheMaximumOfEachWidth) {
  EXPECT_EQ(parse_xs_uint<std::uint8_t>("255"), 255u);
  EXPECT_EQ(parse_xs_uint<std::uint16_t>("65535"), 65535u);
  EXPECT_EQ(parse_xs_uint<std::uint32_t>("4294967295"), 4294967295u);
  EXPECT_EQ(parse_xs_uint<std::uint64_t>("18446744073709551615"),
            std::numeric_limits<std::uint64_t>::max());
}

TEST(ParseXsUint, RejectsOverflowOfEachWidth) {
  EXPECT_FALSE(parse_xs_uint<std::uint8_t>("256"));
  EXPECT_FALSE(parse_xs_uint<std::uint16_t>("65536"));
  EXPECT_FALSE(parse_xs_uint<std::uint32_t>("4294967296"));
  EXPECT_FALSE(parse_xs_uint<std::uint64_t>("18446744073709551616"));
  EXPECT_FALSE(parse_xs_uint<std::uint64_t>("99999999999999999999"));
  // A narrow type must not wrap what a wider one would accept.
  EXPECT_FALSE(parse_xs_uint<std::uint8_t>("65535"));
  EXPECT_FALSE(parse_xs_uint<std::uint16_t>("4294967295"));
}

TEST(ParseXsUint, RejectsSignsSpacesHexAndJunk) {
  for (const std::string& s : {""s, "-1"s, "+1"s, " 1"s, "1 "s, "0x10"s, "1.0"s, "1e3"s, "a"s,
                               "1\n"s, "\t1"s, "1\0"s + "2"s, "1\0"s}) {
    EXPECT_FALSE(parse_xs_uint<std::uint8_t>(s)) << "u8 '" << s << "'";
    EXPECT_FALSE(parse_xs_uint<std::uint16_t>(s)) << "u16 '" << s << "'";
    EXPECT_FALSE(parse_xs_uint<std::uint32_t>(s)) << "u32 '" << s << "'";
    EXPECT_FALSE(parse_xs_uint<std::uint64_t>(s)) << "u64 '" << s << "'";
  }
}

TEST(ParseXsUint, RejectsMoreThanTwentyDigitsEvenWhenTheValueIsSmall) {
  EXPECT_EQ(parse_xs_uint<std::uint64_t>("00000000000000000001"), 1u);  // 20 digits
  EXPECT_FALSE(parse_xs_uint<std::uint64_t>("000000000000000000001"));  // 21 digits
  EXPECT_FALSE(parse_xs_uint<std::uint32_t>(std::string(64, '0')));
  EXPECT_FALSE(parse_xs_uint<std::uint64_t>(std::string(4096, '9')));
}

// ---- parse_domid ----

TEST(ParseDomid, TakesEveryDomainsIdAndRefusesTheReservedOnes) {
  EXPECT_EQ(parse_domid("0"), kDom0);
  EXPECT_EQ(parse_domid("32751"), DomId{0x7FEF});
  EXPECT_FALSE(parse_domid("32752")) << "DOMID_FIRST_RESERVED (DOMID_SELF)";
  EXPECT_FALSE(parse_domid("65535"));
  EXPECT_FALSE(parse_domid("65536"));
  EXPECT_FALSE(parse_domid("-1"));
  EXPECT_FALSE(parse_domid(" 5"));
  EXPECT_TRUE(is_reserved(kFirstReservedDomId));
  EXPECT_FALSE(is_reserved(DomId{0x7FEF}));
}

// ---- A scripted XenStore double ----

/// Records transaction and watch calls; transaction_start / transaction_end / watch answer
/// from scripts (empty script: success).
class ScriptedXenStore final : public XenStore {
 public:
  std::vector<std::string> calls;
  std::deque<std::error_code> start_script, end_script, watch_script;

  Result<std::string> read(std::string_view, XsTx) override { return std::errc::not_supported; }
  std::error_code write(std::string_view, std::string_view, XsTx) override { return {}; }
  std::error_code mkdir(std::string_view, XsTx) override { return {}; }
  std::error_code rm(std::string_view, XsTx) override { return {}; }
  Result<std::vector<std::string>> directory(std::string_view, XsTx) override {
    return std::errc::not_supported;
  }
  Result<std::vector<XsPerm>> get_perms(std::string_view, XsTx) override {
    return std::errc::not_supported;
  }
  std::error_code set_perms(std::string_view, std::span<const XsPerm>, XsTx) override { return {}; }

  Result<XsTx> transaction_start() override {
    if (auto ec = pop(start_script)) {
      calls.push_back("start -> " + ec.message());
      return ec;
    }
    const XsTx tx{++last_tx_};
    calls.push_back("start -> " + std::to_string(tx.id));
    return tx;
  }
  std::error_code transaction_end(XsTx tx, bool commit) override {
    calls.push_back((commit ? "commit " : "abort ") + std::to_string(tx.id));
    return commit ? pop(end_script) : std::error_code{};
  }
  std::error_code watch(std::string_view path, std::string_view token) override {
    calls.push_back("watch " + std::string(path) + " " + std::string(token));
    return pop(watch_script);
  }
  std::error_code unwatch(std::string_view path, std::string_view token) override {
    calls.push_back("unwatch " + std::string(path) + " " + std::string(token));
    return {};
  }
  [[nodiscard]] int watch_fd() const override { return -1; }
  std::optional<XsWatchEvent> read_watch() override { return std::nullopt; }
  Result<std::string> get_domain_path(DomId) override { return std::errc::not_supported; }

 private:
  static std::error_code pop(std::deque<std::error_code>& script) {
    if (script.empty()) return {};
    auto ec = script.front();
    script.pop_front();
    return ec;
  }
  std::uint32_t last_tx_ = 0;
};

const std::error_code eagain = std::make_error_code(std::errc::resource_unavailable_try_again);
const std::error_code eio = std::make_error_code(std::errc::io_error);
const std::error_code enoent = std::make_error_code(std::errc::no_such_file_or_directory);

using Calls = std::vector<std::string>;

// ---- transact ----

TEST(Transact, CommitsOnceWithoutConflict) {
  ScriptedXenStore xs;
  std::vector<XsTx> bodies;
  EXPECT_FALSE(transact(xs, [&](XsTx tx) {
    bodies.push_back(tx);
    return std::error_code{};
  }));
  EXPECT_EQ(bodies, (std::vector<XsTx>{{1}}));
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "commit 1"}));
}

TEST(Transact, RetriesTheWholeTransactionOnEagain) {
  ScriptedXenStore xs;
  xs.end_script = {eagain, eagain, {}};
  std::vector<XsTx> bodies;
  EXPECT_FALSE(transact(xs, [&](XsTx tx) {
    bodies.push_back(tx);
    return std::error_code{};
  }));
  // Each attempt runs the body again inside a fresh transaction.
  EXPECT_EQ(bodies, (std::vector<XsTx>{{1}, {2}, {3}}));
  EXPECT_EQ(xs.calls,
            (Calls{"start -> 1", "commit 1", "start -> 2", "commit 2", "start -> 3", "commit 3"}));
}

TEST(Transact, StopsOnACommitErrorOtherThanEagain) {
  ScriptedXenStore xs;
  xs.end_script = {eio, {}};
  int bodies = 0;
  EXPECT_EQ(transact(xs,
                     [&](XsTx) {
                       ++bodies;
                       return std::error_code{};
                     }),
            eio);
  EXPECT_EQ(bodies, 1);
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "commit 1"}));
}

TEST(Transact, BodyErrorAbortsAndIsReturnedWithoutRetry) {
  ScriptedXenStore xs;
  int bodies = 0;
  EXPECT_EQ(transact(xs,
                     [&](XsTx) {
                       ++bodies;
                       return enoent;
                     }),
            enoent);
  EXPECT_EQ(bodies, 1);
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "abort 1"}));
}

TEST(Transact, BodyEagainIsNotMistakenForAConflict) {
  // An EAGAIN from a read inside the body is the body's error, not a commit conflict:
  // it aborts and is returned.
  ScriptedXenStore xs;
  int bodies = 0;
  EXPECT_EQ(transact(xs,
                     [&](XsTx) {
                       ++bodies;
                       return eagain;
                     }),
            eagain);
  EXPECT_EQ(bodies, 1);
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "abort 1"}));
}

TEST(Transact, StartFailureIsReturnedWithoutRunningTheBody) {
  ScriptedXenStore xs;
  xs.start_script = {eio};
  bool ran = false;
  EXPECT_EQ(transact(xs,
                     [&](XsTx) {
                       ran = true;
                       return std::error_code{};
                     }),
            eio);
  EXPECT_FALSE(ran);
  EXPECT_EQ(xs.calls, (Calls{"start -> " + eio.message()}));
}

TEST(Transact, GivesUpWithEagainAfterMaxAttempts) {
  ScriptedXenStore xs;
  xs.end_script = {eagain, eagain, eagain, {}};
  int bodies = 0;
  EXPECT_EQ(transact(
                xs,
                [&](XsTx) {
                  ++bodies;
                  return std::error_code{};
                },
                3),
            eagain);
  EXPECT_EQ(bodies, 3);
}

// ---- XsTransaction ----

TEST(XsTransaction, AbortsOnDestructionUnlessCommitted) {
  ScriptedXenStore xs;
  {
    XsTransaction tx(xs);
    EXPECT_EQ(tx.id(), XsTx{1});
  }
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "abort 1"}));
}

TEST(XsTransaction, CommittedTransactionIsNotAbortedAfterwards) {
  ScriptedXenStore xs;
  {
    XsTransaction tx(xs);
    EXPECT_FALSE(tx.commit());
  }
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "commit 1"}));
}

TEST(XsTransaction, ConflictingCommitReportsEagainAndEndsTheTransaction) {
  ScriptedXenStore xs;
  xs.end_script = {eagain};
  {
    XsTransaction tx(xs);
    EXPECT_EQ(tx.commit(), eagain);
    // xenstored has ended the transaction either way: a second commit is refused locally.
    EXPECT_EQ(tx.commit(), std::errc::invalid_argument);
  }
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "commit 1"}));
}

TEST(XsTransaction, MoveTransfersTheAbort) {
  ScriptedXenStore xs;
  {
    XsTransaction a(xs);
    XsTransaction b(std::move(a));
    EXPECT_EQ(b.id(), XsTx{1});
  }
  EXPECT_EQ(xs.calls, (Calls{"start -> 1", "abort 1"}));
}

TEST(XsTransaction, StartFailureIsASetupError) {
  ScriptedXenStore xs;
  xs.start_script = {eio};
  EXPECT_THROW(XsTransaction tx(xs), SetupError);
  EXPECT_EQ(xs.calls, (Calls{"start -> " + eio.message()}));
}

// ---- XsWatch ----

TEST(XsWatch, AddRegistersAndDestructionUnregistersTheSameWatch) {
  ScriptedXenStore xs;
  {
    auto w = XsWatch::add(xs, "/local/domain/0/backend/vif", "be");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->path(), "/local/domain/0/backend/vif");
    EXPECT_EQ(w->token(), "be");
  }
  EXPECT_EQ(xs.calls, (Calls{"watch /local/domain/0/backend/vif be",
                             "unwatch /local/domain/0/backend/vif be"}));
}

TEST(XsWatch, FailedAddReturnsTheErrorAndUnregistersNothing) {
  ScriptedXenStore xs;
  xs.watch_script = {make_error_code(std::errc::permission_denied)};
  {
    auto w = XsWatch::add(xs, "/local/domain/3", "t");
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), std::errc::permission_denied);
  }
  EXPECT_EQ(xs.calls, (Calls{"watch /local/domain/3 t"}));
}

TEST(XsWatch, MovedWatchIsUnregisteredExactlyOnce) {
  ScriptedXenStore xs;
  {
    auto w = XsWatch::add(xs, "/a", "t");
    ASSERT_TRUE(w);
    XsWatch moved(std::move(*w));
    XsWatch assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.path(), "/a");
  }
  EXPECT_EQ(xs.calls, (Calls{"watch /a t", "unwatch /a t"}));
}

TEST(XsWatch, MoveAssignmentUnregistersTheWatchItReplaces) {
  ScriptedXenStore xs;
  {
    auto first = XsWatch::add(xs, "/a", "1");
    auto second = XsWatch::add(xs, "/b", "2");
    ASSERT_TRUE(first && second);
    *first = std::move(*second);
    EXPECT_EQ(xs.calls, (Calls{"watch /a 1", "watch /b 2", "unwatch /a 1"}));
  }
  EXPECT_EQ(xs.calls, (Calls{"watch /a 1", "watch /b 2", "unwatch /a 1", "unwatch /b 2"}));
}

TEST(XsWatch, ResetUnregistersOnceAndDestructionDoesNothingMore) {
  ScriptedXenStore xs;
  {
    auto w = XsWatch::add(xs, "/a", "t");
    ASSERT_TRUE(w);
    w->reset();
    w->reset();
  }
  EXPECT_EQ(xs.calls, (Calls{"watch /a t", "unwatch /a t"}));
}

}  // namespace
}  // namespace unetback::hv
