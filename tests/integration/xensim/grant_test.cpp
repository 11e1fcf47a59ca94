// Grant copy and map between processes through xensim: a forked domU grants pages, dom0
// (this process) copies and maps them; every check of Xen's grant_table.c shows up as its
// GNTST_* status.
#include "common/wire/grant.hpp"

#include <array>
#include <chrono>
#include <csignal>
#include <gtest/gtest.h>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/granter_child.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/fd_limit.hpp"

namespace unetback::test {
namespace {

using hv::GrantCopyPtr;
using hv::GrantCopySegment;
using hv::kPageSize;

struct Shared {
  int set = -1;
  std::vector<GrantRef> refs;
};

class GrantBetweenProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = std::make_unique<XensimProcess>();
    const std::string dir = world_->dir();
    child_ = std::make_unique<ChildProcess>(
        [dir](int ctrl) { return granter_main(ctrl, dir, "granter"); });
    auto hello = child_->recv();
    ASSERT_TRUE(hello && hello->starts_with("domid ")) << hello.value_or("(nothing)");
    domu_ = DomId{static_cast<std::uint16_t>(std::stoul(hello->substr(6)))};
    hv::HypervisorOptions o;
    o.role = hv::Role::backend;
    o.copy_batch = 8;
    dom0_ = std::make_unique<hv::SimHypervisor>(dir, o);
  }

  void TearDown() override {
    if (child_) {
      child_->send("exit");
      (void)child_->wait();
    }
  }

  std::string ask(const std::string& cmd) {
    EXPECT_TRUE(child_->send(cmd));
    return child_->recv().value_or("(no reply)");
  }

  Shared share(std::size_t count, const char* access, DomId peer = kDom0) {
    std::istringstream in(
        ask("share " + std::to_string(count) + " " + access + " " + std::to_string(peer.value())));
    std::string word;
    Shared s;
    in >> word >> s.set;
    EXPECT_EQ(word, "refs");
    for (std::uint32_t r; in >> r;) s.refs.emplace_back(r);
    EXPECT_EQ(s.refs.size(), count);
    return s;
  }

  static GrantCopySegment read_seg(DomId d, GrantRef r, std::uint16_t off, std::uint16_t len,
                                   void* into) {
    return {GrantCopyPtr::granted(d, r, off), GrantCopyPtr::local(into), len, 99};
  }
  static GrantCopySegment write_seg(DomId d, GrantRef r, std::uint16_t off, std::uint16_t len,
                                    void* from) {
    return {GrantCopyPtr::local(from), GrantCopyPtr::granted(d, r, off), len, 99};
  }

  static bool matches_pattern(const std::byte* page, GrantRef ref) {
    for (std::uint32_t off = 0; off < kPageSize; ++off)
      if (std::to_integer<std::uint8_t>(page[off]) != pattern_byte(ref.value(), off)) return false;
    return true;
  }

  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<ChildProcess> child_;
  std::unique_ptr<hv::SimHypervisor> dom0_;
  DomId domu_{};
};

TEST_F(GrantBetweenProcesses, CopiesGrantedPagesBothWays) {
  const Shared rw = share(2, "rw");
  const Shared ro = share(1, "ro");
  std::vector<std::array<std::byte, kPageSize>> bufs(3);
  std::vector<GrantCopySegment> segs{read_seg(domu_, rw.refs[0], 0, kPageSize, bufs[0].data()),
                                     read_seg(domu_, rw.refs[1], 0, kPageSize, bufs[1].data()),
                                     read_seg(domu_, ro.refs[0], 0, kPageSize, bufs[2].data())};
  dom0_->grant_table().copy(segs);
  for (const auto& s : segs) EXPECT_EQ(s.status, GNTST_okay);
  EXPECT_TRUE(matches_pattern(bufs[0].data(), rw.refs[0]));
  EXPECT_TRUE(matches_pattern(bufs[1].data(), rw.refs[1]));
  EXPECT_TRUE(matches_pattern(bufs[2].data(), ro.refs[0]));

  std::array<std::byte, 50> mark;
  mark.fill(std::byte{0xAB});
  std::vector<GrantCopySegment> w{write_seg(domu_, rw.refs[0], 100, 50, mark.data())};
  dom0_->grant_table().copy(w);
  EXPECT_EQ(w[0].status, GNTST_okay);
  EXPECT_EQ(ask("byte " + std::to_string(rw.set) + " 0 100"), "byte 171");
  EXPECT_EQ(ask("byte " + std::to_string(rw.set) + " 0 149"), "byte 171");
  EXPECT_EQ(ask("byte " + std::to_string(rw.set) + " 0 150"),
            "byte " + std::to_string(pattern_byte(rw.refs[0].value(), 150)));
  // Copies leave nothing held: the granter sees its grants unused again.
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "unused");
}

