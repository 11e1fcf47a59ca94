#include "backend/daemon/control_handler.hpp"

#include <type_traits>

#include "common/control/json_writer.hpp"
#include "common/hv/grant_table.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace unetback::daemon {
namespace {

using control::json_error;
using control::JsonWriter;

// `queue_count`: list shows how many queues; stats has the queues themselves under that key.
void vif_summary(JsonWriter& w, const VifStatus& s, bool queue_count) {
  w.key("vif").value(format_vif_id(s.id));
  w.key("domid").value(static_cast<std::uint64_t>(s.id.domid.value()));
  w.key("devid").value(static_cast<std::uint64_t>(s.id.devid.value()));
  w.key("state").value(xenbus::state_name(s.view.backend));
  w.key("state_id").value(static_cast<std::uint64_t>(s.view.backend));
  w.key("frontend_state");
  if (s.view.frontend) {
    w.value(xenbus::state_name(*s.view.frontend));
  } else {
    w.null();
  }
  w.key("tap").value(s.report.tap_name);
  w.key("connected").value(s.report.connected);
  w.key("carrier").value(s.report.carrier);
  w.key("adopted").value(s.report.adopted);
  if (queue_count) w.key("queues").value(static_cast<std::uint64_t>(s.report.queues.size()));
}

void ring_indices(JsonWriter& w, const ring::RingIndices& r) {
  // A back ring's private indices are req_cons and rsp_prod_pvt (shared_ring.hpp).
  w.begin_object();
  w.key("req_prod").value(r.req_prod);
  w.key("req_event").value(r.req_event);
  w.key("rsp_prod").value(r.rsp_prod);
  w.key("rsp_event").value(r.rsp_event);
  w.key("req_cons").value(r.req_prod_pvt_or_req_cons);
  w.key("rsp_prod_pvt").value(r.rsp_cons_or_rsp_prod_pvt);
  w.end_object();
}

void stats_of(JsonWriter& w, const VifStatus& s) {
  w.begin_object();
  vif_summary(w, s, /*queue_count=*/false);
  w.key("queues").begin_array();
  for (const auto& q : s.report.queues) {
    w.begin_object().key("queue").value(q.queue.value()).key("counters").begin_object();
    for (const auto& [name, v] : q.counters) w.key(name).value(v);
    w.end_object().end_object();
  }
  w.end_array().end_object();
}

std::string name_value(std::string_view name, std::string_view value) {
  JsonWriter w;
  w.begin_object().key("name").value(name).key("value").value(value).end_object();
  return w.str();
}

}  // namespace

std::string handle_request(const control::Request& request, BackendManager& manager,
                           const DaemonInfo* daemon) {
  return std::visit(
      [&](const auto& r) -> std::string {
        using T = std::decay_t<decltype(r)>;
        JsonWriter w;
        if constexpr (std::is_same_v<T, control::ListRequest>) {
          w.begin_object().key("vifs").begin_array();
          for (const auto& s : manager.list()) {
            w.begin_object();
            vif_summary(w, s, /*queue_count=*/true);
            w.end_object();
          }
          w.end_array().end_object();
        } else if constexpr (std::is_same_v<T, control::StatsRequest>) {
          std::vector<VifStatus> vifs;
          if (r.vif) {
            auto s = manager.status(*r.vif);
            if (!s) return json_error("no vif " + format_vif_id(*r.vif));
            vifs.push_back(std::move(*s));
          } else {
            vifs = manager.list();
          }
          // Grant pages this daemon has mapped now (rings and in-flight zerocopy TX), for leak
          // checks: it must return to its earlier value once vifs are gone.
          w.begin_object()
              .key("mapped_grant_pages")
              .value(static_cast<std::uint64_t>(hv::mapped_grant_pages()));
          w.key("vifs").begin_array();
          for (const auto& s : vifs) stats_of(w, s);
          w.end_array().end_object();
        } else if constexpr (std::is_same_v<T, control::RingsRequest>) {
          auto s = manager.status(r.vif);
          if (!s) return json_error("no vif " + format_vif_id(r.vif));
          w.begin_object().key("vif").value(format_vif_id(r.vif));
          w.key("connected").value(s->report.connected).key("queues").begin_array();
          for (const auto& q : s->report.queues) {
            w.begin_object().key("queue").value(q.queue.value());
            w.key("tx");
            ring_indices(w, q.tx_ring);
            w.key("rx");
            ring_indices(w, q.rx_ring);
            w.end_object();
          }
          w.end_array().end_object();
        } else if constexpr (std::is_same_v<T, control::TunablesRequest>) {
          const vif::Tunables& t = manager.tunables().current();
          w.begin_object().key("tunables").begin_array();
          for (const auto& spec : tunable_specs()) {
            w.begin_object().key("name").value(spec.name);
            w.key("value").value(format_tunable(t, spec));
            if (spec.choices.empty()) {
              w.key("min").value(spec.min).key("max").value(spec.max);
            } else {
              w.key("choices").begin_array();
              for (auto c : spec.choices) w.value(c);
              w.end_array();
            }
            w.key("help").value(spec.help).end_object();
          }
          w.end_array().end_object();
        } else if constexpr (std::is_same_v<T, control::GetRequest>) {
          const auto* spec = find_tunable(r.name);
          if (spec == nullptr) return json_error("unknown tunable '" + r.name + "'");
          return name_value(spec->name, format_tunable(manager.tunables().current(), *spec));
        } else if constexpr (std::is_same_v<T, control::SetRequest>) {
          if (auto why = manager.tunables().set(r.name, r.value))
            return json_error(r.name + ": " + *why);
          const auto* spec = find_tunable(r.name);
          return name_value(spec->name, format_tunable(manager.tunables().current(), *spec));
        } else if constexpr (std::is_same_v<T, control::StatusRequest>) {
          if (daemon == nullptr) return json_error("status: not answered here");
          w.begin_object().key("pid").value(static_cast<std::int64_t>(daemon->pid));
          w.key("program").value(daemon->program).key("started").value(daemon->started);
          w.key("version").value(daemon->version);
          if (!daemon->upgrade_error.empty()) w.key("upgrade_error").value(daemon->upgrade_error);
          w.key("vifs").value(static_cast<std::uint64_t>(manager.list().size())).end_object();
        } else if constexpr (std::is_same_v<T, control::UpgradeRequest>) {
          if (daemon == nullptr || !daemon->upgrade)
            return json_error("upgrade: not possible here");
          if (auto why = daemon->upgrade()) return json_error("upgrade: " + *why);
          w.begin_object().key("upgrading").value(true);
          w.key("pid").value(static_cast<std::int64_t>(daemon->pid));
          w.key("program").value(daemon->program).end_object();
        }
        return w.str();
      },
      request);
}

std::string handle_line(std::string_view line, BackendManager& manager, const DaemonInfo* daemon) {
  auto parsed = control::parse_request(line);
  if (auto* msg = std::get_if<std::string>(&parsed)) return json_error(*msg);
  return handle_request(std::get<control::Request>(parsed), manager, daemon);
}

}  // namespace unetback::daemon
