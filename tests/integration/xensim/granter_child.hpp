// A scripted granting domU for multi-process grant tests. The child registers a fresh domain
// in the world, then obeys one-line commands on its control socket:
//
//   share <count> <ro|rw> <peer>  -> "refs <set> <ref>..." (pages filled with pattern_byte)
//   inuse <ref>                   -> "in_use" | "unused"
//   release <set>                 -> "deferred <n>"   (drops that SharedPages: revokes)
//   retry                         -> "deferred <n>"   (retries deferred revokes)
//   byte <set> <index> <offset>   -> "byte <value>"  (reads its own page)
//   exit                          -> exits 0
//
// It first sends "domid <id>".
#pragma once

#include <cstdint>
#include <string>

namespace unetback::test {

/// The byte a granter writes at `offset` of the page granted as `ref`.
[[nodiscard]] constexpr std::uint8_t pattern_byte(std::uint32_t ref, std::uint32_t offset) {
  return static_cast<std::uint8_t>(ref * 7U + offset * 13U + 1U);
}

/// The child's main: runs the command loop above.
int granter_main(int ctrl, const std::string& world_dir, const std::string& name);

}  // namespace unetback::test
