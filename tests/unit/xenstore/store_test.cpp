// Node-tree semantics (docs/misc/xenstore.txt; Xen's xenstored_core.c), driven through the
// wire protocol as a client sees them.
#include <gtest/gtest.h>

#include "tests/unit/xenstore/core_harness.hpp"

using namespace unetback;
using namespace unetback::xensim;
using namespace unetback::xensim::test;

namespace {

constexpr DomId kDom2{2};

class Xenstore : public ::testing::Test {
 protected:
  void SetUp() override {
    h.core.create_domain_nodes(kDom1, "guest1");
    h.core.domain_introduced(kDom1);
    h.core.create_domain_nodes(kDom2, "guest2");
    h.core.domain_introduced(kDom2);
    d0 = h.connect(kDom0);
    d1 = h.connect(kDom1);
    d2 = h.connect(kDom2);
  }
  CoreHarness h;      // NOLINT(readability-identifier-naming): shorthand
  ConnId d0, d1, d2;  // NOLINT(readability-identifier-naming): shorthand
};

TEST_F(Xenstore, ReplyEchoesTypeReqIdAndTxId) {
  auto a = h.write(d0, "/a", "1");
  EXPECT_EQ(a.type, static_cast<std::uint32_t>(XsType::write));
  EXPECT_EQ(a.payload, z("OK"));
  const auto tx = h.tx_start(d0);
  auto r = h.read(d0, "/a", tx);
  EXPECT_EQ(r.type, static_cast<std::uint32_t>(XsType::read));
  EXPECT_EQ(r.tx_id, tx);
  EXPECT_EQ(r.req_id, h.replies[d0].front().req_id);
  auto e = h.read(d0, "/missing", tx);
  EXPECT_EQ(e.type, static_cast<std::uint32_t>(XsType::error));
  EXPECT_EQ(e.tx_id, tx);
}

TEST_F(Xenstore, WriteCreatesMissingParentsWithEmptyValues) {
  EXPECT_FALSE(h.write(d0, "/x/y/z", "v").is_error());
  EXPECT_EQ(h.read(d0, "/x/y/z").payload, "v");
  EXPECT_EQ(h.read(d0, "/x/y").payload, "");
  EXPECT_EQ(h.dir(d0, "/x").payload, z("y"));
}

TEST_F(Xenstore, ReadReturnsRawValueWithoutNul) {
  h.write(d0, "/bin", std::string("a\0b", 3));
  EXPECT_EQ(h.read(d0, "/bin").payload, std::string("a\0b", 3));
}

TEST_F(Xenstore, ReadOfMissingNodeIsEnoent) {
  EXPECT_EQ(h.read(d0, "/nope").error(), "ENOENT");
  EXPECT_EQ(h.read(d0, "/nope").payload, z("ENOENT"));
}

TEST_F(Xenstore, DirectoryListsChildrenInCreationOrder) {
  h.write(d0, "/d/b", "");
  h.write(d0, "/d/a", "");
  h.write(d0, "/d/c", "");
  EXPECT_EQ(h.dir(d0, "/d").payload, z("b") + z("a") + z("c"));
  EXPECT_EQ(h.dir(d0, "/d/a").payload, "");
}

TEST_F(Xenstore, RmIsRecursiveAndFineForMissingNodeWithParent) {
  h.write(d0, "/r/a/b", "1");
  h.write(d0, "/r/c", "2");
  EXPECT_FALSE(h.rm(d0, "/r/a").is_error());
  EXPECT_EQ(h.read(d0, "/r/a/b").error(), "ENOENT");
  EXPECT_EQ(h.dir(d0, "/r").payload, z("c"));
  EXPECT_FALSE(h.rm(d0, "/r/a").is_error()) << "missing node, existing parent";
  EXPECT_EQ(h.rm(d0, "/r/a/b").error(), "ENOENT") << "parent missing too";
  EXPECT_EQ(h.rm(d0, "/").error(), "EINVAL");
}

TEST_F(Xenstore, MkdirKeepsExistingValue) {
  h.write(d0, "/m", "keep");
  EXPECT_FALSE(h.mkdir(d0, "/m").is_error());
  EXPECT_EQ(h.read(d0, "/m").payload, "keep");
  EXPECT_FALSE(h.mkdir(d0, "/m/n/o").is_error());
  EXPECT_EQ(h.read(d0, "/m/n/o").payload, "");
}

TEST_F(Xenstore, InvalidPathsAreEinval) {
  for (std::string p : {"/a//b", "/a/", "/a b", "/a\xff", "", "/ä"})
    EXPECT_EQ(h.read(d0, p).error(), "EINVAL") << p;
  EXPECT_EQ(h.read(d0, "@releaseDomain").error(), "EINVAL");
}

TEST_F(Xenstore, PathLengthLimitIsRelPathMaxBelowDomainHome) {
  const std::string ok = "/local/domain/1/" + std::string(wire::kXsRelPathMax, 'a');
  EXPECT_FALSE(h.write(d0, ok, "v").is_error());
  EXPECT_EQ(h.write(d0, ok + "b", "v").error(), "EINVAL");
  EXPECT_EQ(h.write(d0, "/" + std::string(wire::kXsRelPathMax + 1, 'a'), "v").error(), "EINVAL");
}

TEST_F(Xenstore, RelativePathsAreUnderTheCallersDomainPath) {
  EXPECT_FALSE(h.write(d1, "data/k", "v").is_error());
  EXPECT_EQ(h.read(d0, "/local/domain/1/data/k").payload, "v");
  EXPECT_EQ(h.read(d1, "name").payload, "guest1");
  EXPECT_EQ(h.read(d0, "name").payload, "Domain-0");
}

TEST_F(Xenstore, GetDomainPath) {
  EXPECT_EQ(h.request(d1, XsType::get_domain_path, z("7")).payload, z("/local/domain/7"));
  EXPECT_EQ(h.request(d1, XsType::get_domain_path, z("x7")).error(), "EINVAL");
}

TEST_F(Xenstore, IntroducedDomainHasLibxlNodesAndPermissions) {
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1").payload, z("n0") + z("r1"));
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1/device").payload, z("n0") + z("r1"));
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1/data").payload, z("n1"));
  EXPECT_EQ(h.read(d0, "/local/domain/1/domid").payload, "1");
  EXPECT_EQ(h.read(d0, "/local/domain/0/name").payload, "Domain-0");
}

TEST_F(Xenstore, DomUReadOfUnreadableNodeIsEacces) {
  h.write(d0, "/secret", "x");
  EXPECT_EQ(h.read(d1, "/secret").error(), "EACCES");
  EXPECT_EQ(h.read(d1, "/local/domain/2/name").error(), "EACCES");
  // Missing node under an unreadable parent: EACCES too, not to leak existence.
  EXPECT_EQ(h.read(d1, "/secret/missing").error(), "EACCES");
  // Missing node under a readable parent: ENOENT.
  EXPECT_EQ(h.read(d1, "/local/domain/1/missing").error(), "ENOENT");
}

TEST_F(Xenstore, DomUCannotWriteReadOnlyNodes) {
  EXPECT_EQ(h.write(d1, "/local/domain/1/device/vif/0/state", "4").error(), "EACCES");
  EXPECT_EQ(h.write(d1, "/local/domain/1/name", "evil").error(), "EACCES");
  EXPECT_EQ(h.write(d1, "/local/domain/2/data/x", "1").error(), "EACCES");
  EXPECT_EQ(h.rm(d1, "/local/domain/1/name").error(), "EACCES");
  EXPECT_EQ(h.read(d0, "/local/domain/1/name").payload, "guest1");
}

TEST_F(Xenstore, AclEntryGrantsWriteToListedDomain) {
  h.write(d0, "/local/domain/1/device/vif/0/state", "1");
  h.set_perms(d0, "/local/domain/1/device/vif/0", {"n0", "b1"});
  h.set_perms(d0, "/local/domain/1/device/vif/0/state", {"n0", "b1"});
  EXPECT_FALSE(h.write(d1, "/local/domain/1/device/vif/0/state", "4").is_error());
  // Owner stays dom0: the domain had write access, not ownership of the existing node.
  EXPECT_EQ(h.get_perms(d1, "/local/domain/1/device/vif/0/state").payload, z("n0") + z("b1"));
  // A node the domain creates there is its own.
  EXPECT_FALSE(h.write(d1, "/local/domain/1/device/vif/0/tx-ring-ref", "8").is_error());
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1/device/vif/0/tx-ring-ref").payload, z("n1") + z("b1"));
}

TEST_F(Xenstore, NodeCreatedByDomUIsOwnedByItIncludingImplicitParents) {
  EXPECT_FALSE(h.write(d1, "/local/domain/1/data/p/q", "v").is_error());
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1/data/p").payload, z("n1"));
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1/data/p/q").payload, z("n1"));
}

TEST_F(Xenstore, NodeCreatedByDom0InheritsParentPermissions) {
  h.write(d0, "/local/domain/1/device/vif/0/mac", "00:16:3e:00:00:01");
  EXPECT_EQ(h.get_perms(d0, "/local/domain/1/device/vif/0/mac").payload, z("n0") + z("r1"));
  EXPECT_EQ(h.read(d1, "/local/domain/1/device/vif/0/mac").payload, "00:16:3e:00:00:01");
}

TEST_F(Xenstore, OwnerMaySetPermsButNotGiveTheNodeAway) {
  h.write(d1, "data/mine", "1");
  EXPECT_FALSE(h.set_perms(d1, "data/mine", {"n1", "r2"}).is_error());
  EXPECT_EQ(h.read(d2, "/local/domain/1/data/mine").payload, "1");
  EXPECT_EQ(h.set_perms(d1, "data/mine", {"n2"}).error(), "EPERM");
  EXPECT_EQ(h.write(d2, "/local/domain/1/data/mine", "x").error(), "EACCES");
}

TEST_F(Xenstore, NonOwnerWithWriteAccessCannotSetPerms) {
  h.write(d0, "/shared", "");
  h.set_perms(d0, "/shared", {"n0", "b1"});
  EXPECT_EQ(h.set_perms(d1, "/shared", {"n0", "b1", "b2"}).error(), "EACCES");
  EXPECT_FALSE(h.set_perms(d0, "/shared", {"n2"}).is_error()) << "dom0 may change the owner";
  EXPECT_EQ(h.get_perms(d0, "/shared").payload, z("n2"));
}

TEST_F(Xenstore, SetPermsRejectsMalformedPermissionStrings) {
  h.write(d0, "/p", "");
  EXPECT_EQ(h.set_perms(d0, "/p", {"x0"}).error(), "EINVAL");
  EXPECT_EQ(h.set_perms(d0, "/p", {"r"}).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::set_perms, z("/p")).error(), "EINVAL");
}

