#include "backend/daemon/control_request.hpp"

#include <vector>

namespace unetback::daemon {
namespace {

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

bool printable(std::string_view s) {
  for (char c : s)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}

}  // namespace

ParsedRequest parse_request(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!printable(line)) return std::string("request contains control characters");
  const auto w = split_words(line);
  if (w.empty()) return std::string("empty request");
  const std::string_view verb = w[0];
  const auto arity = [&](std::size_t min, std::size_t max) -> std::optional<std::string> {
    if (w.size() - 1 < min) return "'" + std::string(verb) + "': missing argument";
    if (w.size() - 1 > max) return "'" + std::string(verb) + "': too many arguments";
    return std::nullopt;
  };
  const auto vif_arg = [&](std::string_view s) -> std::variant<VifId, std::string> {
    if (auto id = parse_vif_id(s)) return *id;
    return "'" + std::string(s) + "' is not <domid>/<devid>";
  };

  if (verb == "list" || verb == "tunables" || verb == "status" || verb == "upgrade") {
    if (auto e = arity(0, 0)) return *e;
    if (verb == "list") return Request{ListRequest{}};
    if (verb == "status") return Request{StatusRequest{}};
    if (verb == "upgrade") return Request{UpgradeRequest{}};
    return Request{TunablesRequest{}};
  }
  if (verb == "stats") {
    if (auto e = arity(0, 1)) return *e;
    if (w.size() == 1) return Request{StatsRequest{}};
    auto id = vif_arg(w[1]);
    if (auto* msg = std::get_if<std::string>(&id)) return *msg;
    return Request{StatsRequest{std::get<VifId>(id)}};
  }
  if (verb == "rings") {
    if (auto e = arity(1, 1)) return *e;
    auto id = vif_arg(w[1]);
    if (auto* msg = std::get_if<std::string>(&id)) return *msg;
    return Request{RingsRequest{std::get<VifId>(id)}};
  }
  if (verb == "get") {
    if (auto e = arity(1, 1)) return *e;
    return Request{GetRequest{std::string(w[1])}};
  }
  if (verb == "set") {
    if (auto e = arity(2, 2)) return *e;
    return Request{SetRequest{std::string(w[1]), std::string(w[2])}};
  }
  return "unknown request '" + std::string(verb.substr(0, 32)) +
         "' (list, stats, rings, tunables, get, set, status, upgrade)";
}

}  // namespace unetback::daemon
