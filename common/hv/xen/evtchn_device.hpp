// The event-channel device's own batch interface, below libxenevtchn: Linux's
// /dev/xen/evtchn hands out every pending port of the handle in one read() (4 bytes each,
// up to the buffer's size) and unmasks every port written to it in one write().
// libxenevtchn's xenevtchn_pending() and xenevtchn_unmask() do one port per syscall, so a
// wakeup with two ports cost three reads and two writes; in a PV dom0 every one is a round
// trip through Xen.
#pragma once

#include <cstddef>
#include <span>
#include <system_error>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hv {

/// The ports pending on a non-blocking evtchn device fd, up to out.size(): one read() takes
/// every port the device holds, and reads go on until it answers EAGAIN or out is full, so
/// fewer than out.size() means none is left (a port can land during a read without a new
/// wakeup); 0 when none.
Result<std::size_t> read_pending_ports(int fd, std::span<Port> out);
/// Unmasks `ports` with one write().
std::error_code write_unmask_ports(int fd, std::span<const Port> ports);

}  // namespace unetback::hv
