// What `unetback-xl save` keeps of a domain for `restore`. Real xl's save file holds the
// domain's configuration and its memory; in a xensim world the memory is the guest process
// itself, which stays alive (suspended, its TAP and connections in its namespace), so the
// image holds the configuration (name, uuid, each vif as libxl's private copy has it) and
// the guest's pid. Text, one "key value" per line, so an operator can read it.
#pragma once

#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "common/util/result.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::toolstack {

struct SavedDomain {
  std::string name;
  std::string uuid;
  pid_t guest_pid = 0;
  std::vector<VifSpec> vifs;
};

/// The image's text. EINVAL when a value holds a newline (it could not be read back).
[[nodiscard]] Result<std::string> format_save_image(const SavedDomain& saved);

/// Reads an image back. EINVAL for anything but what format_save_image writes: a missing or
/// other first line, an unknown key, a bad number, a vif key without its mac, no name, no vif.
[[nodiscard]] Result<SavedDomain> parse_save_image(std::string_view text);

}  // namespace unetback::toolstack
