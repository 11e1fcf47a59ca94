// Protocol types: the typed views agree with netif.h / grant_table.h / xs_wire.h.
#include <cerrno>
#include <gtest/gtest.h>
#include <sstream>

#include "common/util/strong_id.hpp"
#include "common/wire/grant.hpp"
#include "common/wire/netif.hpp"
#include "common/wire/xs_wire.hpp"

using namespace unetback;
using namespace unetback::wire;

TEST(Wire, TxAndRxFlagBitsZeroAndOneAreSwapped) {
  EXPECT_EQ(static_cast<unsigned>(TxFlag::csum_blank), 1u);
  EXPECT_EQ(static_cast<unsigned>(TxFlag::data_validated), 2u);
  EXPECT_EQ(static_cast<unsigned>(RxFlag::data_validated), 1u);
  EXPECT_EQ(static_cast<unsigned>(RxFlag::csum_blank), 2u);
  EXPECT_EQ(static_cast<unsigned>(TxFlag::more_data), static_cast<unsigned>(RxFlag::more_data));
  EXPECT_EQ(static_cast<unsigned>(TxFlag::extra_info), static_cast<unsigned>(RxFlag::extra_info));
}

TEST(Wire, TypedFlagsReadTheRawRequestField) {
  TxRequest req{};
  req.flags = NETTXF_more_data | NETTXF_csum_blank;
  const TxFlags f = tx_flags(req);
  EXPECT_TRUE(f.has(TxFlag::more_data));
  EXPECT_TRUE(f.has(TxFlag::csum_blank));
  EXPECT_FALSE(f.has(TxFlag::data_validated));
  EXPECT_FALSE(f.has(TxFlag::extra_info));
  EXPECT_EQ((TxFlag::more_data | TxFlag::csum_blank).raw(), req.flags);
  EXPECT_EQ(f.without(TxFlag::more_data).raw(), NETTXF_csum_blank);
}

TEST(Wire, ExtraInfoOverlaysTxRequestAndRxResponse) {
  ExtraInfo e{};
  e.type = static_cast<std::uint8_t>(ExtraType::gso);
  e.flags = 0;
  e.u.gso.size = 1448;
  e.u.gso.type = static_cast<std::uint8_t>(GsoType::tcpv4);
  // A frontend places the extra in the next TX request slot, a backend in the next RX
  // response slot: both must hold it without truncation.
  union {
    TxRequest tx;
    RxResponse rx;
    ExtraInfo extra;
  } slot{};
  slot.extra = e;
  EXPECT_EQ(slot.extra.u.gso.size, 1448);
  EXPECT_EQ(sizeof(ExtraInfo), 8u);
}

TEST(Wire, StatusValuesMatchTheHeader) {
  EXPECT_EQ(static_cast<int>(RspStatus::dropped), -2);
  EXPECT_EQ(static_cast<int>(RspStatus::error), -1);
  EXPECT_EQ(static_cast<int>(RspStatus::okay), 0);
  EXPECT_EQ(static_cast<int>(RspStatus::null), 1);
  EXPECT_EQ(kNrSlotsMin, 18u);
  EXPECT_EQ(kMaxTxSize, 0xFFFFu);
}

TEST(Wire, GrantStatusNamesCoverEveryGnttabStatus) {
  EXPECT_EQ(grant_status_name(GNTST_okay), "GNTST_okay");
  EXPECT_EQ(grant_status_name(GNTST_bad_gntref), "GNTST_bad_gntref");
  EXPECT_EQ(grant_status_name(GNTST_permission_denied), "GNTST_permission_denied");
  EXPECT_EQ(grant_status_name(GNTST_bad_copy_arg), "GNTST_bad_copy_arg");
  EXPECT_EQ(grant_status_name(GNTST_no_space), "GNTST_no_space");
  EXPECT_EQ(grant_status_name(-14), "GNTST_unknown");
  EXPECT_EQ(grant_status_name(3), "GNTST_unknown");
}

TEST(Wire, XenstoreErrorNamesRoundTrip) {
  for (int e : {EINVAL, EACCES, EEXIST, EISDIR, ENOENT, ENOMEM, ENOSPC, EIO, ENOTEMPTY, ENOSYS,
                EROFS, EBUSY, EAGAIN, EISCONN, E2BIG, EPERM}) {
    auto back = xs_error_from_name(xs_error_name(e));
    ASSERT_TRUE(back.has_value()) << e;
    EXPECT_EQ(*back, e);
  }
  EXPECT_EQ(xs_error_name(ENOENT), "ENOENT");
  EXPECT_EQ(xs_error_name(ETIMEDOUT), "EINVAL");  // unknown errno goes out as EINVAL
  EXPECT_FALSE(xs_error_from_name("EWHATEVER").has_value());
}

TEST(Wire, XenstoreTypeNames) {
  EXPECT_EQ(xs_type_name(XS_READ), "READ");
  EXPECT_EQ(xs_type_name(XS_DIRECTORY_PART), "DIRECTORY_PART");
  EXPECT_EQ(xs_type_name(XS_RESET_WATCHES), "RESET_WATCHES");
  EXPECT_EQ(xs_type_name(1000), "?");
  EXPECT_EQ(kXsPayloadMax, 4096u);
}

TEST(StrongIds, PrintAsNumbersAndCompare) {
  std::ostringstream os;
  os << DomId{7} << ' ' << GrantRef{42} << ' ' << Port{3};
  EXPECT_EQ(os.str(), "7 42 3");
  EXPECT_LT(DomId{1}, DomId{2});
  EXPECT_EQ(GrantRef{5}, GrantRef{5});
}

TEST(RingIdx, DistanceIsModular) {
  const RingIdx old{0xFFFFFFF0u};
  const RingIdx now = old + 0x20;
  EXPECT_EQ(now.value(), 0x10u);
  EXPECT_EQ(now.since(old), 0x20u);
  EXPECT_EQ(old.since(now), 0xFFFFFFE0u);
}
