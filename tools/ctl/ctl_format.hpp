// Readable tables for unetback-ctl, rendered from the daemon's JSON replies (shapes in
// common/control/protocol.hpp). Pure: text in, text out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tools/ctl/json_value.hpp"

namespace unetback::ctl {

/// `v[key]` as an array; an empty one when it is absent or not an array (a reply from a
/// daemon of another version).
[[nodiscard]] const JsonValue::Array& array_of(const JsonValue& v, std::string_view key);

/// Columns padded to their widest cell, two spaces apart; the first row is the header.
[[nodiscard]] std::string format_table(const std::vector<std::vector<std::string>>& rows);

/// The table for the reply to `command` ("list", "stats", "rings", "tunables", "get", "set").
[[nodiscard]] std::string format_reply(std::string_view command, const JsonValue& reply);

}  // namespace unetback::ctl
