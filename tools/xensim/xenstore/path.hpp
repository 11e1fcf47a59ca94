// Xenstore path rules (Xen's docs/misc/xenstore.txt, "Paths are /-separated…"): validation,
// relative-path resolution and the parent/child relation used by watches.
#pragma once

#include <string>
#include <string_view>

#include "common/util/strong_id.hpp"

namespace unetback::xensim {

/// "/local/domain/<id>": a domain's home, the base of its relative paths.
[[nodiscard]] std::string domain_path(DomId id);

/// Resolves a request path: absolute ("/…") and special ("@…") paths are kept, anything
/// else is relative to the caller's domain path ("x/y" from dom3 is /local/domain/3/x/y).
[[nodiscard]] std::string canonicalize(DomId caller, std::string_view path);

/// Xen's is_valid_nodename(): starts with '/', no trailing '/' (except "/"), no "//", only
/// [A-Za-z0-9-/_@], at most XENSTORE_ABS_PATH_MAX bytes, and at most
/// XENSTORE_REL_PATH_MAX bytes below "/local/domain/<id>/" (Xen's quota_max_path_len).
[[nodiscard]] bool is_valid_path(std::string_view path);

/// A watchable path: a valid node path, or "@<name>" of at most XENSTORE_REL_PATH_MAX bytes.
[[nodiscard]] bool is_special_path(std::string_view path);

/// The parent of a valid path other than "/" ("/a/b" -> "/a", "/a" -> "/").
[[nodiscard]] std::string_view parent_path(std::string_view path);
/// The last component of a valid path other than "/".
[[nodiscard]] std::string_view base_name(std::string_view path);
/// `parent` joined with a child name.
[[nodiscard]] std::string child_path(std::string_view parent, std::string_view name);

/// True if `child` equals `parent` or lies below it ("/" is everyone's parent).
[[nodiscard]] bool is_child_or_self(std::string_view child, std::string_view parent);

}  // namespace unetback::xensim
