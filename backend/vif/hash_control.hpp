// HashControl: the control-ring request handler (netback's hash.c + interface.c's
// xenvif_ctrl_action in Linux netback). Pure apart from the grant copies it does through
// the injected GrantTable: one request in, one response out, never throws.
//
// Served, as Linux netback serves them:
//   SET_HASH_ALGORITHM    none or Toeplitz (else INVALID_PARAMETER)
//   GET_HASH_FLAGS        the four types we compute (NOT_SUPPORTED without an algorithm)
//   SET_HASH_FLAGS        a subset of them (INVALID_PARAMETER past it; NOT_SUPPORTED
//                         without an algorithm)
//   SET_HASH_KEY          <= 40 bytes grant-copied from offset 0 of data[0]; the rest zero
//   GET_HASH_MAPPING_SIZE 128
//   SET_HASH_MAPPING_SIZE <= 128; the table is zeroed
//   SET_HASH_MAPPING      data[1] entries grant-copied from offset 0 of data[0] to entry
//                         data[2]: off + len must not wrap and must fit the size, every
//                         entry must name a queue; checked in a shadow copy that replaces the
//                         table only when it is all valid (XSA-270)
// Everything else (the staging-grant ops 8-10, type 0, unknown types): NOT_SUPPORTED.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "backend/vif/hash.hpp"
#include "common/hv/grant_table.hpp"
#include "common/util/strong_id.hpp"
#include "common/wire/netif.hpp"

namespace unetback::vif {

class HashControl {
 public:
  /// `publish` (may be null) receives every new snapshot; `num_queues` bounds mapping entries.
  HashControl(hv::GrantTable& table, DomId frontend, std::uint32_t num_queues,
              std::shared_ptr<SharedHashSettings> publish = nullptr);

  [[nodiscard]] wire::CtrlResponse handle(const wire::CtrlRequest& req);

  /// The settings as the last request left them.
  [[nodiscard]] const std::shared_ptr<const HashSettings>& settings() const { return current_; }

 private:
  wire::CtrlStatus set_algorithm(std::uint32_t alg);
  wire::CtrlStatus get_flags(std::uint32_t& out) const;
  wire::CtrlStatus set_flags(std::uint32_t flags);
  wire::CtrlStatus set_key(GrantRef gref, std::uint32_t len);
  wire::CtrlStatus set_mapping_size(std::uint32_t size);
  wire::CtrlStatus set_mapping(GrantRef gref, std::uint32_t len, std::uint32_t off);
  /// Replaces the snapshot and hands it to the data paths.
  void commit(HashSettings next);

  hv::GrantTable& table_;
  DomId frontend_;
  std::shared_ptr<SharedHashSettings> publish_;
  std::shared_ptr<const HashSettings> current_;
  // Grant-copy targets: aligned to their size, so a copy never crosses a local page.
  alignas(64) std::array<std::uint8_t, 64> key_buf_{};
  alignas(512) std::array<std::uint32_t, kHashMappingMax> mapping_buf_{};
};

}  // namespace unetback::vif
