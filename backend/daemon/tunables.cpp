#include "backend/daemon/tunables.hpp"

#include <array>
#include <cerrno>

#include "common/util/log.hpp"

namespace unetback::daemon {
namespace {

constexpr std::string_view kTunablesLog = "tunables";

constexpr std::array<std::string_view, 2> kCoalesceChoices{"legacy", "full"};
constexpr std::array<std::string_view, 0> kNoChoices{};
// In zerocopy::MapMode's order (the stored index is the enum's value).
constexpr std::array<std::string_view, 3> kMapChoices{"auto", "always", "never"};

// The bounds keep every value meaningful for the data path: at most 16 queues (what netfront
// asks for on big guests), a copy batch within one hypercall's reasonable size, fatal-skb-slots
// above XEN_NETBK_LEGACY_SLOTS_MAX (18, the drop threshold) and at most 64 (MAX_SKB_FRAGS + a
// margin: anything above makes XSA-39's disconnect rule meaningless).
// NOLINTNEXTLINE(readability-identifier-naming): a constant table, named as the constexpr ones.
const std::array<TunableSpec, 13> kSpecs{{
    {"max-queues", 1, 16, kNoChoices, "queues offered to a frontend (multi-queue-max-queues)"},
    {"copy-batch", 1, 1024, kNoChoices, "grant-copy segments per hypercall"},
    {"max-pending", 1, 1024, kNoChoices, "zerocopy grants in flight per queue"},
    {"goodcopy-len", 0, 65535, kNoChoices, "TX packets shorter than this are always copied"},
    {"zerocopy-fallback", 0, 1, kNoChoices, "1: copy when zerocopy is depleted; 0: wait"},
    {"rx-queue-bytes", 64U * 1024, 64U * 1024 * 1024, kNoChoices, "guest-RX queue cap, bytes"},
    {"rx-drain-timeout-ms", 1, 600000, kNoChoices, "a queued guest-RX packet expires after this"},
    {"rx-stall-timeout-ms", 1, 600000, kNoChoices, "no guest-RX progress this long: carrier off"},
    {"fatal-skb-slots", 19, 64, kNoChoices, "TX chains this long disable the vif"},
    {"rx-coalesce", 0, 1, kCoalesceChoices, "guest-RX slot packing: full or legacy"},
    {"threads", 1, 64, kNoChoices, "event-loop threads serving the queues"},
    {"tx-map", 0, 2, kMapChoices,
     "guest TX to a TAP: map big packets, copy them, or auto (the cheaper, measured)"},
    {"tap-queue-len", 16, 4096, kNoChoices,
     "packets a TAP queue holds for the daemon (txqueuelen; 32 while the guest is stalled)"},
}};

// The field each spec reads and writes, in kSpecs' order.
std::uint32_t get_field(const vif::Tunables& t, std::size_t i) {
  switch (i) {
    case 0: return t.max_queues;
    case 1: return t.copy_batch;
    case 2: return t.max_pending;
    case 3: return t.goodcopy_len;
    case 4: return t.zerocopy_fallback ? 1 : 0;
    case 5: return t.rx_queue_bytes;
    case 6: return t.rx_drain_timeout_ms;
    case 7: return t.rx_stall_timeout_ms;
    case 8: return t.fatal_skb_slots;
    case 9: return t.rx_coalesce_full ? 1 : 0;
    case 10: return t.threads;
    case 11: return static_cast<std::uint32_t>(t.tx_map);
    default: return t.tap_queue_len;
  }
}

void set_field(vif::Tunables& t, std::size_t i, std::uint32_t v) {
  switch (i) {
    case 0: t.max_queues = v; break;
    case 1: t.copy_batch = v; break;
    case 2: t.max_pending = v; break;
    case 3: t.goodcopy_len = v; break;
    case 4: t.zerocopy_fallback = v != 0; break;
    case 5: t.rx_queue_bytes = v; break;
    case 6: t.rx_drain_timeout_ms = v; break;
    case 7: t.rx_stall_timeout_ms = v; break;
    case 8: t.fatal_skb_slots = v; break;
    case 9: t.rx_coalesce_full = v != 0; break;
    case 10: t.threads = v; break;
    case 11: t.tx_map = static_cast<zerocopy::MapMode>(v); break;
    default: t.tap_queue_len = v; break;
  }
}

std::size_t index_of(const TunableSpec& spec) {
  return static_cast<std::size_t>(&spec - kSpecs.data());
}

}  // namespace

std::span<const TunableSpec> tunable_specs() {
  return kSpecs;
}

const TunableSpec* find_tunable(std::string_view name) {
  for (const auto& s : kSpecs)
    if (s.name == name) return &s;
  return nullptr;
}

std::string format_tunable(const vif::Tunables& t, const TunableSpec& spec) {
  const std::uint32_t v = get_field(t, index_of(spec));
  if (!spec.choices.empty()) return std::string(spec.choices[v]);
  return std::to_string(v);
}

std::optional<std::string> set_tunable(vif::Tunables& t, const TunableSpec& spec,
                                       std::string_view value) {
  std::uint32_t v = 0;
  if (!spec.choices.empty()) {
    bool found = false;
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.choices[i] == value) {
        v = static_cast<std::uint32_t>(i);
        found = true;
      }
    }
    if (!found) {
      std::string expected;
      for (std::size_t i = spec.choices.size(); i-- > 0;)
        expected += std::string(expected.empty() ? "" : " or ") + std::string(spec.choices[i]);
      return "'" + log::printable(value) + "' is not one of: " + expected;
    }
  } else {
    const auto parsed = hv::parse_xs_uint<std::uint64_t>(value);
    if (!parsed) return "'" + log::printable(value) + "' is not a decimal number";
    if (*parsed < spec.min || *parsed > spec.max) {
      return std::to_string(*parsed) + " is out of range " + std::to_string(spec.min) + ".." +
             std::to_string(spec.max);
    }
    v = static_cast<std::uint32_t>(*parsed);
  }
  set_field(t, index_of(spec), v);
  return std::nullopt;
}

