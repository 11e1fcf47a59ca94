#include "backend/xenbus/keys.hpp"

#include <cerrno>

#include "common/hv/xenstore.hpp"

namespace unetback::xenbus {

Result<bool, KeyError> read_bool_key(const KeyReader& read, std::string_view key, bool absent) {
  const auto raw = read(key);
  if (!raw) return absent;
  if (*raw == "1") return true;
  if (*raw == "0") return false;
  return KeyError{std::string(key), "not a boolean (\"0\" or \"1\")", EINVAL};
}

Result<std::uint32_t, KeyError> read_u32_key(const KeyReader& read, std::string_view key) {
  const auto raw = read(key);
  if (!raw) return KeyError{std::string(key), "missing", ENOENT};
  const auto v = hv::parse_xs_uint<std::uint32_t>(*raw);
  if (!v) return KeyError{std::string(key), "not an unsigned 32-bit decimal", EINVAL};
  return *v;
}

}  // namespace unetback::xenbus
