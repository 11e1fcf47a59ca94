#include "tools/xensim/xenstore/path.hpp"

#include "common/wire/xs_wire.hpp"

namespace unetback::xensim {

namespace {

constexpr std::string_view kLocalDomain = "/local/domain/";

bool valid_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '/' || c == '_' || c == '@';
}

// Length of a "/local/domain/<digits>/" prefix (Xen scans at most 5 digits), or 0. Paths
// below a domain's home may be XENSTORE_REL_PATH_MAX long in addition to that prefix.
std::size_t local_prefix_len(std::string_view path) {
  if (!path.starts_with(kLocalDomain)) return 0;
  std::size_t i = kLocalDomain.size();
  std::size_t digits = 0;
  while (i < path.size() && path[i] >= '0' && path[i] <= '9' && digits < 5) {
    ++i;
    ++digits;
  }
  if (digits == 0 || i >= path.size() || path[i] != '/') return 0;
  return i + 1;
}

}  // namespace

std::string domain_path(DomId id) {
  return std::string(kLocalDomain) + std::to_string(id.value());
}

std::string canonicalize(DomId caller, std::string_view path) {
  if (path.starts_with('/') || path.starts_with('@')) return std::string(path);
  return domain_path(caller) + "/" + std::string(path);
}

bool is_valid_path(std::string_view path) {
  if (!path.starts_with('/')) return false;
  if (path.size() > 1 && path.ends_with('/')) return false;
  if (path.find("//") != std::string_view::npos) return false;
  if (path.size() > wire::kXsAbsPathMax) return false;
  if (path.size() > local_prefix_len(path) + wire::kXsRelPathMax) return false;
  for (char c : path)
    if (!valid_char(c)) return false;
  return true;
}

bool is_special_path(std::string_view path) {
  return path.starts_with('@') && path.size() <= wire::kXsRelPathMax &&
         path.find('\0') == std::string_view::npos;
}

std::string_view parent_path(std::string_view path) {
  const auto slash = path.rfind('/');
  if (slash == 0 || slash == std::string_view::npos) return "/";
  return path.substr(0, slash);
}

std::string_view base_name(std::string_view path) {
  return path.substr(path.rfind('/') + 1);
}

std::string child_path(std::string_view parent, std::string_view name) {
  std::string p(parent);
  if (p != "/") p += '/';
  p += name;
  return p;
}

bool is_child_or_self(std::string_view child, std::string_view parent) {
  if (parent == "/") return child.starts_with('/');
  if (!child.starts_with(parent)) return false;
  return child.size() == parent.size() || child[parent.size()] == '/';
}

}  // namespace unetback::xensim
