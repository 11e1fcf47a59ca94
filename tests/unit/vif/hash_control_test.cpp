// The control-ring request handler, request by request, as a Windows frontend (win-xenvif's
// controller.c order) and a hostile one drive it: every type netback serves, every bad value
// answered INVALID_PARAMETER or NOT_SUPPORTED, and a rejected table leaves the old one intact.
#include "backend/vif/hash_control.hpp"

#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <vector>

#include "common/wire/xen_headers.hpp"

namespace unetback::vif {
namespace {

constexpr DomId kFrontend{7};

/// The frontend's grants: ref -> page. A ref not granted fails its copy (GNTST_bad_gntref);
/// a copy for another domain than the granter fails too.
class FakeGrants final : public hv::BatchingGrantTable {
 public:
  FakeGrants() : BatchingGrantTable(64) {}
  std::vector<std::byte>& grant(GrantRef r) {
    auto& p = pages_[r.value()];
    p.resize(4096);
    return p;
  }
  void revoke(GrantRef r) { pages_.erase(r.value()); }
  Result<hv::MappedGrants> map(DomId, std::span<const GrantRef>, hv::Access) override {
    return std::errc::not_supported;
  }
  void unmap(std::byte*, std::size_t) noexcept override {}
  std::size_t copies = 0;

 protected:
  bool copy_call(std::span<hv::GrantCopySegment> segs) noexcept override {
    for (auto& s : segs) {
      ++copies;
      s.status = GNTST_okay;
      if (!s.source.foreign || s.dest.foreign) {
        s.status = GNTST_general_error;  // the handler only ever reads from the guest
        continue;
      }
      const auto it = pages_.find(s.source.ref.value());
      if (it == pages_.end() || s.source.domid != kFrontend) {
        s.status = GNTST_bad_gntref;
        continue;
      }
      if (s.source.offset + s.len > 4096u) {
        s.status = GNTST_bad_copy_arg;
        continue;
      }
      std::memcpy(s.dest.virt, it->second.data() + s.source.offset, s.len);
    }
    return true;
  }

 private:
  std::map<std::uint32_t, std::vector<std::byte>> pages_;
};

wire::CtrlRequest req(wire::CtrlType type, std::uint32_t d0 = 0, std::uint32_t d1 = 0,
                      std::uint32_t d2 = 0, std::uint16_t id = 1) {
  wire::CtrlRequest r{};
  r.id = id;
  r.type = static_cast<std::uint16_t>(type);
  r.data[0] = d0;
  r.data[1] = d1;
  r.data[2] = d2;
  return r;
}

constexpr auto kSuccess = static_cast<std::uint32_t>(wire::CtrlStatus::success);
constexpr auto kNotSupported = static_cast<std::uint32_t>(wire::CtrlStatus::not_supported);
constexpr auto kInvalid = static_cast<std::uint32_t>(wire::CtrlStatus::invalid_parameter);
constexpr auto kToeplitz = static_cast<std::uint32_t>(wire::HashAlgorithm::toeplitz);

class HashControlTest : public ::testing::Test {
 protected:
  std::uint32_t status(const wire::CtrlRequest& r) { return ctl.handle(r).status; }
  void put_mapping(GrantRef ref, const std::vector<std::uint32_t>& entries) {
    std::memcpy(grants.grant(ref).data(), entries.data(), entries.size() * 4);
  }

