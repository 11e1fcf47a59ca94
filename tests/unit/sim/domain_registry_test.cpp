// xensim's broker state without sockets: domain lifetime, Xen's event-channel binding rules,
// and the fault-injection state it publishes in the control pages.
#include "tools/xensim/domain_registry.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <vector>

#include "common/hv/sim/broker_protocol.hpp"
#include "common/hv/sim/shared_grant_entry.hpp"
#include "common/wire/grant.hpp"

namespace unetback::xensim {
namespace {

using hv::sim::shared_u32;

class RecordingListener final : public DomainListener {
 public:
  void domain_introduced(DomId id, std::string_view name) override {
    log.push_back("introduce " + std::to_string(id.value()) + " " + std::string(name));
  }
  void domain_released(DomId id) override {
    log.push_back("release " + std::to_string(id.value()));
  }
  std::vector<std::string> log;
};

RegistryConfig small() {
  RegistryConfig c;
  c.default_frames = 16;
  c.grant_entries = 64;
  return c;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

class Registry : public ::testing::Test {
 protected:
  RecordingListener listener_;
  DomainRegistry reg_{listener_, small()};
};

TEST_F(Registry, DomainIdsStartAtOneAndAreNeverReused) {
  auto a = reg_.create("a", 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->value(), 1);
  reg_.release(*a);
  auto b = reg_.create("a", 0);  // the name is free again, the id is not
  ASSERT_TRUE(b);
  EXPECT_EQ(b->value(), 2);
  EXPECT_EQ(listener_.log,
            (std::vector<std::string>{"introduce 1 a", "release 1", "introduce 2 a"}));
  EXPECT_EQ(reg_.find(*b)->nr_frames, 16U);
}

TEST_F(Registry, BadOrDuplicateNamesAndSizesAreRefused) {
  ASSERT_TRUE(reg_.create("web", 0));
  EXPECT_EQ(reg_.create("web", 0).error(), std::errc::file_exists);
  EXPECT_EQ(reg_.create("Domain-0", 0).error(), std::errc::file_exists);
  EXPECT_EQ(reg_.create("", 0).error(), std::errc::invalid_argument);
  EXPECT_EQ(reg_.create("a/b", 0).error(), std::errc::invalid_argument);
  EXPECT_EQ(reg_.create("huge", small().max_frames + 1).error(), std::errc::invalid_argument);
}

TEST_F(Registry, ADomainRunsInOneProcessOnly) {
  auto d = reg_.create("g", 0);
  ASSERT_TRUE(d);
  EXPECT_FALSE(reg_.attach(*d, 7, 1234));
  EXPECT_EQ(reg_.attach(*d, 8, 1235), std::errc::device_or_resource_busy);
  EXPECT_EQ(reg_.attach(kDom0, 8, 1235), std::errc::no_such_process);
  // Its connection closing is its death.
  reg_.client_closed(7, *d);
  EXPECT_FALSE(reg_.exists(*d));
}

TEST_F(Registry, BindInterdomainNeedsAnUnboundPortOfferedToUs) {
  auto d = reg_.create("g", 0);
  ASSERT_TRUE(d);
  auto offered = reg_.alloc_unbound(*d, 5, kDom0);
  auto for_other = reg_.alloc_unbound(*d, 5, DomId{9});
  ASSERT_TRUE(offered && for_other);
  EXPECT_EQ(*offered, 1U);  // ports start at 1
  EXPECT_EQ(reg_.bind_interdomain(kDom0, 1, *d, *for_other).error(), std::errc::invalid_argument);
  EXPECT_EQ(reg_.bind_interdomain(kDom0, 1, *d, 99).error(), std::errc::invalid_argument);
  EXPECT_EQ(reg_.bind_interdomain(kDom0, 1, DomId{77}, 1).error(), std::errc::no_such_process);
  auto local = reg_.bind_interdomain(kDom0, 1, *d, *offered);
  ASSERT_TRUE(local);
  // Bound now: a second binding is refused.
  EXPECT_EQ(reg_.bind_interdomain(kDom0, 1, *d, *offered).error(), std::errc::invalid_argument);
  auto peer = reg_.peer(kDom0, *local);
  ASSERT_TRUE(peer);
  EXPECT_TRUE(peer->bound);
  EXPECT_EQ(peer->domid, *d);
  EXPECT_EQ(peer->port, *offered);
  EXPECT_EQ(peer->eventfd, reg_.find(*d)->ports.at(*offered).eventfd.get());
}

TEST_F(Registry, ClosingAPortUnbindsItsPeerAndTellsThePeersNotifier) {
  auto d = reg_.create("g", 0);
  ASSERT_TRUE(d);
  auto offered = reg_.alloc_unbound(*d, 5, kDom0);
  auto local = reg_.bind_interdomain(kDom0, 1, *d, *offered);
  ASSERT_TRUE(offered && local);
  const auto gen_before = reg_.peer(*d, *offered)->bind_gen;
  EXPECT_EQ(reg_.close_port(kDom0, 2, *local), std::errc::invalid_argument);  // not its owner
  ASSERT_FALSE(reg_.close_port(kDom0, 1, *local));
  auto peer = reg_.peer(*d, *offered);
  ASSERT_TRUE(peer);
  EXPECT_FALSE(peer->bound);
  EXPECT_NE(peer->bind_gen, gen_before);
  // Still offered to dom0: it can be bound again, as after EVTCHNOP_close on Xen.
  EXPECT_TRUE(reg_.bind_interdomain(kDom0, 1, *d, *offered));
}

TEST_F(Registry, ReleasedDomainUnbindsItsPeersAndIsMarkedDead) {
  auto d = reg_.create("g", 0);
  ASSERT_TRUE(d);
  auto offered = reg_.alloc_unbound(*d, 5, kDom0);
  auto local = reg_.bind_interdomain(kDom0, 1, *d, *offered);
  ASSERT_TRUE(local);
  // Keep the control page alive past the release, as a mapping process would.
  auto ctl = hv::sim::MappedRegion::map_shared(reg_.find(*d)->control.get(),
                                               hv::sim::kDomainControlSize, PROT_READ);
  ASSERT_TRUE(ctl);
  EXPECT_EQ(ctl->as<hv::sim::DomainControl>()->dead, 0U);
  reg_.release(*d);
  EXPECT_EQ(ctl->as<hv::sim::DomainControl>()->dead, 1U);
  auto peer = reg_.peer(kDom0, *local);
  ASSERT_TRUE(peer);
  EXPECT_FALSE(peer->bound);
  EXPECT_EQ(listener_.log.back(), "release 1");
}

TEST_F(Registry, Dom0PortsDieWithTheirConnectionOnly) {
  auto mine = reg_.alloc_unbound(kDom0, 1, kDom0);
  auto theirs = reg_.alloc_unbound(kDom0, 2, kDom0);
  ASSERT_TRUE(mine && theirs);
  reg_.client_closed(1, std::nullopt);
  EXPECT_FALSE(reg_.peer(kDom0, *mine));
  EXPECT_TRUE(reg_.peer(kDom0, *theirs));
  EXPECT_TRUE(reg_.exists(kDom0));
}

TEST_F(Registry, UnstallDeliversEachHeldPortOnce) {
  auto p1 = reg_.alloc_unbound(kDom0, 1, kDom0);
  auto p2 = reg_.alloc_unbound(kDom0, 1, kDom0);
  ASSERT_TRUE(p1 && p2);
  Domain& dom0 = *reg_.find(kDom0);
  ASSERT_FALSE(reg_.stall(kDom0, true));
  EXPECT_EQ(dom0.ctl().stalled, 1U);
  shared_u32(dom0.ctl().ports[*p1].held).store(1);  // as a sender does while stalled
  ASSERT_FALSE(reg_.stall(kDom0, false));
  EXPECT_TRUE(readable(dom0.ports.at(*p1).eventfd.get()));
  EXPECT_FALSE(readable(dom0.ports.at(*p2).eventfd.get()));
  EXPECT_EQ(dom0.ctl().ports[*p1].held, 0U);
  EXPECT_EQ(reg_.drop_events(kDom0, 999, 1), std::errc::invalid_argument);
  ASSERT_FALSE(reg_.drop_events(kDom0, *p2, 3));
  EXPECT_EQ(dom0.ctl().ports[*p2].drop, 3U);
}

TEST_F(Registry, GrantFaultsRewriteTheEntryButNotTheHypervisorBits) {
  auto d = reg_.create("g", 0);
  ASSERT_TRUE(d);
  auto* table = reg_.find(*d)->grant_map.as<hv::sim::SharedGrantEntry>();
  hv::sim::word_of(table[10]).store(hv::sim::entry_word(GTF_permit_access | GTF_reading, 0));
  table[10].frame = 3;
  ASSERT_FALSE(reg_.revoke_grant(*d, 10));
  EXPECT_EQ(hv::sim::entry_flags(table[10].flags_domid), GTF_reading);
  ASSERT_FALSE(reg_.corrupt_grant(*d, 10, DomId{6}, 12345));
  EXPECT_EQ(hv::sim::entry_domid(table[10].flags_domid), 6);
  EXPECT_EQ(table[10].frame, 12345U);
  EXPECT_EQ(reg_.revoke_grant(*d, 64), std::errc::invalid_argument);
  EXPECT_EQ(reg_.revoke_grant(kDom0, 1), std::errc::no_such_process);
}

TEST_F(Registry, GrantsHeldByADeadMapperAreReleasedAndOnlyTheirs) {
  auto d = reg_.create("g", 0);
  ASSERT_TRUE(d);
  auto* table = reg_.find(*d)->grant_map.as<hv::sim::SharedGrantEntry>();
  const std::uint16_t held = GTF_permit_access | GTF_reading | GTF_writing;
  hv::sim::word_of(table[10]).store(hv::sim::entry_word(held, 0));
  hv::sim::word_of(table[11]).store(hv::sim::entry_word(GTF_permit_access | GTF_reading, 0));
  hv::sim::word_of(table[12]).store(hv::sim::entry_word(GTF_permit_access | GTF_reading, 0));
  auto dying = reg_.new_pin_table(*d, 7);
  auto living = reg_.new_pin_table(*d, 8);
  ASSERT_TRUE(dying && living);
  const std::size_t size = 64 * sizeof(hv::sim::GrantPins);
  auto dm = hv::sim::MappedRegion::map_shared(*dying, size, PROT_READ | PROT_WRITE);
  auto lm = hv::sim::MappedRegion::map_shared(*living, size, PROT_READ | PROT_WRITE);
  ASSERT_TRUE(dm && lm);
  // The dying process maps 10 (writable) and 12; the living one copies from 12 and 11.
  dm->as<hv::sim::GrantPins>()[10] = {1, 1};
  dm->as<hv::sim::GrantPins>()[12] = {2, 0};
  lm->as<hv::sim::GrantPins>()[11] = {1, 0};
  lm->as<hv::sim::GrantPins>()[12] = {1, 0};

  reg_.client_closed(7, std::nullopt);  // as gntdev at the process's exit
  EXPECT_EQ(hv::sim::entry_flags(table[10].flags_domid), GTF_permit_access);
  EXPECT_EQ(hv::sim::entry_flags(table[11].flags_domid), GTF_permit_access | GTF_reading);
  EXPECT_EQ(hv::sim::entry_flags(table[12].flags_domid), GTF_permit_access | GTF_reading)
      << "a grant another process still holds stays held";
  EXPECT_EQ(reg_.find(*d)->pin_tables.size(), 1U) << "the dead process's table is gone";
  // A grant mapped again later (by a successor) is not touched by the old table any more.
  hv::sim::word_of(table[10]).store(hv::sim::entry_word(held, 0));
  reg_.client_closed(7, std::nullopt);
  EXPECT_EQ(hv::sim::entry_flags(table[10].flags_domid), held);
  EXPECT_EQ(reg_.new_pin_table(kDom0, 7).error(), std::errc::no_such_process);
}

TEST_F(Registry, AFrontendsPortOutlivesItsDeadBackendAndOnlyDom0MayBindItAgain) {
  auto d = reg_.create("g", 0);
  auto other = reg_.create("h", 0);
  ASSERT_TRUE(d && other);
  auto offered = reg_.alloc_unbound(*d, 5, kDom0);  // the frontend's port, for dom0
  ASSERT_TRUE(offered);
  auto local = reg_.bind_interdomain(kDom0, 1, *d, *offered);
  ASSERT_TRUE(local);
  reg_.client_closed(1, std::nullopt);  // the backend process dies
  EXPECT_FALSE(reg_.peer(kDom0, *local)) << "its end is closed";
  auto peer = reg_.peer(*d, *offered);
  ASSERT_TRUE(peer);
  EXPECT_FALSE(peer->bound) << "the frontend's end waits, unbound";
  EXPECT_EQ(reg_.bind_interdomain(*other, 9, *d, *offered).error(), std::errc::invalid_argument)
      << "still offered to dom0 alone";
  auto again = reg_.bind_interdomain(kDom0, 2, *d, *offered);  // the successor
  ASSERT_TRUE(again);
  EXPECT_TRUE(reg_.peer(*d, *offered)->bound);
  EXPECT_EQ(reg_.peer(kDom0, *again)->port, *offered);
}

}  // namespace
}  // namespace unetback::xensim