std::string tunables_dir(DomId self) {
  return "/local/domain/" + std::to_string(self.value()) + "/unetback";
}

TunableStore::TunableStore(hv::XenStore& xs, DomId self, vif::Tunables initial,
                           std::vector<std::string> explicit_names)
    : xs_(xs),
      dir_(tunables_dir(self)),
      current_(initial),
      explicit_names_(std::move(explicit_names)) {}

std::error_code TunableStore::start() {
  if (started_) return {};
  for (const auto& spec : kSpecs) {
    bool given = false;
    for (const auto& n : explicit_names_) given = given || n == spec.name;
    if (given) {
      write_back(spec);
      continue;
    }
    reconcile(spec);
  }
  // The initial event of this watch re-reads everything once more: harmless, all values agree.
  auto w = hv::XsWatch::add(xs_, dir_, std::string(kToken));
  if (!w) return w.error();
  watch_ = std::move(*w);
  started_ = true;
  return {};
}

void TunableStore::handle_watch(const hv::XsWatchEvent& ev) {
  if (!owns(ev)) return;
  if (ev.path.size() > dir_.size() + 1 && ev.path.compare(0, dir_.size(), dir_) == 0 &&
      ev.path[dir_.size()] == '/') {
    const std::string_view name = std::string_view(ev.path).substr(dir_.size() + 1);
    if (const auto* spec = find_tunable(name)) reconcile(*spec);
    return;  // a key we do not know (or a deeper node): not ours to judge
  }
  // The directory itself (the initial event, or its removal): look at every key.
  for (const auto& spec : kSpecs) reconcile(spec);
}

std::size_t TunableStore::reload() {
  std::size_t changed = 0;
  for (const auto& spec : kSpecs) {
    const std::string before = format_tunable(current_, spec);
    reconcile(spec);
    if (format_tunable(current_, spec) != before) ++changed;
  }
  return changed;
}

std::optional<std::string> TunableStore::set(std::string_view name, std::string_view value) {
  const auto* spec = find_tunable(name);
  if (spec == nullptr) return "unknown tunable '" + log::printable(name) + "'";
  vif::Tunables next = current_;
  if (auto why = set_tunable(next, *spec, value)) return *why;
  const std::string formatted = format_tunable(next, *spec);
  if (auto ec = xs_.write(dir_ + "/" + std::string(spec->name), formatted))
    return "writing " + dir_ + "/" + std::string(spec->name) + ": " + ec.message();
  if (!(next == current_)) {
    log::write(log::Level::info, kTunablesLog,
               std::string(spec->name) + " = " + formatted + " (control socket)");
  }
  current_ = next;
  return std::nullopt;
}

void TunableStore::reconcile(const TunableSpec& spec) {
  const std::string path = dir_ + "/" + std::string(spec.name);
  auto raw = xs_.read(path);
  if (!raw) {
    if (raw.error() != std::errc::no_such_file_or_directory) {
      log::write(log::Level::warn, kTunablesLog, "reading " + path + ": " + raw.error().message());
      return;
    }
    // Absent (never written, or removed by someone): put the value in force back.
    write_back(spec);
    return;
  }
  vif::Tunables next = current_;
  if (auto why = set_tunable(next, spec, *raw)) {
    log::write(log::Level::warn, kTunablesLog,
               std::string(spec.name) + ": rejected: " + *why + "; keeping " +
                   format_tunable(current_, spec));
    write_back(spec);
    return;
  }
  if (!(next == current_)) {
    log::write(log::Level::info, kTunablesLog,
               std::string(spec.name) + " = " + format_tunable(next, spec) + " (was " +
                   format_tunable(current_, spec) + ")");
    current_ = next;
  }
  // A valid but differently spelled value ("0004") is normalised so readers see one form.
  if (*raw != format_tunable(current_, spec)) write_back(spec);
}

void TunableStore::write_back(const TunableSpec& spec) {
  const std::string path = dir_ + "/" + std::string(spec.name);
  auto ec = xs_.write(path, format_tunable(current_, spec));
  if (!ec) return;
  if (ec == std::errc::permission_denied) {
    // A driver domain whose dom0 did not give it the directory: the values in force are not
    // published there, which is said once, not once per tunable.
    if (!told_read_only_) {
      log::write(log::Level::warn, kTunablesLog,
                 dir_ + " is not writable (" + ec.message() +
                     "): tunables are read from it but the values in force are not written back");
    }
    told_read_only_ = true;
    return;
  }
  log::write(log::Level::error, kTunablesLog, "writing " + path + ": " + ec.message());
}

}  // namespace unetback::daemon