  FakeGrants grants;
  std::shared_ptr<SharedHashSettings> shared = std::make_shared<SharedHashSettings>();
  HashControl ctl{grants, kFrontend, 4, shared};
};

TEST_F(HashControlTest, WindowsSequenceSetsAlgorithmMappingKeyAndFlags) {
  // win-xenvif: algorithm, mapping size, mapping, a 40-byte key, flags; one at a time.
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_algorithm, kToeplitz)), kSuccess);
  const auto size = ctl.handle(req(wire::CtrlType::get_hash_mapping_size));
  EXPECT_EQ(size.status, kSuccess);
  EXPECT_EQ(size.data, 128u);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 8)), kSuccess);
  put_mapping(GrantRef{10}, {0, 1, 2, 3, 3, 2, 1, 0});
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping, 10, 8, 0)), kSuccess);
  std::vector<std::uint8_t> key(40);
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(i + 1);
  std::memcpy(grants.grant(GrantRef{11}).data(), key.data(), key.size());
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_key, 11, 40)), kSuccess);
  const auto flags = ctl.handle(req(wire::CtrlType::get_hash_flags));
  EXPECT_EQ(flags.status, kSuccess);
  EXPECT_EQ(flags.data, wire::kHashTypesAll);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_flags, wire::kHashTypesAll)), kSuccess);

  const auto s = shared->load();
  EXPECT_TRUE(s->toeplitz);
  EXPECT_TRUE(s->active());
  EXPECT_EQ(s->flags, wire::kHashTypesAll);
  EXPECT_EQ(s->mapping, (std::vector<std::uint32_t>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_TRUE(std::equal(key.begin(), key.end(), s->key.begin()));
  EXPECT_EQ(s->num_queues, 4u);
}

TEST_F(HashControlTest, ResponseEchoesIdAndType) {
  const auto r = ctl.handle(req(wire::CtrlType::get_hash_mapping_size, 0, 0, 0, 0xbeef));
  EXPECT_EQ(r.id, 0xbeef);
  EXPECT_EQ(r.type, XEN_NETIF_CTRL_TYPE_GET_HASH_MAPPING_SIZE);
}

TEST_F(HashControlTest, FlagsNeedAnAlgorithmAndOnlyTheFourTypes) {
  EXPECT_EQ(status(req(wire::CtrlType::get_hash_flags)), kNotSupported);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_flags, wire::kHashTypeIpv4)), kNotSupported);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_algorithm, kToeplitz)), kSuccess);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_flags, 1u << 4)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_flags, 0xffffffffu)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_flags, wire::kHashTypeIpv6Tcp)), kSuccess);
  EXPECT_EQ(shared->load()->flags, wire::kHashTypeIpv6Tcp);
  // Back to none: hashing is off whatever the flags.
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_algorithm, 0)), kSuccess);
  EXPECT_FALSE(shared->load()->active());
}

TEST_F(HashControlTest, UnknownAlgorithmIsInvalid) {
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_algorithm, 2)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_algorithm, 0xffffffffu)), kInvalid);
  EXPECT_FALSE(shared->load()->toeplitz);
}

TEST_F(HashControlTest, KeyOverFortyBytesIsInvalidAndCopiesNothing) {
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_key, 11, 41)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_key, 11, 4096)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_key, 11, 0xffffffffu)), kInvalid);
  EXPECT_EQ(grants.copies, 0u);
}

TEST_F(HashControlTest, ShortKeyIsZeroPaddedAndZeroLengthClearsIt) {
  auto& page = grants.grant(GrantRef{3});
  std::memset(page.data(), 0xab, 64);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_key, 3, 40)), kSuccess);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_key, 3, 5)), kSuccess);
  const auto s = shared->load();
  for (std::size_t i = 0; i < 40; ++i) EXPECT_EQ(s->key[i], i < 5 ? 0xab : 0) << i;
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_key, 0xdead, 0)), kSuccess) << "no copy at all";
  for (auto b : shared->load()->key) EXPECT_EQ(b, 0);
}

TEST_F(HashControlTest, KeyFromAnUngrantedRefIsInvalidAndKeepsTheOldKey) {
  std::memset(grants.grant(GrantRef{3}).data(), 0x5a, 40);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_key, 3, 40)), kSuccess);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_key, 99, 40)), kInvalid);
  EXPECT_EQ(shared->load()->key[39], 0x5a);
}

TEST_F(HashControlTest, MappingSizeAbove128IncludingTwoToThe32IsInvalid) {
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 129)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 0xffffffffu)), kInvalid);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 128)), kSuccess);
  EXPECT_EQ(shared->load()->mapping.size(), 128u);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 0)), kSuccess);
  EXPECT_TRUE(shared->load()->mapping.empty());
}

