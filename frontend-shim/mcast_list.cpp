#include "frontend-shim/mcast_list.hpp"

#include <algorithm>
#include <iterator>

namespace unetback::shim {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The fields of one line, split on blanks (at most `max` of them).
std::vector<std::string_view> fields(std::string_view line, std::size_t max) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size() && out.size() < max) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t j = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > j) out.push_back(line.substr(j, i - j));
  }
  return out;
}

}  // namespace

std::vector<McastAddr> parse_dev_mcast(std::string_view text, std::string_view ifname) {
  std::vector<McastAddr> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto f = fields(line, 6);
    if (f.size() != 5 || f[1] != ifname || f[4].size() != 12) continue;
    McastAddr a{};
    bool ok = true;
    for (std::size_t k = 0; k < 6 && ok; ++k) {
      const int hi = hex_digit(f[4][2 * k]), lo = hex_digit(f[4][2 * k + 1]);
      ok = hi >= 0 && lo >= 0;
      a[k] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    // The group bit: only multicast addresses go into the backend's filter.
    if (ok && (a[0] & 1) != 0) out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

McastDelta mcast_delta(const std::vector<McastAddr>& known, const std::vector<McastAddr>& wanted) {
  McastDelta d;
  std::set_difference(wanted.begin(), wanted.end(), known.begin(), known.end(),
                      std::back_inserter(d.add));
  std::set_difference(known.begin(), known.end(), wanted.begin(), wanted.end(),
                      std::back_inserter(d.remove));
  return d;
}

}  // namespace unetback::shim
