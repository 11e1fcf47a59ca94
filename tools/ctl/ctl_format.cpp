#include "tools/ctl/ctl_format.hpp"

#include <algorithm>

namespace unetback::ctl {

const JsonValue::Array& array_of(const JsonValue& v, std::string_view key) {
  static const JsonValue::Array empty;
  const JsonValue* a = v.get(key);
  return (a != nullptr && a->as_array() != nullptr) ? *a->as_array() : empty;
}

namespace {

std::string list_table(const JsonValue& reply) {
  std::vector<std::vector<std::string>> rows{
      {"VIF", "STATE", "FRONTEND", "TAP", "CONNECTED", "CARRIER", "QUEUES", "ADOPTED"}};
  for (const auto& v : array_of(reply, "vifs")) {
    rows.push_back({field(v, "vif"), field(v, "state"), field(v, "frontend_state"), field(v, "tap"),
                    field(v, "connected") == "true" ? "yes" : "no",
                    field(v, "carrier") == "true" ? "up" : "down", field(v, "queues"),
                    field(v, "adopted")});
  }
  if (rows.size() == 1) return "no vifs\n";
  return format_table(rows);
}

// One row per (vif, queue), one column per counter (the union, in first-seen order).
std::string stats_table(const JsonValue& reply) {
  std::vector<std::string> names;
  for (const auto& v : array_of(reply, "vifs")) {
    for (const auto& q : array_of(v, "queues")) {
      const JsonValue* c = q.get("counters");
      if (c == nullptr || c->as_object() == nullptr) continue;
      for (const auto& [k, val] : *c->as_object())
        if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    }
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"VIF", "QUEUE"};
  header.insert(header.end(), names.begin(), names.end());
  rows.push_back(header);
  for (const auto& v : array_of(reply, "vifs")) {
    const auto& queues = array_of(v, "queues");
    if (queues.empty()) {
      std::vector<std::string> row{field(v, "vif"), "-"};
      row.resize(header.size(), "-");
      rows.push_back(row);
    }
    for (const auto& q : queues) {
      std::vector<std::string> row{field(v, "vif"), field(q, "queue")};
      const JsonValue* c = q.get("counters");
      for (const auto& n : names) row.push_back(c == nullptr ? "-" : field(*c, n));
      rows.push_back(row);
    }
  }
  if (rows.size() == 1) return "no vifs\n";
  return format_table(rows);
}

std::string rings_table(const JsonValue& reply) {
  std::vector<std::vector<std::string>> rows{{"QUEUE", "RING", "REQ_PROD", "REQ_CONS", "REQ_EVENT",
                                              "RSP_PROD_PVT", "RSP_PROD", "RSP_EVENT"}};
  for (const auto& q : array_of(reply, "queues")) {
    for (const char* ring : {"tx", "rx"}) {
      const JsonValue* r = q.get(ring);
      if (r == nullptr) continue;
      rows.push_back({field(q, "queue"), ring, field(*r, "req_prod"), field(*r, "req_cons"),
                      field(*r, "req_event"), field(*r, "rsp_prod_pvt"), field(*r, "rsp_prod"),
                      field(*r, "rsp_event")});
    }
  }
  std::string out = "vif " + field(reply, "vif") +
                    (field(reply, "connected") == "true" ? " (connected)\n" : " (not connected)\n");
  if (rows.size() == 1) return out + "no rings\n";
  return out + format_table(rows);
}

std::string tunables_table(const JsonValue& reply) {
  std::vector<std::vector<std::string>> rows{{"NAME", "VALUE", "RANGE", "DESCRIPTION"}};
  for (const auto& t : array_of(reply, "tunables")) {
    std::string range;
    if (const JsonValue* c = t.get("choices"); c != nullptr && c->as_array() != nullptr) {
      for (const auto& choice : *c->as_array()) range += (range.empty() ? "" : "|") + choice.text();
    } else {
      range = field(t, "min") + ".." + field(t, "max");
    }
    rows.push_back({field(t, "name"), field(t, "value"), range, field(t, "help")});
  }
  return format_table(rows);
}

}  // namespace

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string format_reply(std::string_view command, const JsonValue& reply) {
  if (command == "list") return list_table(reply);
  if (command == "stats") return stats_table(reply);
  if (command == "rings") return rings_table(reply);
  if (command == "tunables") return tunables_table(reply);
  if (command == "status") {
    return "unetbackd " + field(reply, "version") + ", pid " + field(reply, "pid") + ", " +
           field(reply, "program") + ", started " + field(reply, "started") + ", " +
           field(reply, "vifs") + " vif(s)\n";
  }
  // get / set: "name = value".
  return field(reply, "name") + " = " + field(reply, "value") + "\n";
}

}  // namespace unetback::ctl
