// The xs_wire.h byte stream: an incremental parser of client messages and builders of
// replies. Pure functions over bytes (fuzzable), no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire/xs_wire.hpp"

namespace unetback::xensim {

/// One message: the 16-byte header and its payload.
struct XsMessage {
  wire::XsMsgHeader hdr{};
  std::string payload;
};

/// Splits a byte stream into messages. A header announcing more than XENSTORE_PAYLOAD_MAX
/// bytes is a protocol violation: "If a client exceeds the limit, its xenstored connection
/// will be immediately killed" (Xen's docs/misc/xenstore.txt). After that the parser stays broken.
class XsStreamParser {
 public:
  /// Consumes `bytes`, appending every completed message to `out`. False once the stream
  /// is broken; the caller then closes the connection.
  bool feed(std::span<const char> bytes, std::vector<XsMessage>& out);
  [[nodiscard]] bool broken() const { return broken_; }
  /// Bytes of a partial message held back.
  [[nodiscard]] std::size_t pending() const { return buf_.size(); }

 private:
  std::string buf_;
  bool broken_ = false;
};

/// A complete message: header (type, req_id, tx_id, len) followed by `payload`.
[[nodiscard]] std::string encode_message(std::uint32_t type, std::uint32_t req_id,
                                         std::uint32_t tx_id, std::string_view payload);
/// An ERROR reply for a request: payload is the errno name and a NUL ("ENOENT\0").
[[nodiscard]] std::string encode_error(const wire::XsMsgHeader& request, int err);
/// A successful reply echoing the request's type, req_id and tx_id.
[[nodiscard]] std::string encode_reply(const wire::XsMsgHeader& request, std::string_view payload);
/// A WATCH_EVENT (req_id and tx_id 0).
[[nodiscard]] std::string encode_event(std::string_view payload);

// Payload argument parsing, with xenstored's rules.

/// Exactly one NUL, at the end: "path\0" -> "path" (Xen's onearg()).
[[nodiscard]] std::optional<std::string_view> one_arg(std::string_view payload);
/// The NUL-terminated strings at the start of the payload; trailing bytes without a NUL are
/// not a string (Xen's get_strings()).
[[nodiscard]] std::vector<std::string_view> nul_strings(std::string_view payload);
/// Joins names as "a\0b\0" (DIRECTORY's reply).
[[nodiscard]] std::string join_nul(std::span<const std::string> names);

}  // namespace unetback::xensim
