// The daemon-wide tunables: their names, bounds and strict parsing (pure), and TunableStore,
// which keeps them in `/local/domain/<self>/unetback/` and watches that directory.
//
// xenstore is the interface (docs/operator-guide.md, "Tunables"): an operator (or
// unetback-ctl) writes a key, the watch validates it, and a rejected value is overwritten with
// the one still in force, so that `xenstore-read` always shows what the daemon uses. Values
// apply to vifs that connect later.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/vif/vif_handle.hpp"
#include "common/hv/xenstore.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::daemon {

/// One tunable: its xenstore key (also the command-line option `--<name>`), and its domain.
/// Numbers are decimal (hv::parse_xs_uint: no sign, no spaces, no junk) within [min, max];
/// a `choices` key takes one of its words, stored as the word's index.
struct TunableSpec {
  std::string_view name;
  std::uint32_t min = 0;
  std::uint32_t max = 0;
  std::span<const std::string_view> choices;  // empty: a number
  std::string_view help;
};

/// Every tunable, in a fixed order (the order of `unetback-ctl tunables`).
[[nodiscard]] std::span<const TunableSpec> tunable_specs();
[[nodiscard]] const TunableSpec* find_tunable(std::string_view name);

/// The value of `spec` in `t`, as stored in xenstore ("4", "1", "full").
[[nodiscard]] std::string format_tunable(const vif::Tunables& t, const TunableSpec& spec);

/// Parses `value` for `spec` and stores it in `t`. Returns the reason on refusal (then `t` is
/// unchanged): "not a decimal number", "8 is out of range 19..64", "expected full or legacy".
[[nodiscard]] std::optional<std::string> set_tunable(vif::Tunables& t, const TunableSpec& spec,
                                                     std::string_view value);

/// `/local/domain/<self>/unetback`.
[[nodiscard]] std::string tunables_dir(DomId self);

class TunableStore {
 public:
  /// `initial`: the defaults with the command line applied; `explicit_names`: the tunables
  /// given on the command line, which replace what a previous run left in xenstore.
  TunableStore(hv::XenStore& xs, DomId self, vif::Tunables initial,
               std::vector<std::string> explicit_names = {});
  TunableStore(const TunableStore&) = delete;
  TunableStore& operator=(const TunableStore&) = delete;

  /// Reconciles the directory with `initial` (absent, invalid or command-line keys are
  /// written; valid existing keys are adopted) and watches it. Fails only when xenstore does.
  /// Once started, a second call does nothing (the daemon starts the store before sizing its
  /// loops from it, and the manager starts it again).
  std::error_code start();

  /// The token of the directory watch.
  static constexpr std::string_view kToken = "unetback/tunables";
  [[nodiscard]] bool owns(const hv::XsWatchEvent& ev) const { return ev.token == kToken; }
  /// A key (or the directory) changed: adopt valid values, rewrite rejected or removed ones.
  void handle_watch(const hv::XsWatchEvent& ev);

  /// Reads every key again (SIGHUP), as for the directory's own event: valid values are
  /// adopted, rejected or missing ones rewritten. Returns how many values changed.
  std::size_t reload();

  [[nodiscard]] const vif::Tunables& current() const { return current_; }

  /// The control socket's `set`: validates, writes the key and adopts the value at once (the
  /// watch event that follows sees the value in force and does nothing). Returns the
  /// rejection reason, or the xenstore error, as a message.
  [[nodiscard]] std::optional<std::string> set(std::string_view name, std::string_view value);

 private:
  void reconcile(const TunableSpec& spec);
  void write_back(const TunableSpec& spec);

  hv::XenStore& xs_;
  std::string dir_;
  vif::Tunables current_;
  std::vector<std::string> explicit_names_;
  hv::XsWatch watch_;
  bool started_ = false;
  bool told_read_only_ = false;  // the directory refused a write-back (said once)
};

}  // namespace unetback::daemon
