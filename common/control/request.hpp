// The control socket's requests: one line each, words separated by single spaces or tabs.
//
//   list                      the vifs, their xenbus states, TAP, connected, carrier
//   stats [<domid>/<devid>]   per-queue counters (every vif, or one)
//   rings <domid>/<devid>     per-queue ring indices
//   tunables                  every daemon-wide tunable and its value in force
//   get <tunable>             one tunable's value in force
//   set <tunable> <value>     change a tunable (through xenstore; validated like a watch)
//   status                    the daemon: pid, program, when this image started, version
//   upgrade                   hand every vif over and execute the program file again in place
//
// Parsing is pure and strict: an unknown verb, a missing or extra argument, or a malformed vif
// id is an error message for the client, never an exception.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/control/vif_id.hpp"

namespace unetback::control {

/// A verb and how many arguments it takes.
struct VerbSpec {
  std::string_view name;
  std::size_t min_args;
  std::size_t max_args;
};

/// Every verb the daemon answers, in the order its "unknown request" message lists them.
inline constexpr VerbSpec kVerbs[] = {{"list", 0, 0},     {"stats", 0, 1},  {"rings", 1, 1},
                                      {"tunables", 0, 0}, {"get", 1, 1},    {"set", 2, 2},
                                      {"status", 0, 0},   {"upgrade", 0, 0}};

/// `name`'s entry in kVerbs, or null.
[[nodiscard]] const VerbSpec* find_verb(std::string_view name);

struct ListRequest {
  friend bool operator==(const ListRequest&, const ListRequest&) = default;
};
struct StatsRequest {
  std::optional<VifId> vif;
  friend bool operator==(const StatsRequest&, const StatsRequest&) = default;
};
struct RingsRequest {
  VifId vif;
  friend bool operator==(const RingsRequest&, const RingsRequest&) = default;
};
struct TunablesRequest {
  friend bool operator==(const TunablesRequest&, const TunablesRequest&) = default;
};
struct GetRequest {
  std::string name;
  friend bool operator==(const GetRequest&, const GetRequest&) = default;
};
struct SetRequest {
  std::string name;
  std::string value;
  friend bool operator==(const SetRequest&, const SetRequest&) = default;
};

struct StatusRequest {
  friend bool operator==(const StatusRequest&, const StatusRequest&) = default;
};
struct UpgradeRequest {
  friend bool operator==(const UpgradeRequest&, const UpgradeRequest&) = default;
};

using Request = std::variant<ListRequest, StatsRequest, RingsRequest, TunablesRequest, GetRequest,
                             SetRequest, StatusRequest, UpgradeRequest>;

/// A request, or the message explaining what is wrong with the line.
using ParsedRequest = std::variant<Request, std::string>;

/// Parses one line (without its newline; a trailing '\r' is tolerated).
[[nodiscard]] ParsedRequest parse_request(std::string_view line);

}  // namespace unetback::control
