// C++ views of xen/grant_table.h: v1 grant entries, their flags and the GNTST_* statuses.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/wire/xen_headers.hpp"

namespace unetback::wire {

using GrantEntryV1 = grant_entry_v1_t;

static_assert(sizeof(GrantEntryV1) == 8);
static_assert(offsetof(GrantEntryV1, flags) == 0);
static_assert(offsetof(GrantEntryV1, domid) == 2);
static_assert(offsetof(GrantEntryV1, frame) == 4);

/// grant_entry_v1.flags bits (GTF_*). The granting guest writes type/readonly; Xen (here:
/// xensim) sets reading/writing while a grant is mapped or being copied.
enum class GrantFlag : std::uint16_t {
  permit_access = GTF_permit_access,
  readonly = GTF_readonly,
  reading = GTF_reading,
  writing = GTF_writing,
};
inline constexpr std::uint16_t kGtfTypeMask = GTF_type_mask;

/// Per-operation grant status (GNTST_*).
enum class GrantStatus : std::int16_t {
  okay = GNTST_okay,
  general_error = GNTST_general_error,
  bad_domain = GNTST_bad_domain,
  bad_gntref = GNTST_bad_gntref,
  bad_handle = GNTST_bad_handle,
  bad_virt_addr = GNTST_bad_virt_addr,
  bad_dev_addr = GNTST_bad_dev_addr,
  no_device_space = GNTST_no_device_space,
  permission_denied = GNTST_permission_denied,
  bad_page = GNTST_bad_page,
  bad_copy_arg = GNTST_bad_copy_arg,
  address_too_big = GNTST_address_too_big,
  eagain = GNTST_eagain,
  no_space = GNTST_no_space,
};

/// The GNTST_* name of a status ("GNTST_bad_gntref"), for logs and tests.
[[nodiscard]] std::string_view grant_status_name(std::int16_t status);

static_assert(sizeof(gnttab_copy_t) == 40);

}  // namespace unetback::wire