TEST_F(HashControlTest, NewMappingSizeZeroesTheTable) {
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 4)), kSuccess);
  put_mapping(GrantRef{1}, {3, 3, 3, 3});
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 4, 0)), kSuccess);
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 4)), kSuccess);
  EXPECT_EQ(shared->load()->mapping, (std::vector<std::uint32_t>{0, 0, 0, 0}));
}

TEST_F(HashControlTest, SubTableAtAnOffsetLeavesTheRestAlone) {
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 6)), kSuccess);
  put_mapping(GrantRef{1}, {1, 1, 1, 1, 1, 1});
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 6, 0)), kSuccess);
  put_mapping(GrantRef{2}, {3, 2});
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping, 2, 2, 4)), kSuccess);
  EXPECT_EQ(shared->load()->mapping, (std::vector<std::uint32_t>{1, 1, 1, 1, 3, 2}));
}

TEST_F(HashControlTest, Xsa270OffsetAndLengthOutsideTheTableAreInvalid) {
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 8)), kSuccess);
  put_mapping(GrantRef{1}, std::vector<std::uint32_t>(8, 1));
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 8, 0)), kSuccess);
  const std::uint64_t copies = grants.copies;
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 9, 0)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 1, 8)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 4, 5)), kInvalid);
  // off + len wraps to a small number in 32 bits.
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 0xffffffffu, 2)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 2, 0xffffffffu)), kInvalid);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 1024, 0)), kInvalid);
  EXPECT_EQ(grants.copies, copies) << "nothing copied for a rejected range";
  EXPECT_EQ(shared->load()->mapping, std::vector<std::uint32_t>(8, 1));
}

TEST_F(HashControlTest, EntryNamingAQueueThatDoesNotExistRejectsTheWholeTable) {
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 4)), kSuccess);
  put_mapping(GrantRef{1}, {2, 2, 2, 2});
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 4, 0)), kSuccess);
  put_mapping(GrantRef{2}, {0, 1, 4, 0});  // 4 queues: 0..3
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 2, 4, 0)), kInvalid);
  put_mapping(GrantRef{2}, {0, 0xffffffffu, 0, 0});
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 2, 4, 0)), kInvalid);
  EXPECT_EQ(shared->load()->mapping, (std::vector<std::uint32_t>{2, 2, 2, 2}));
}

TEST_F(HashControlTest, MappingFromAnUngrantedOrRevokedRefIsInvalid) {
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 4)), kSuccess);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 77, 4, 0)), kInvalid);
  put_mapping(GrantRef{1}, {1, 1, 1, 1});
  grants.revoke(GrantRef{1});
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 4, 0)), kInvalid);
  EXPECT_EQ(shared->load()->mapping, (std::vector<std::uint32_t>{0, 0, 0, 0}));
}

TEST_F(HashControlTest, EmptyMappingWithoutASizeIsAcceptedAndCopiesNothing) {
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 0, 0)), kSuccess);
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping, 1, 1, 0)), kInvalid);
  EXPECT_EQ(grants.copies, 0u);
}

TEST_F(HashControlTest, StagingGrantOpsTypeZeroAndUnknownTypesAreNotSupported) {
  for (std::uint16_t t : {0, 8, 9, 10, 11, 0xffff}) {
    wire::CtrlRequest r = req(wire::CtrlType::invalid, 1, 2, 3);
    r.type = t;
    EXPECT_EQ(ctl.handle(r).status, kNotSupported) << t;
  }
}

TEST_F(HashControlTest, EveryRequestPublishesAConsistentSnapshot) {
  const auto before = shared->generation();
  const auto old = shared->load();
  ASSERT_EQ(status(req(wire::CtrlType::set_hash_algorithm, kToeplitz)), kSuccess);
  EXPECT_GT(shared->generation(), before);
  EXPECT_FALSE(old->toeplitz) << "a snapshot already taken never changes";
  const auto gen = shared->generation();
  EXPECT_EQ(status(req(wire::CtrlType::set_hash_mapping_size, 500)), kInvalid);
  EXPECT_EQ(shared->generation(), gen) << "a rejected request publishes nothing";
}

}  // namespace
}  // namespace unetback::vif
