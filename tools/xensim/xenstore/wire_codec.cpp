#include "tools/xensim/xenstore/wire_codec.hpp"

#include <algorithm>
#include <cstring>

namespace unetback::xensim {

bool XsStreamParser::feed(std::span<const char> bytes, std::vector<XsMessage>& out) {
  if (broken_) return false;
  buf_.append(bytes.data(), bytes.size());
  std::size_t pos = 0;
  while (buf_.size() - pos >= sizeof(wire::XsMsgHeader)) {
    wire::XsMsgHeader hdr;
    std::memcpy(&hdr, buf_.data() + pos, sizeof(hdr));
    if (hdr.len > wire::kXsPayloadMax) {
      broken_ = true;
      buf_.clear();
      return false;
    }
    if (buf_.size() - pos - sizeof(hdr) < hdr.len) break;
    XsMessage m;
    m.hdr = hdr;
    m.payload.assign(buf_, pos + sizeof(hdr), hdr.len);
    out.push_back(std::move(m));
    pos += sizeof(hdr) + hdr.len;
  }
  buf_.erase(0, pos);
  return true;
}

std::string encode_message(std::uint32_t type, std::uint32_t req_id, std::uint32_t tx_id,
                           std::string_view payload) {
  wire::XsMsgHeader hdr{};
  hdr.type = type;
  hdr.req_id = req_id;
  hdr.tx_id = tx_id;
  hdr.len = static_cast<std::uint32_t>(payload.size());
  std::string out(sizeof(hdr) + payload.size(), '\0');
  std::memcpy(out.data(), &hdr, sizeof(hdr));
  std::copy(payload.begin(), payload.end(), out.begin() + sizeof(hdr));
  return out;
}

std::string encode_error(const wire::XsMsgHeader& request, int err) {
  std::string payload(wire::xs_error_name(err));
  payload += '\0';
  return encode_message(static_cast<std::uint32_t>(wire::XsType::error), request.req_id,
                        request.tx_id, payload);
}

std::string encode_reply(const wire::XsMsgHeader& request, std::string_view payload) {
  return encode_message(request.type, request.req_id, request.tx_id, payload);
}

std::string encode_event(std::string_view payload) {
  return encode_message(static_cast<std::uint32_t>(wire::XsType::watch_event), 0, 0, payload);
}

std::optional<std::string_view> one_arg(std::string_view payload) {
  if (payload.empty()) return std::nullopt;
  const auto nul = payload.find('\0');
  if (nul != payload.size() - 1) return std::nullopt;
  return payload.substr(0, nul);
}

std::vector<std::string_view> nul_strings(std::string_view payload) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  for (;;) {
    const auto nul = payload.find('\0', pos);
    if (nul == std::string_view::npos) break;
    out.push_back(payload.substr(pos, nul - pos));
    pos = nul + 1;
  }
  return out;
}

std::string join_nul(std::span<const std::string> names) {
  std::string out;
  for (const auto& n : names) {
    out += n;
    out += '\0';
  }
  return out;
}

}  // namespace unetback::xensim