TEST_F(Xenstore, TransactionSeesItsOwnWritesAndIsIsolated) {
  h.write(d0, "/t", "old");
  const auto tx = h.tx_start(d0);
  ASSERT_NE(tx, 0u);
  h.write(d0, "/t", "new", tx);
  EXPECT_EQ(h.read(d0, "/t", tx).payload, "new");
  EXPECT_EQ(h.read(d0, "/t").payload, "old");
  EXPECT_FALSE(h.tx_end(d0, tx, true).is_error());
  EXPECT_EQ(h.read(d0, "/t").payload, "new");
}

TEST_F(Xenstore, AbortDiscardsTransactionChanges) {
  const auto tx = h.tx_start(d0);
  h.write(d0, "/ab/c", "1", tx);
  EXPECT_FALSE(h.tx_end(d0, tx, false).is_error());
  EXPECT_EQ(h.read(d0, "/ab").error(), "ENOENT");
  EXPECT_EQ(h.read(d0, "/x", tx).error(), "ENOENT") << "the id is gone";
}

TEST_F(Xenstore, ConflictingCommitFailsWithEagain) {
  h.write(d0, "/c", "0");
  const auto tx = h.tx_start(d0);
  EXPECT_EQ(h.read(d0, "/c", tx).payload, "0");
  h.write(d0, "/c", "other");
  h.write(d0, "/c2", "1", tx);
  EXPECT_EQ(h.tx_end(d0, tx, true).error(), "EAGAIN");
  EXPECT_EQ(h.read(d0, "/c2").error(), "ENOENT");
}

