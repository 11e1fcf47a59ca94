// Daemon-wide tunables: strict parsing of every key, and TunableStore's xenstore contract
// (defaults written, valid values adopted, rejected values rewritten with the one in force).
#include "backend/daemon/tunables.hpp"

#include <gtest/gtest.h>

#include "tests/unit/xenbus/memory_xenstore.hpp"

namespace unetback::daemon {
namespace {

struct Bounds {
  const char* name;
  std::uint64_t min, max;
  const char* default_value;
};

// What docs/operator-guide.md's tunables table says of each numeric key.
// NOLINTNEXTLINE(readability-identifier-naming): a constant table, named as the constexpr ones.
const Bounds kNumeric[] = {
    {"max-queues", 1, 16, "4"},
    {"copy-batch", 1, 1024, "64"},
    {"max-pending", 1, 1024, "128"},
    {"goodcopy-len", 0, 65535, "256"},
    {"zerocopy-fallback", 0, 1, "1"},
    {"rx-queue-bytes", 65536, 64ULL * 1024 * 1024, "524288"},
    {"rx-drain-timeout-ms", 1, 600000, "10000"},
    {"rx-stall-timeout-ms", 1, 600000, "60000"},
    {"fatal-skb-slots", 19, 64, "20"},
    {"threads", 1, 64, "2"},
    {"tap-queue-len", 16, 4096, "500"},
};

class NumericTunable : public ::testing::TestWithParam<Bounds> {};

TEST_P(NumericTunable, AcceptsItsBoundsAndRejectsEverythingElse) {
  const Bounds b = GetParam();
  const TunableSpec* spec = find_tunable(b.name);
  ASSERT_NE(spec, nullptr);
  const vif::Tunables defaults;
  EXPECT_EQ(format_tunable(defaults, *spec), b.default_value);

  for (std::uint64_t ok : {b.min, b.max, (b.min + b.max) / 2}) {
    vif::Tunables t;
    EXPECT_EQ(set_tunable(t, *spec, std::to_string(ok)), std::nullopt) << ok;
    EXPECT_EQ(format_tunable(t, *spec), std::to_string(ok));
  }
  std::vector<std::string> bad = {
      std::to_string(b.max + 1), "", "abc", " 4", "4 ", "-1", "+4", "0x10", "1.5", "4\n",
      std::string("4\0", 2),
      "99999999999999999999",       // overflows 64 bits
      "999999999999999999999999"};  // longer than any u64
  if (b.min > 0) bad.push_back(std::to_string(b.min - 1));
  for (const auto& v : bad) {
    vif::Tunables t;
    auto why = set_tunable(t, *spec, v);
    EXPECT_TRUE(why.has_value()) << "accepted '" << v << "'";
    EXPECT_EQ(t, vif::Tunables{}) << "a rejected value must leave the tunables unchanged";
  }
  vif::Tunables t;
  auto why = set_tunable(t, *spec, std::to_string(b.max + 1));
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, std::to_string(b.max + 1) + " is out of range " + std::to_string(b.min) + ".." +
                      std::to_string(b.max));
}

INSTANTIATE_TEST_SUITE_P(EveryKey, NumericTunable, ::testing::ValuesIn(kNumeric),
                         [](const auto& param_info) {
                           std::string n = param_info.param.name;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Tunables, EveryKeyIsCoveredByTheTests) {
  EXPECT_EQ(tunable_specs().size(), std::size(kNumeric) + 2);  // + rx-coalesce, tx-map
  EXPECT_EQ(find_tunable("no-such-key"), nullptr);
}

TEST(Tunables, FieldsFollowTheirKeys) {
  vif::Tunables t;
  ASSERT_FALSE(set_tunable(t, *find_tunable("max-queues"), "7"));
  ASSERT_FALSE(set_tunable(t, *find_tunable("copy-batch"), "33"));
  ASSERT_FALSE(set_tunable(t, *find_tunable("zerocopy-fallback"), "0"));
  ASSERT_FALSE(set_tunable(t, *find_tunable("fatal-skb-slots"), "30"));
  ASSERT_FALSE(set_tunable(t, *find_tunable("rx-coalesce"), "legacy"));
  ASSERT_FALSE(set_tunable(t, *find_tunable("threads"), "9"));
  EXPECT_EQ(t.max_queues, 7U);
  EXPECT_EQ(t.copy_batch, 33U);
  EXPECT_FALSE(t.zerocopy_fallback);
  EXPECT_EQ(t.fatal_skb_slots, 30U);
  EXPECT_FALSE(t.rx_coalesce_full);
  EXPECT_EQ(t.threads, 9U);
  EXPECT_EQ(t.max_pending, vif::Tunables{}.max_pending);
}

TEST(Tunables, RxCoalesceTakesFullOrLegacyOnly) {
  const TunableSpec* spec = find_tunable("rx-coalesce");
  ASSERT_NE(spec, nullptr);
  vif::Tunables t;
  EXPECT_EQ(format_tunable(t, *spec), "full");
  EXPECT_EQ(set_tunable(t, *spec, "legacy"), std::nullopt);
  EXPECT_EQ(format_tunable(t, *spec), "legacy");
  EXPECT_EQ(set_tunable(t, *spec, "full"), std::nullopt);
  EXPECT_TRUE(t.rx_coalesce_full);
  for (const char* bad : {"", "FULL", "full ", "0", "1", "partial", "fulllegacy"}) {
    vif::Tunables u;
    auto why = set_tunable(u, *spec, bad);
    ASSERT_TRUE(why.has_value()) << bad;
    EXPECT_NE(why->find("full or legacy"), std::string::npos) << *why;
  }
}

TEST(Tunables, TxMapTakesAutoAlwaysOrNever) {
  const TunableSpec* spec = find_tunable("tx-map");
  ASSERT_NE(spec, nullptr);
  vif::Tunables t;
  EXPECT_EQ(format_tunable(t, *spec), "auto");
  EXPECT_EQ(t.tx_map, zerocopy::MapMode::auto_choice);
  EXPECT_EQ(set_tunable(t, *spec, "never"), std::nullopt);
  EXPECT_EQ(t.tx_map, zerocopy::MapMode::never);
  EXPECT_EQ(format_tunable(t, *spec), "never");
  EXPECT_EQ(set_tunable(t, *spec, "always"), std::nullopt);
  EXPECT_EQ(t.tx_map, zerocopy::MapMode::always);
  for (const char* bad : {"", "AUTO", "auto ", "0", "2", "sometimes"}) {
    vif::Tunables u;
    auto why = set_tunable(u, *spec, bad);
    ASSERT_TRUE(why.has_value()) << bad;
    EXPECT_NE(why->find("always"), std::string::npos) << *why;
    EXPECT_EQ(u, vif::Tunables{});
  }
}

TEST(Tunables, ReasonsDoNotEchoControlCharacters) {
  vif::Tunables t;
  auto why = set_tunable(t, *find_tunable("threads"), "\x1b[31mred");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->find('\x1b'), std::string::npos);
}

class TunableStoreTest : public ::testing::Test {
 protected:
  testing::MemoryXenStore xs_;
  const std::string dir_ = "/local/domain/0/unetback";

