#include "common/control/request.hpp"

#include <iterator>
#include <vector>

namespace unetback::control {
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

const VerbSpec* find_verb(std::string_view name) {
  for (const auto& v : kVerbs)
    if (v.name == name) return &v;
  return nullptr;
}

ParsedRequest parse_request(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!printable(line)) return std::string("request contains control characters");
  const auto w = split_words(line);
  if (w.empty()) return std::string("empty request");
  const std::string_view verb = w[0];
  const VerbSpec* spec = find_verb(verb);
  if (spec == nullptr) {
    std::string known;
    for (const auto& v : kVerbs) known += (known.empty() ? "" : ", ") + std::string(v.name);
    return "unknown request '" + std::string(verb.substr(0, 32)) + "' (" + known + ")";
  }
  if (w.size() - 1 < spec->min_args) return "'" + std::string(verb) + "': missing argument";
  if (w.size() - 1 > spec->max_args) return "'" + std::string(verb) + "': too many arguments";

  if (verb == "list") return Request{ListRequest{}};
  if (verb == "tunables") return Request{TunablesRequest{}};
  if (verb == "status") return Request{StatusRequest{}};
  if (verb == "upgrade") return Request{UpgradeRequest{}};
  if (verb == "stats" || verb == "rings") {
    if (w.size() == 1) return Request{StatsRequest{}};  // rings takes its vif (kVerbs)
    const auto id = parse_vif_id(w[1]);
    if (!id) return "'" + std::string(w[1]) + "' is not <domid>/<devid>";
    if (verb == "stats") return Request{StatsRequest{*id}};
    return Request{RingsRequest{*id}};
  }
  if (verb == "get") return Request{GetRequest{std::string(w[1])}};
  // The last verb of kVerbs (one request type each).
  static_assert(std::size(kVerbs) == std::variant_size_v<Request>);
  return Request{SetRequest{std::string(w[1]), std::string(w[2])}};
}

}  // namespace unetback::control
