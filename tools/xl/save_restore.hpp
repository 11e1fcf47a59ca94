// `unetback-xl save`, `restore` and `migrate`, as libxl's save/restore and a localhost
// migration: the guest suspends through control/shutdown, its devices and domain are torn
// down while the guest process (the domain's memory image) stays; the domain is built again
// from the save image (save_image.hpp) and the guest resumed in it.
#pragma once

#include <string>

#include "tools/xl/world.hpp"

namespace unetback::xl {

/// Suspends `target` and writes its save image to `file`.
int cmd_save(World& w, const std::string& target, const std::string& file);

/// Builds the domain of the save image `file` again and resumes its guest; prints "domid N".
int cmd_restore(World& w, const std::string& file);

/// save and restore in one go, without a file; prints "domid N".
int cmd_migrate(World& w, const std::string& target);

}  // namespace unetback::xl