TEST_F(GrantBetweenProcesses, GrantsHeldByABackendThatDiesAreReleasedAsGntdevDoes) {
  const Shared rw = share(2, "rw");
  const std::string dir = world_->dir();
  const std::uint16_t domu = domu_.value();
  const std::uint32_t mapped = rw.refs[0].value();
  // A second dom0 process maps one grant read-write and is killed holding it, as a crashed
  // unetbackd holds its rings.
  ChildProcess backend([dir, domu, mapped](int ctrl) {
    hv::HypervisorOptions o;
    o.role = hv::Role::backend;
    hv::SimHypervisor hv(dir, o);
    const GrantRef refs[] = {GrantRef{mapped}};
    auto m = hv.grant_table().map(DomId{domu}, refs, hv::Access::read_write);
    send_line(ctrl, m ? "mapped" : "failed " + m.error().message());
    (void)recv_line(ctrl, std::chrono::seconds(30));  // killed before this returns
    return 0;
  });
  ASSERT_EQ(backend.recv().value_or("(nothing)"), "mapped");
  const std::string ref = std::to_string(mapped);
  EXPECT_EQ(ask("inuse " + ref), "in_use");
  ::kill(backend.pid(), SIGKILL);
  (void)backend.wait();
  // The broker notices the closed connection: the grant is free, the other one untouched.
  std::string use;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((use = ask("inuse " + ref)) != "unused" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(use, "unused");
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[1].value())), "unused");
  // And it can be mapped again, by the next backend.
  const GrantRef again[] = {rw.refs[0]};
  auto m = dom0_->grant_table().map(domu_, again, hv::Access::read_write);
  ASSERT_TRUE(m);
  EXPECT_EQ(ask("inuse " + ref), "in_use");
}

TEST_F(GrantBetweenProcesses, EachFailedCheckHasItsXenStatus) {
  const Shared ok = share(4, "rw");
  const Shared ro = share(1, "ro");
  const Shared other = share(1, "rw", DomId{7});
  ASSERT_FALSE(dom0_->inject_corrupt_grant(domu_, ok.refs[1], kDom0, 1U << 30));
  ASSERT_FALSE(dom0_->inject_revoke_grant(domu_, ok.refs[2]));
  ASSERT_FALSE(dom0_->inject_corrupt_grant(domu_, ok.refs[3], DomId{9}, 0));
  std::array<std::byte, kPageSize> buf{};
  std::vector<GrantCopySegment> segs{
      read_seg(domu_, GrantRef{1'000'000}, 0, 8, buf.data()),  // past the table
      read_seg(domu_, GrantRef{3}, 0, 8, buf.data()),          // reserved, never granted
      read_seg(domu_, other.refs[0], 0, 8, buf.data()),        // granted to dom7
      write_seg(domu_, ro.refs[0], 0, 8, buf.data()),          // write to a read-only grant
      read_seg(domu_, ro.refs[0], 0, 8, buf.data()),           // reading it is fine
      read_seg(domu_, ok.refs[0], 4000, 200, buf.data()),      // crosses the page end
      read_seg(domu_, ok.refs[1], 0, 8, buf.data()),           // frame outside memory
      read_seg(DomId{999}, ok.refs[0], 0, 8, buf.data()),      // no such domain
      read_seg(domu_, ok.refs[2], 0, 8, buf.data()),           // revoked under our feet
      read_seg(domu_, ok.refs[3], 0, 8, buf.data()),           // rewritten for dom9
      read_seg(domu_, ok.refs[0], 4088, 8, buf.data()),        // exactly to the page end
  };
  dom0_->grant_table().copy(segs);
  const std::vector<std::int16_t> want{
      GNTST_bad_gntref,        GNTST_bad_gntref, GNTST_permission_denied,
      GNTST_permission_denied, GNTST_okay,       GNTST_bad_copy_arg,
      GNTST_bad_page,          GNTST_bad_domain, GNTST_bad_gntref,
      GNTST_permission_denied, GNTST_okay};
  ASSERT_EQ(segs.size(), want.size());
  for (std::size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(wire::grant_status_name(segs[i].status), wire::grant_status_name(want[i]))
        << "segment " << i;
  }
  const auto stats = dom0_->grant_table().copy_stats();
  EXPECT_EQ(stats.calls, 2U);  // 11 segments, batches of 8
  EXPECT_EQ(stats.segments, 11U);
  EXPECT_EQ(stats.failed, 9U);
  // A failed check leaves no GTF_reading behind (the bad frame was caught after setting it).
  EXPECT_EQ(ask("inuse " + std::to_string(ok.refs[1].value())), "unused");
}

