// Xenbus states in tests: a state node read as a XenbusState (common/xenbus), and gtest
// printing a state by the name Linux gives it ("Connected", "Closing"), so that an assertion
// on a state says which one it met.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>

#include "common/hv/xenstore.hpp"
#include "common/xenbus/xenbus_state.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::xenbus {

/// How gtest prints a XenbusState (found by argument-dependent lookup): its name and number.
inline void PrintTo(XenbusState s, std::ostream* os) {
  *os << state_name(s) << " (" << to_xs_string(s) << ")";
}

}  // namespace unetback::xenbus

namespace unetback::test {

using xenbus::XenbusState;

/// The state in node `path` (a "state" node) of the store `xs` (anything with
/// `read(path) -> optional-like of string`): nullopt when the node is absent or does not hold
/// a valid state.
template <typename Store>
[[nodiscard]] std::optional<XenbusState> read_state(Store& xs, const std::string& path) {
  const auto v = xs.read(path);
  if (!v) return std::nullopt;
  return xenbus::parse_xenbus_state(*v);
}

/// Waits (bounded by `t`) until the state node `path` of `xs` holds `s`, as libxl waits.
inline std::error_code wait_for_state(hv::XenStore& xs, const std::string& path, XenbusState s,
                                      std::chrono::milliseconds t) {
  return toolstack::wait_for_value(xs, path, xenbus::to_xs_string(s), t);
}

/// A state for a failure message: "Connected (4)", or "(none)".
[[nodiscard]] inline std::string describe(std::optional<XenbusState> s) {
  if (!s) return "(none)";
  return std::string(xenbus::state_name(*s)) + " (" + xenbus::to_xs_string(*s) + ")";
}

}  // namespace unetback::test