  std::string read(const std::string& key) {
    auto r = xs_.read(dir_ + "/" + key);
    return r ? *r : "<absent>";
  }
  void pump(TunableStore& store) {
    for (int i = 0; i < 1000; ++i) {
      auto ev = xs_.read_watch();
      if (!ev) return;
      store.handle_watch(*ev);
    }
    FAIL() << "watch events never stopped";
  }
};

TEST_F(TunableStoreTest, StartWritesEveryDefault) {
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  for (const auto& spec : tunable_specs())
    EXPECT_EQ(read(std::string(spec.name)), format_tunable(vif::Tunables{}, spec)) << spec.name;
  EXPECT_EQ(store.current(), vif::Tunables{});
}

TEST_F(TunableStoreTest, StartKeepsValidStoredValuesAndRepairsInvalidOnes) {
  ASSERT_FALSE(xs_.write(dir_ + "/max-queues", "8"));
  ASSERT_FALSE(xs_.write(dir_ + "/copy-batch", "0"));  // below range
  ASSERT_FALSE(xs_.write(dir_ + "/rx-coalesce", "legacy"));
  ASSERT_FALSE(xs_.write(dir_ + "/threads", "lots"));
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  EXPECT_EQ(store.current().max_queues, 8U);
  EXPECT_FALSE(store.current().rx_coalesce_full);
  EXPECT_EQ(store.current().copy_batch, 64U);
  EXPECT_EQ(read("copy-batch"), "64");
  EXPECT_EQ(read("threads"), "2");
}

TEST_F(TunableStoreTest, CommandLineValuesReplaceStoredOnes) {
  ASSERT_FALSE(xs_.write(dir_ + "/max-queues", "8"));
  ASSERT_FALSE(xs_.write(dir_ + "/copy-batch", "32"));
  vif::Tunables initial;
  initial.max_queues = 2;
  TunableStore store(xs_, DomId{0}, initial, {"max-queues"});
  ASSERT_FALSE(store.start());
  pump(store);
  EXPECT_EQ(store.current().max_queues, 2U);
  EXPECT_EQ(read("max-queues"), "2");
  EXPECT_EQ(store.current().copy_batch, 32U) << "not on the command line: the stored value stays";
}

TEST_F(TunableStoreTest, BadValueIsRejectedAndThePreviousValueWrittenBack) {
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  ASSERT_FALSE(xs_.write(dir_ + "/max-queues", "6"));
  pump(store);
  EXPECT_EQ(store.current().max_queues, 6U);
  for (const char* bad : {"17", "0", "six", "", "-6"}) {
    ASSERT_FALSE(xs_.write(dir_ + "/max-queues", bad));
    pump(store);
    EXPECT_EQ(store.current().max_queues, 6U) << bad;
    EXPECT_EQ(read("max-queues"), "6") << "xenstore-read must show the value in force";
  }
}

TEST_F(TunableStoreTest, RemovedKeyIsRestored) {
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  ASSERT_FALSE(xs_.rm(dir_ + "/fatal-skb-slots"));
  pump(store);
  EXPECT_EQ(read("fatal-skb-slots"), "20");
  ASSERT_FALSE(xs_.rm(dir_));
  pump(store);
  for (const auto& spec : tunable_specs())
    EXPECT_EQ(read(std::string(spec.name)), format_tunable(vif::Tunables{}, spec)) << spec.name;
}

TEST_F(TunableStoreTest, ValidSpellingsAreNormalised) {
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  ASSERT_FALSE(xs_.write(dir_ + "/copy-batch", "0128"));
  pump(store);
  EXPECT_EQ(store.current().copy_batch, 128U);
  EXPECT_EQ(read("copy-batch"), "128");
}

TEST_F(TunableStoreTest, UnknownKeysInTheDirectoryAreLeftAlone) {
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  ASSERT_FALSE(xs_.write(dir_ + "/operator-note", "hello"));
  pump(store);
  EXPECT_EQ(read("operator-note"), "hello");
  EXPECT_EQ(store.current(), vif::Tunables{});
}

TEST_F(TunableStoreTest, ControlSetValidatesWritesAndAdopts) {
  TunableStore store(xs_, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  pump(store);
  EXPECT_EQ(store.set("goodcopy-len", "1024"), std::nullopt);
  EXPECT_EQ(store.current().goodcopy_len, 1024U);
  EXPECT_EQ(read("goodcopy-len"), "1024");
  pump(store);  // the echo of our own write changes nothing
  EXPECT_EQ(store.current().goodcopy_len, 1024U);

  auto why = store.set("goodcopy-len", "70000");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "70000 is out of range 0..65535");
  EXPECT_EQ(read("goodcopy-len"), "1024") << "a rejected set writes nothing";
  why = store.set("no-such", "1");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("unknown tunable"), std::string::npos);
}

TEST_F(TunableStoreTest, UsesTheBackendDomainsDirectory) {
  TunableStore store(xs_, DomId{3}, vif::Tunables{});
  ASSERT_FALSE(store.start());
  EXPECT_TRUE(xs_.exists("/local/domain/3/unetback/threads"));
  EXPECT_FALSE(xs_.exists(dir_));
}

}  // namespace
}  // namespace unetback::daemon
