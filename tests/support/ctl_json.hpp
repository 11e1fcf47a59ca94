// unetbackd's control replies in tests (`unetback-ctl --json list|stats|status`), read with
// unetback-ctl's own JSON reader (tools/ctl/json_value.hpp; link ctl_dep): the vifs of a
// reply, a vif by its id, a member of each, counters per queue and summed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/ctl/json_value.hpp"

namespace unetback::test {

/// The reply `json` as a document; a null value when it is not JSON (a test then finds no vif
/// and no counter, and prints the text it got).
[[nodiscard]] inline ctl::JsonValue parse_reply(std::string_view json) {
  return ctl::parse_json(json).value_or(ctl::JsonValue{});
}

/// The entries of the reply's "vifs" array (list, stats), in the daemon's order.
[[nodiscard]] inline std::vector<ctl::JsonValue> reply_vifs(std::string_view json) {
  const auto doc = parse_reply(json);
  const auto* vifs = doc.get("vifs");
  const auto* array = vifs != nullptr ? vifs->as_array() : nullptr;
  return array != nullptr ? *array : std::vector<ctl::JsonValue>{};
}

/// The entry of vif `id` ("5/0") in the reply, or nullopt if it lists no such vif.
[[nodiscard]] inline std::optional<ctl::JsonValue> reply_vif(std::string_view json,
                                                             std::string_view id) {
  for (auto& v : reply_vifs(json))
    if (ctl::field(v, "vif") == id) return v;
  return std::nullopt;
}

/// Member `key` of every vif in the reply, as text ("-" where a vif has none).
[[nodiscard]] inline std::vector<std::string> reply_vif_fields(std::string_view json,
                                                               std::string_view key) {
  std::vector<std::string> out;
  for (const auto& v : reply_vifs(json)) out.push_back(ctl::field(v, key));
  return out;
}

/// Whether some vif of the reply has member `key` equal to `value` (as text).
[[nodiscard]] inline bool reply_has_vif_with(std::string_view json, std::string_view key,
                                             std::string_view value) {
  for (const auto& f : reply_vif_fields(json, key))
    if (f == value) return true;
  return false;
}

/// A number as an unsigned integer; 0 for anything else.
[[nodiscard]] inline std::uint64_t json_uint(const ctl::JsonValue& v) {
  const auto* n = v.as_number();
  return n != nullptr ? std::strtoull(n->text.c_str(), nullptr, 10) : 0;
}

/// The sum of every member named `name` anywhere in `v` (the counters of every queue of every
/// vif, or one field of a status reply).
[[nodiscard]] inline std::uint64_t sum_members(const ctl::JsonValue& v, std::string_view name) {
  std::uint64_t total = 0;
  if (const auto* o = v.as_object()) {
    for (const auto& [k, m] : *o) total += k == name ? json_uint(m) : sum_members(m, name);
  } else if (const auto* a = v.as_array()) {
    for (const auto& e : *a) total += sum_members(e, name);
  }
  return total;
}
[[nodiscard]] inline std::uint64_t sum_counter(std::string_view json, std::string_view name) {
  return sum_members(parse_reply(json), name);
}

/// Counter `name` of each queue in a stats reply, vif after vif, in queue order.
[[nodiscard]] inline std::vector<std::uint64_t> queue_counters(std::string_view json,
                                                               std::string_view name) {
  std::vector<std::uint64_t> out;
  for (const auto& v : reply_vifs(json)) {
    const auto* queues = v.get("queues");
    const auto* array = queues != nullptr ? queues->as_array() : nullptr;
    if (array == nullptr) continue;
    for (const auto& q : *array) {
      const auto* counters = q.get("counters");
      out.push_back(counters != nullptr ? sum_members(*counters, name) : 0);
    }
  }
  return out;
}

}  // namespace unetback::test
