#include <array>
#include <cerrno>
#include <utility>

#include "common/wire/grant.hpp"
#include "common/wire/xs_wire.hpp"

namespace unetback::wire {

std::string_view grant_status_name(std::int16_t status) {
  static constexpr std::array<std::string_view, 14> kNames = {
      "GNTST_okay",         "GNTST_general_error",   "GNTST_bad_domain",
      "GNTST_bad_gntref",   "GNTST_bad_handle",      "GNTST_bad_virt_addr",
      "GNTST_bad_dev_addr", "GNTST_no_device_space", "GNTST_permission_denied",
      "GNTST_bad_page",     "GNTST_bad_copy_arg",    "GNTST_address_too_big",
      "GNTST_eagain",       "GNTST_no_space"};
  if (status > 0 || status <= -static_cast<int>(kNames.size())) return "GNTST_unknown";
  return kNames[static_cast<std::size_t>(-status)];
}

std::string_view xs_type_name(std::uint32_t type) {
  switch (static_cast<XsType>(type)) {
    case XsType::control: return "CONTROL";
    case XsType::directory: return "DIRECTORY";
    case XsType::read: return "READ";
    case XsType::get_perms: return "GET_PERMS";
    case XsType::watch: return "WATCH";
    case XsType::unwatch: return "UNWATCH";
    case XsType::transaction_start: return "TRANSACTION_START";
    case XsType::transaction_end: return "TRANSACTION_END";
    case XsType::introduce: return "INTRODUCE";
    case XsType::release: return "RELEASE";
    case XsType::get_domain_path: return "GET_DOMAIN_PATH";
    case XsType::write: return "WRITE";
    case XsType::mkdir: return "MKDIR";
    case XsType::rm: return "RM";
    case XsType::set_perms: return "SET_PERMS";
    case XsType::watch_event: return "WATCH_EVENT";
    case XsType::error: return "ERROR";
    case XsType::is_domain_introduced: return "IS_DOMAIN_INTRODUCED";
    case XsType::resume: return "RESUME";
    case XsType::set_target: return "SET_TARGET";
    case XsType::reset_watches: return "RESET_WATCHES";
    case XsType::directory_part: return "DIRECTORY_PART";
    case XsType::invalid: return "INVALID";
  }
  return "?";
}

namespace {
// xs_wire.h's xsd_errors[] table, as a constexpr array we can search without touching the
// header's static (non-constexpr) array.
constexpr std::array<std::pair<int, std::string_view>, 16> kXsErrors = {{
    {EINVAL, "EINVAL"},
    {EACCES, "EACCES"},
    {EEXIST, "EEXIST"},
    {EISDIR, "EISDIR"},
    {ENOENT, "ENOENT"},
    {ENOMEM, "ENOMEM"},
    {ENOSPC, "ENOSPC"},
    {EIO, "EIO"},
    {ENOTEMPTY, "ENOTEMPTY"},
    {ENOSYS, "ENOSYS"},
    {EROFS, "EROFS"},
    {EBUSY, "EBUSY"},
    {EAGAIN, "EAGAIN"},
    {EISCONN, "EISCONN"},
    {E2BIG, "E2BIG"},
    {EPERM, "EPERM"},
}};
}  // namespace

std::string_view xs_error_name(int err) {
  for (const auto& [e, name] : kXsErrors)
    if (e == err) return name;
  return "EINVAL";
}

std::optional<int> xs_error_from_name(std::string_view name) {
  for (const auto& [e, n] : kXsErrors)
    if (n == name) return e;
  return std::nullopt;
}

}  // namespace unetback::wire