TEST_F(GrantBetweenProcesses, MappedGrantIsInUseUntilUnmapped) {
  const Shared rw = share(2, "rw");
  const Shared ro = share(1, "ro");
  auto& gt = dom0_->grant_table();
  {
    auto m = gt.map(domu_, rw.refs, hv::Access::read_write);
    ASSERT_TRUE(m) << m.error().message();
    ASSERT_EQ(m->count(), 2U);
    EXPECT_TRUE(matches_pattern(m->page(0), rw.refs[0]));
    EXPECT_TRUE(matches_pattern(m->page(1), rw.refs[1]));
    EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "in_use");
    EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[1].value())), "in_use");
    m->page(1)[7] = std::byte{0x5A};
    EXPECT_EQ(ask("byte " + std::to_string(rw.set) + " 1 7"), "byte 90");

    auto ro_map = gt.map(domu_, ro.refs, hv::Access::read_only);
    ASSERT_TRUE(ro_map);
    EXPECT_TRUE(matches_pattern(ro_map->page(0), ro.refs[0]));
    auto rw_of_ro = gt.map(domu_, ro.refs, hv::Access::read_write);
    EXPECT_EQ(rw_of_ro.error(), std::errc::operation_not_permitted);
  }
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "unused");
  EXPECT_EQ(ask("inuse " + std::to_string(ro.refs[0].value())), "unused");
}

TEST_F(GrantBetweenProcesses, CopyDuringMappingKeepsTheGrantInUse) {
  const Shared rw = share(1, "rw");
  auto m = dom0_->grant_table().map(domu_, rw.refs, hv::Access::read_only);
  ASSERT_TRUE(m);
  std::array<std::byte, 16> buf{};
  std::vector<GrantCopySegment> segs{read_seg(domu_, rw.refs[0], 0, 16, buf.data())};
  dom0_->grant_table().copy(segs);
  EXPECT_EQ(segs[0].status, GNTST_okay);
  // The copy's own pin ended, the mapping's did not.
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "in_use");
  m->reset();
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "unused");
}

TEST_F(GrantBetweenProcesses, MapIsAllOrNothing) {
  const Shared rw = share(1, "rw");
  const std::vector<GrantRef> refs{rw.refs[0], GrantRef{3}};
  auto m = dom0_->grant_table().map(domu_, refs, hv::Access::read_only);
  EXPECT_EQ(m.error(), std::errc::invalid_argument);
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "unused");
  EXPECT_EQ(dom0_->grant_table().map(DomId{999}, rw.refs, hv::Access::read_only).error(),
            std::errc::no_such_process);
}

// Issue 15 #13: dom0 maps a domain's memory through descriptors xensim passes it. With dom0's
// fd table full they cannot arrive: the error says so (EMFILE), not "no such domain"; the
// copy fails as a general error, not GNTST_bad_domain; once descriptors are free both work.
TEST_F(GrantBetweenProcesses, FullFdTableIsTooManyOpenFilesNotAMissingDomain) {
  const Shared rw = share(1, "rw");
  auto& gt = dom0_->grant_table();
  std::array<std::byte, 16> buf{};
  {
    const LoweredFdLimit full(0);
    ASSERT_TRUE(full.ok());
    auto m = gt.map(domu_, rw.refs, hv::Access::read_only);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error(), std::errc::too_many_files_open) << m.error().message();
    std::array<GrantCopySegment, 1> seg{read_seg(domu_, rw.refs[0], 0, 16, buf.data())};
    gt.copy(seg);
    EXPECT_EQ(seg[0].status, GNTST_general_error);
  }
  auto m = gt.map(domu_, rw.refs, hv::Access::read_only);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_TRUE(matches_pattern(m->page(0), rw.refs[0]));
}

TEST_F(GrantBetweenProcesses, RevokeWhileMappedIsDeferredUntilUnmap) {
  const Shared rw = share(1, "rw");
  auto m = dom0_->grant_table().map(domu_, rw.refs, hv::Access::read_write);
  ASSERT_TRUE(m);
  EXPECT_EQ(ask("release " + std::to_string(rw.set)), "deferred 1");
  EXPECT_EQ(ask("retry"), "deferred 1");
  // Neither the gref nor the page is handed out again while we hold it.
  const Shared again = share(1, "rw");
  EXPECT_NE(again.refs[0], rw.refs[0]);
  EXPECT_TRUE(matches_pattern(m->page(0), rw.refs[0]));
  m->reset();
  EXPECT_EQ(ask("retry"), "deferred 0");
  EXPECT_EQ(ask("inuse " + std::to_string(rw.refs[0].value())), "unused");
}

TEST_F(GrantBetweenProcesses, DeadGranterIsBadDomainButMappingsStay) {
  const Shared rw = share(1, "rw");
  auto m = dom0_->grant_table().map(domu_, rw.refs, hv::Access::read_only);
  ASSERT_TRUE(m);
  std::array<std::byte, 16> buf{};
  std::vector<GrantCopySegment> segs{read_seg(domu_, rw.refs[0], 0, 16, buf.data())};
  dom0_->grant_table().copy(segs);
  ASSERT_EQ(segs[0].status, GNTST_okay);

  child_->send("exit");
  ASSERT_TRUE(child_->wait());
  child_.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (dom0_->domain_exists(domu_) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(dom0_->domain_exists(domu_));

  dom0_->grant_table().copy(segs);
  EXPECT_EQ(segs[0].status, GNTST_bad_domain);
  // As on Xen, pages mapped from a dying domain stay valid until unmapped.
  EXPECT_TRUE(matches_pattern(m->page(0), rw.refs[0]));
  m->reset();
}

}  // namespace
}  // namespace unetback::test
