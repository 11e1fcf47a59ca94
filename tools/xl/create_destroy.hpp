// `unetback-xl create` and `destroy`: a domain built with its vifs and its guest started (the
// netfront-shim process that runs it, found as --help says), and the whole torn down again.
#pragma once

#include <string>

#include "tools/xl/command_line.hpp"
#include "tools/xl/world.hpp"

namespace unetback::xl {

/// Builds the domain, starts its guest unless there is none, prints "domid N".
int cmd_create(World& w, CreateArgs a);

/// Removes the vifs of `target`, stops its guest and destroys the domain.
int cmd_destroy(World& w, const std::string& target);

}  // namespace unetback::xl
