#include "backend/xenbus/keys.hpp"

#include <cerrno>
#include <cstring>

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

std::optional<std::optional<std::string>> snapshot_lookup(const KeySnapshot& keys,
                                                          std::string_view path) {
  for (const auto& [p, v] : keys)
    if (p == path) return v;
  return std::nullopt;
}

namespace {

struct EntryHead {
  std::uint16_t path_len;
  std::uint8_t present;
  std::uint8_t pad;
  std::uint32_t value_len;
};
static_assert(sizeof(EntryHead) == 8);

}  // namespace

std::vector<std::byte> encode_key_snapshot(const KeySnapshot& keys, std::size_t max_bytes) {
  std::vector<std::byte> out;
  for (const auto& [path, value] : keys) {
    const std::size_t vlen = value ? value->size() : 0;
    if (path.size() > 0xffff || out.size() + sizeof(EntryHead) + path.size() + vlen > max_bytes)
      return {};
    const EntryHead h{static_cast<std::uint16_t>(path.size()),
                      static_cast<std::uint8_t>(value ? 1 : 0), 0,
                      static_cast<std::uint32_t>(vlen)};
    const std::size_t at = out.size();
    out.resize(at + sizeof h + path.size() + vlen);
    std::memcpy(out.data() + at, &h, sizeof h);
    std::memcpy(out.data() + at + sizeof h, path.data(), path.size());
    if (value) std::memcpy(out.data() + at + sizeof h + path.size(), value->data(), vlen);
  }
  return out;
}

std::optional<KeySnapshot> decode_key_snapshot(std::span<const std::byte> bytes) {
  KeySnapshot keys;
  std::size_t at = 0;
  while (at < bytes.size()) {
    EntryHead h{};
    if (bytes.size() - at < sizeof h) return std::nullopt;
    std::memcpy(&h, bytes.data() + at, sizeof h);
    at += sizeof h;
    if (h.present > 1 || (h.present == 0 && h.value_len != 0) ||
        bytes.size() - at < std::size_t{h.path_len} + h.value_len)
      return std::nullopt;
    const auto* text = reinterpret_cast<const char*>(bytes.data() + at);
    std::string path(text, h.path_len);
    std::optional<std::string> value;
    if (h.present == 1) value.emplace(text + h.path_len, h.value_len);
    keys.emplace_back(std::move(path), std::move(value));
    at += std::size_t{h.path_len} + h.value_len;
  }
  return keys;
}

}  // namespace unetback::xenbus