TEST_F(Xenstore, UnrelatedChangeDoesNotConflict) {
  h.write(d0, "/u", "");
  h.write(d0, "/e", "");
  const auto tx = h.tx_start(d0);
  h.write(d0, "/u/a", "1", tx);
  h.write(d0, "/e/x", "x");
  EXPECT_FALSE(h.tx_end(d0, tx, true).is_error());
  EXPECT_EQ(h.read(d0, "/u/a").payload, "1");
}

TEST_F(Xenstore, CreatingASiblingConflictsBecauseTheParentChanged) {
  // As in Xen: adding a child rewrites the parent's child list, a node the transaction
  // also modified.
  const auto tx = h.tx_start(d0);
  h.write(d0, "/s/a", "1", tx);
  h.write(d0, "/s2", "x");
  EXPECT_EQ(h.tx_end(d0, tx, true).error(), "EAGAIN");
}

TEST_F(Xenstore, TransactionIdsBelongToTheirConnection) {
  const auto tx = h.tx_start(d0);
  auto other = h.connect(kDom0);
  EXPECT_EQ(h.read(other, "/", tx).error(), "ENOENT");
  EXPECT_EQ(h.tx_end(other, tx, true).error(), "ENOENT");
  EXPECT_EQ(h.request(d0, XsType::transaction_start, z(""), tx).error(), "EBUSY");
  EXPECT_EQ(h.request(d0, XsType::transaction_end, z("X"), tx).error(), "EINVAL");
  EXPECT_EQ(h.tx_end(d0, 0, true).error(), "ENOENT");
  EXPECT_EQ(h.read(d0, "/", 0xDEAD).error(), "ENOENT");
}

TEST_F(Xenstore, TransactionStartReturnsDecimalIdWithNul) {
  auto a = h.request(d0, XsType::transaction_start, z(""));
  ASSERT_FALSE(a.is_error());
  ASSERT_FALSE(a.payload.empty());
  EXPECT_EQ(a.payload.back(), '\0');
  EXPECT_GT(std::stoul(a.payload), 0u);
}

TEST_F(Xenstore, DisconnectDropsOpenTransactions) {
  auto c = h.connect(kDom1);
  ASSERT_NE(h.tx_start(c), 0u);
  EXPECT_EQ(h.core.store().transactions_of(kDom1), 1u);
  h.core.disconnect(c);
  EXPECT_EQ(h.core.store().transactions_of(kDom1), 0u);
}

}  // namespace
