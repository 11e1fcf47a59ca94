// A v1 grant entry as xensim touches it in shared memory: the 32-bit word {flags, domid}
// and the frame, each accessed atomically.
//
// Xen updates flags and domid together with one 32-bit cmpxchg (the "scombo" of
// grant_table.c) so that checking "granted to me" and setting GTF_reading/GTF_writing is
// one atomic step against a guest that revokes concurrently. The granter (SimGrantSharer)
// and the mapper (SimGrantTable) both use this word, never the 16-bit fields, so the two
// sides agree on one atomic object.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "common/wire/grant.hpp"

namespace unetback::hv::sim {

struct SharedGrantEntry {
  std::uint32_t flags_domid;  // flags in bits 0..15, domid in bits 16..31 (little-endian)
  std::uint32_t frame;
};
static_assert(sizeof(SharedGrantEntry) == sizeof(wire::GrantEntryV1));
static_assert(offsetof(SharedGrantEntry, frame) == offsetof(wire::GrantEntryV1, frame));
static_assert(std::endian::native == std::endian::little,
              "flags_domid packs grant_entry_v1 {flags, domid} as a little-endian word");

inline constexpr std::uint32_t kGrantEntriesPerFrame = 4096 / sizeof(SharedGrantEntry);

[[nodiscard]] constexpr std::uint16_t entry_flags(std::uint32_t word) {
  return static_cast<std::uint16_t>(word & 0xffffU);
}
[[nodiscard]] constexpr std::uint16_t entry_domid(std::uint32_t word) {
  return static_cast<std::uint16_t>(word >> 16);
}
[[nodiscard]] constexpr std::uint32_t entry_word(std::uint16_t flags, std::uint16_t domid) {
  return static_cast<std::uint32_t>(flags) | (static_cast<std::uint32_t>(domid) << 16);
}

[[nodiscard]] inline std::atomic_ref<std::uint32_t> word_of(SharedGrantEntry& e) {
  return std::atomic_ref<std::uint32_t>(e.flags_domid);
}
[[nodiscard]] inline std::atomic_ref<std::uint32_t> frame_of(SharedGrantEntry& e) {
  return std::atomic_ref<std::uint32_t>(e.frame);
}

}  // namespace unetback::hv::sim
