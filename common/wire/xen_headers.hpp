// The Xen public protocol headers as shipped by libxen-dev, made includable from C++.
//
// They are not self-contained (they use uint*_t without including stdint.h) and are plain
// C declarations; they need no extern "C" because they declare no functions we call.
#pragma once

#include <cstddef>
#include <cstdint>

#include <xen/grant_table.h>
#include <xen/io/netif.h>
#include <xen/io/ring.h>
#include <xen/io/xs_wire.h>
