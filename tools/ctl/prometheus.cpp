#include "tools/ctl/prometheus.hpp"

#include <algorithm>
#include <vector>

#include "common/control/queue_counter_specs.hpp"
#include "tools/ctl/ctl_format.hpp"

namespace unetback::ctl {
namespace {

/// A metric name part must be [a-zA-Z0-9_] (the daemon's counter names are): anything else
/// from a daemon of another version is left out rather than breaking the whole scrape.
bool valid_name(std::string_view n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

/// A sample's value: a JSON number as the daemon wrote it (64-bit counters stay exact),
/// true/false as 1/0, nothing for anything else.
std::optional<std::string> sample_value(const JsonValue* v) {
  if (v == nullptr) return std::nullopt;
  if (const auto* n = v->as_number()) return n->text;
  if (const auto* b = v->as_bool()) return std::string(*b ? "1" : "0");
  return std::nullopt;
}

struct Family {
  std::string name;
  std::string help;
  std::string type;
  std::vector<std::string> samples;  // "name{labels} value"
};

void render(std::string& out, const Family& f) {
  out += "# HELP " + f.name + " " + f.help + "\n";
  out += "# TYPE " + f.name + " " + f.type + "\n";
  for (const auto& s : f.samples) out += s + "\n";
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_prometheus(const JsonValue& reply) {
  Family grants{"unetback_mapped_grant_pages",
                "Guest pages unetbackd has grant-mapped now (rings and zerocopy TX in flight)",
                "gauge",
                {}};
  if (auto v = sample_value(reply.get("mapped_grant_pages")))
    grants.samples.push_back(grants.name + " " + *v);

  Family connected{"unetback_vif_connected", "1 if the vif's data path is connected", "gauge", {}};
  Family carrier{"unetback_vif_carrier", "1 if the vif's carrier is up", "gauge", {}};
  Family state{"unetback_vif_backend_state", "The vif's xenbus backend state (1..6)", "gauge", {}};
  Family queues{"unetback_vif_queues", "Queues the vif runs", "gauge", {}};

  // Per-queue counters: the known ones in queue_counter_specs.hpp order, then any the daemon
  // reports that this unetback-ctl does not know (first-seen order).
  std::vector<Family> counters;
  for (const auto& spec : control::kQueueCounterSpecs) {
    counters.push_back(
        {"unetback_" + std::string(spec.name) + "_total", std::string(spec.help), "counter", {}});
  }
  const auto family_of = [&counters](const std::string& counter) -> Family* {
    if (!valid_name(counter)) return nullptr;
    const std::string name = "unetback_" + counter + "_total";
    for (auto& f : counters)
      if (f.name == name) return &f;
    counters.push_back({name, "unetbackd per-queue counter " + counter, "counter", {}});
    return &counters.back();
  };

  for (const auto& v : array_of(reply, "vifs")) {
    const auto domid = sample_value(v.get("domid"));
    const auto devid = sample_value(v.get("devid"));
    if (!domid || !devid) continue;
    const std::string vif_labels = "vif=\"" + escape_label_value("vif" + *domid + "." + *devid) +
                                   "\",domid=\"" + escape_label_value(*domid) + "\",devid=\"" +
                                   escape_label_value(*devid) + "\"";
    const auto gauge = [&vif_labels](Family& f, std::optional<std::string> value) {
      if (value) f.samples.push_back(f.name + "{" + vif_labels + "} " + *value);
    };
    gauge(connected, sample_value(v.get("connected")));
    gauge(carrier, sample_value(v.get("carrier")));
    gauge(state, sample_value(v.get("state_id")));
    const auto& qs = array_of(v, "queues");
    gauge(queues, std::to_string(qs.size()));
    for (const auto& q : qs) {
      const auto queue = sample_value(q.get("queue"));
      const JsonValue* c = q.get("counters");
      if (!queue || c == nullptr || c->as_object() == nullptr) continue;
      const std::string labels =
          "{" + vif_labels + ",queue=\"" + escape_label_value(*queue) + "\"} ";
      for (const auto& [name, value] : *c->as_object()) {
        const auto text = sample_value(&value);
        Family* f = family_of(name);
        if (text && f != nullptr) f->samples.push_back(f->name + labels + *text);
      }
    }
  }

  std::string out;
  for (const Family* f : {&grants, &connected, &carrier, &state, &queues}) render(out, *f);
  for (const auto& f : counters) render(out, f);
  return out;
}

}  // namespace unetback::ctl
