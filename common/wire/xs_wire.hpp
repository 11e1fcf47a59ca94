// C++ views of xen/io/xs_wire.h: the xenstore message header, message types, error names
// and limits. Shared by the xensim xenstored and anything that parses xenstore traffic.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/wire/xen_headers.hpp"

namespace unetback::wire {

using XsMsgHeader = xsd_sockmsg;
static_assert(sizeof(XsMsgHeader) == 16);
static_assert(offsetof(XsMsgHeader, type) == 0);
static_assert(offsetof(XsMsgHeader, req_id) == 4);
static_assert(offsetof(XsMsgHeader, tx_id) == 8);
static_assert(offsetof(XsMsgHeader, len) == 12);

enum class XsType : std::uint32_t {
  control = XS_CONTROL,
  directory = XS_DIRECTORY,
  read = XS_READ,
  get_perms = XS_GET_PERMS,
  watch = XS_WATCH,
  unwatch = XS_UNWATCH,
  transaction_start = XS_TRANSACTION_START,
  transaction_end = XS_TRANSACTION_END,
  introduce = XS_INTRODUCE,
  release = XS_RELEASE,
  get_domain_path = XS_GET_DOMAIN_PATH,
  write = XS_WRITE,
  mkdir = XS_MKDIR,
  rm = XS_RM,
  set_perms = XS_SET_PERMS,
  watch_event = XS_WATCH_EVENT,
  error = XS_ERROR,
  is_domain_introduced = XS_IS_DOMAIN_INTRODUCED,
  resume = XS_RESUME,
  set_target = XS_SET_TARGET,
  reset_watches = XS_RESET_WATCHES,
  directory_part = XS_DIRECTORY_PART,
  invalid = XS_INVALID,
};
inline constexpr std::uint32_t kXsTypeCount = XS_TYPE_COUNT;

inline constexpr std::uint32_t kXsPayloadMax = XENSTORE_PAYLOAD_MAX;
inline constexpr std::uint32_t kXsAbsPathMax = XENSTORE_ABS_PATH_MAX;
inline constexpr std::uint32_t kXsRelPathMax = XENSTORE_REL_PATH_MAX;

/// The name of a message type ("READ", "WATCH_EVENT"), or "?" for an unknown one.
[[nodiscard]] std::string_view xs_type_name(std::uint32_t type);

/// The wire name of an errno value as xenstored sends it ("ENOENT"); xenstored only knows
/// the errno values listed in xs_wire.h, anything else is sent as "EINVAL".
[[nodiscard]] std::string_view xs_error_name(int err);
/// The errno value of a wire error name, if it is one of xs_wire.h's.
[[nodiscard]] std::optional<int> xs_error_from_name(std::string_view name);

}  // namespace unetback::wire
