// Fuzz target: the control-ring request handler (backend/vif/hash_control) and the guest-RX
// hashing it configures (backend/vif/hash).
//
// Input: byte 0 picks the vif's queue count (1..8); the next 256 bytes are what the frontend
// granted as ref 1 (a key or a mapping table; ref 2 is a zero page, every other ref fails its
// copy); then 16-byte xen_netif_ctrl_request structs, handled in order; whatever is left
// over is an Ethernet frame hashed with the final settings. Properties:
//  * every response echoes the request's id and type, with SUCCESS, NOT_SUPPORTED or
//    INVALID_PARAMETER, and data only for the two GET requests;
//  * the published settings always hold: mapping size <= 128, every entry a real queue
//    (XSA-270), flags within the four types, flags set only with Toeplitz;
//  * a rejected request publishes nothing; an ungranted ref is never read;
//  * a hashed frame's queue is below the queue count, and the hash is Toeplitz over the key.
#include <cstring>
#include <map>
#include <vector>

#include "backend/vif/hash_control.hpp"
#include "common/wire/xen_headers.hpp"
#include "fuzz/fuzz_check.hpp"

namespace {

using namespace unetback;

constexpr DomId kFrontend{9};
constexpr std::size_t kPageBytes = 256;

class Grants final : public hv::BatchingGrantTable {
 public:
  Grants() : BatchingGrantTable(64) {}
  std::vector<std::byte> ref1 = std::vector<std::byte>(4096);
  std::vector<std::byte> ref2 = std::vector<std::byte>(4096);
  std::size_t reads_of_others = 0;
  Result<hv::MappedGrants> map(DomId, std::span<const GrantRef>, hv::Access) override {
    return std::errc::not_supported;
  }
  void unmap(std::byte*, std::size_t) noexcept override {}

 protected:
  bool copy_call(std::span<hv::GrantCopySegment> segs) noexcept override {
    for (auto& s : segs) {
      FUZZ_CHECK(s.source.foreign && !s.dest.foreign);  // only ever reads the guest
      FUZZ_CHECK(s.source.domid == kFrontend);          // and only this vif's guest
      const std::vector<std::byte>* page = s.source.ref.value() == 1   ? &ref1
                                           : s.source.ref.value() == 2 ? &ref2
                                                                       : nullptr;
      if (page == nullptr) {
        ++reads_of_others;
        s.status = GNTST_bad_gntref;
        continue;
      }
      FUZZ_CHECK(s.source.offset + s.len <= 4096u);
      // The local side never crosses a page (the handler's buffers are aligned for it).
      const auto addr = reinterpret_cast<std::uintptr_t>(s.dest.virt);
      FUZZ_CHECK(addr / 4096 == (addr + s.len - 1) / 4096);
      std::memcpy(s.dest.virt, page->data() + s.source.offset, s.len);
      s.status = GNTST_okay;
    }
    return true;
  }
};

void check_settings(const vif::HashSettings& s, std::uint32_t queues) {
  FUZZ_CHECK(s.num_queues == queues);
  FUZZ_CHECK(s.mapping.size() <= vif::kHashMappingMax);
  for (std::uint32_t e : s.mapping) FUZZ_CHECK(e < queues);
  FUZZ_CHECK((s.flags & ~wire::kHashTypesAll) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint32_t queues = 1u + data[0] % 8u;
  ++data;
  --size;
  Grants grants;
  const std::size_t page = std::min(size, kPageBytes);
  std::memcpy(grants.ref1.data(), data, page);
  data += page;
  size -= page;

  auto shared = std::make_shared<vif::SharedHashSettings>();
  vif::HashControl ctl(grants, kFrontend, queues, shared);
  while (size >= sizeof(wire::CtrlRequest)) {
    wire::CtrlRequest req;
    std::memcpy(&req, data, sizeof req);
    data += sizeof req;
    size -= sizeof req;
    const auto gen = shared->generation();
    const auto rsp = ctl.handle(req);
    FUZZ_CHECK(rsp.id == req.id && rsp.type == req.type);
    FUZZ_CHECK(rsp.status == XEN_NETIF_CTRL_STATUS_SUCCESS ||
               rsp.status == XEN_NETIF_CTRL_STATUS_NOT_SUPPORTED ||
               rsp.status == XEN_NETIF_CTRL_STATUS_INVALID_PARAMETER);
    const bool get = req.type == XEN_NETIF_CTRL_TYPE_GET_HASH_FLAGS ||
                     req.type == XEN_NETIF_CTRL_TYPE_GET_HASH_MAPPING_SIZE;
    if (!get || rsp.status != XEN_NETIF_CTRL_STATUS_SUCCESS) FUZZ_CHECK(rsp.data == 0);
    if (rsp.status != XEN_NETIF_CTRL_STATUS_SUCCESS) FUZZ_CHECK(shared->generation() == gen);
    if (rsp.status == XEN_NETIF_CTRL_STATUS_SUCCESS &&
        req.type == XEN_NETIF_CTRL_TYPE_SET_HASH_FLAGS)
      FUZZ_CHECK(shared->load()->toeplitz);
    check_settings(*shared->load(), queues);
    FUZZ_CHECK(ctl.settings() == shared->load());
  }

  const auto s = shared->load();
  const std::span frame(reinterpret_cast<const std::byte*>(data), size);
  if (const auto h = vif::hash_frame(*s, frame)) {
    FUZZ_CHECK(s->active());
    FUZZ_CHECK(h->type <= _XEN_NETIF_CTRL_HASH_TYPE_IPV6_TCP);
    FUZZ_CHECK((s->flags & (1u << h->type)) != 0);
    FUZZ_CHECK(vif::hash_queue(*s, h->value) < queues);
  }
  return 0;
}
