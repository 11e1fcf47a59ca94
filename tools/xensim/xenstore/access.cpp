#include "tools/xensim/xenstore/access.hpp"

namespace unetback::xensim {

namespace {
unsigned kind_bits(hv::XsPerm::Kind k) {
  switch (k) {
    case hv::XsPerm::Kind::none: return kAccessNone;
    case hv::XsPerm::Kind::read: return kAccessRead;
    case hv::XsPerm::Kind::write: return kAccessWrite;
    case hv::XsPerm::Kind::both: return kAccessRead | kAccessWrite;
  }
  return kAccessNone;
}
}  // namespace

unsigned access_for(DomId dom, std::span<const hv::XsPerm> perms) {
  if (is_privileged(dom)) return kAccessRead | kAccessWrite | kAccessOwner;
  if (perms.empty()) return kAccessNone;
  if (perms[0].domid == dom) return kAccessRead | kAccessWrite | kAccessOwner;
  // The first ACL entry naming the domain wins; otherwise the owner entry is the default.
  for (std::size_t i = 1; i < perms.size(); ++i)
    if (perms[i].domid == dom) return kind_bits(perms[i].kind);
  return kind_bits(perms[0].kind);
}

std::string perms_to_wire(std::span<const hv::XsPerm> perms) {
  std::string out;
  for (const auto& p : perms) {
    out += hv::format_xs_perm(p);
    out += '\0';
  }
  return out;
}

}  // namespace unetback::xensim
