// Reading xenstore keys strictly: Result<T, KeyError> (a value, or which key was wrong and why),
// KeyReader (how a directory is read) and the scalar parsers both config parsers share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/util/result.hpp"

namespace unetback::xenbus {

/// Which key was refused and why; `error` is the positive errno written to the error node
/// (EINVAL for a malformed value, ENOENT for a missing one, EOPNOTSUPP for a refused feature).
struct KeyError {
  std::string key;  // relative to the directory that was read
  std::string reason;
  int error = 0;
  friend bool operator==(const KeyError&, const KeyError&) = default;
};

/// Reads one key relative to a directory; nullopt when the key is absent (or unreadable,
/// which for a hostile directory is the same thing).
using KeyReader = std::function<std::optional<std::string>(std::string_view relative_key)>;

/// A boolean feature key: absent -> `absent`, "0"/"1" -> false/true, anything else -> EINVAL.
[[nodiscard]] Result<bool, KeyError> read_bool_key(const KeyReader& read, std::string_view key,
                                                   bool absent);

/// A required unsigned 32-bit decimal key (hv::parse_xs_uint): absent -> ENOENT, junk -> EINVAL.
[[nodiscard]] Result<std::uint32_t, KeyError> read_u32_key(const KeyReader& read,
                                                           std::string_view key);

/// The keys one connection was made from, in the order they were read: absolute path and
/// value (nullopt: the key was absent). A successor that takes the vif over reads them from
/// the vif's state record instead of xenstore (issue 20: ~30 round trips out of the gap).
using KeySnapshot = std::vector<std::pair<std::string, std::optional<std::string>>>;

/// The value `path` had in `keys`: nullopt when the snapshot does not hold the path at all,
/// else the recorded value (itself nullopt for a key that was absent).
[[nodiscard]] std::optional<std::optional<std::string>> snapshot_lookup(const KeySnapshot& keys,
                                                                        std::string_view path);

/// Bytes for the state record: per entry a 16-bit path length, a presence byte, a pad byte,
/// a 32-bit value length (host order), then the path and the value. Empty when the snapshot
/// would exceed `max_bytes` (the successor then reads xenstore, as before).
[[nodiscard]] std::vector<std::byte> encode_key_snapshot(const KeySnapshot& keys,
                                                         std::size_t max_bytes);
/// The inverse; nullopt for bytes that do not parse to the end (a truncated or corrupt record).
[[nodiscard]] std::optional<KeySnapshot> decode_key_snapshot(std::span<const std::byte> bytes);

}  // namespace unetback::xenbus
