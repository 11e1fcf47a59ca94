// Xenstore's permission model (Xen's docs/misc/xenstore.txt, SET_PERMS; Xen's perm_for_conn()).
//
// A node's permission list names its owner first; the owner's entry also gives the access of
// every domain not listed later. Later entries are per-domain ACLs. The privileged domain
// (dom0) and the owner may do anything, including SET_PERMS.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/hv/xenstore.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::xensim {

using Perms = std::vector<hv::XsPerm>;

/// Access rights, as a bit set.
enum Access : unsigned { kAccessNone = 0, kAccessRead = 1, kAccessWrite = 2, kAccessOwner = 4 };

/// Only dom0 is privileged in xensim (no SET_TARGET device models).
[[nodiscard]] inline bool is_privileged(DomId dom) {
  return dom == kDom0;
}

/// The rights `dom` has on a node with permission list `perms` (never empty).
[[nodiscard]] unsigned access_for(DomId dom, std::span<const hv::XsPerm> perms);

/// True if `dom` holds every right in `wanted`.
[[nodiscard]] inline bool allowed(DomId dom, std::span<const hv::XsPerm> perms, unsigned wanted) {
  return (access_for(dom, perms) & wanted) == wanted;
}

/// "n0\0r1\0" as GET_PERMS sends it.
[[nodiscard]] std::string perms_to_wire(std::span<const hv::XsPerm> perms);

}  // namespace unetback::xensim
