// A directory of xenstore keys as a plain map, read through xenbus::KeyReader: what the
// key-parsing tests feed the parsers.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "backend/xenbus/keys.hpp"

namespace unetback::xenbus::key_map {

using Keys = std::map<std::string, std::string, std::less<>>;

inline KeyReader reader(const Keys& keys) {
  return [&keys](std::string_view k) -> std::optional<std::string> {
    auto it = keys.find(k);
    if (it == keys.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace unetback::xenbus::key_map
