// One SOCK_SEQPACKET message with file descriptors attached (SCM_RIGHTS), both ways.
#pragma once

#include <cstddef>
#include <span>
#include <system_error>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::hv::sim {

/// Sends `data` with `fds` in one message. MSG_NOSIGNAL: a vanished peer is EPIPE, not a
/// signal. Non-blocking sockets give EAGAIN when the peer's queue is full.
std::error_code send_packet(int sock, std::span<const std::byte> data, std::span<const int> fds);

/// Receives one message into `buf` and the descriptors it carries into `fds` (close-on-exec).
/// Returns its length; 0 means the peer closed. A message longer than `buf`, or carrying
/// more than kMaxFdsPerMessage descriptors, is EMSGSIZE; one whose descriptors this process
/// had no room for (its table full) is EMFILE. Either way the descriptors received are closed.
Result<std::size_t> recv_packet(int sock, std::span<std::byte> buf, std::vector<UniqueFd>& fds);

}  // namespace unetback::hv::sim
