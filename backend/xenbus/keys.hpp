// Reading xenstore keys strictly: Result<T, KeyError> (a value, or which key was wrong and why),
// KeyReader (how a directory is read) and the scalar parsers both config parsers share.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

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

}  // namespace unetback::xenbus
