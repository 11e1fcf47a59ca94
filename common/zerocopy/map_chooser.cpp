#include "common/zerocopy/map_chooser.hpp"

#include <algorithm>

namespace unetback::zerocopy {

std::string_view map_mode_name(MapMode m) {
  switch (m) {
    case MapMode::auto_choice: return "auto";
    case MapMode::always: return "always";
    case MapMode::never: return "never";
  }
  return "auto";
}

std::optional<MapMode> parse_map_mode(std::string_view s) {
  for (MapMode m : {MapMode::auto_choice, MapMode::always, MapMode::never})
    if (s == map_mode_name(m)) return m;
  return std::nullopt;
}

bool MapChooser::map_this_pass() {
  if (mode_ != MapMode::auto_choice) {  // always / never: the fixed way
    time_pass_ = timed_in_turn();
    return mode_ == MapMode::always;
  }
  // Until both ways have their samples: the one with fewer goes next.
  if (map_.samples < kWarmupSamples || copy_.samples < kWarmupSamples) {
    time_pass_ = true;
    return map_.samples <= copy_.samples;
  }
  const bool map_cheaper = map_.ns_per_byte <= copy_.ns_per_byte;
  if (++since_explore_ >= kExploreEvery) {
    since_explore_ = 0;
    time_pass_ = true;
    return !map_cheaper;
  }
  time_pass_ = timed_in_turn();
  return map_cheaper;
}

void MapChooser::record(bool mapped, std::uint64_t bytes, std::uint64_t ns) {
  if (bytes == 0) return;
  Way& w = mapped ? map_ : copy_;
  ++w.passes;
  double sample = static_cast<double>(ns) / static_cast<double>(bytes);
  if (w.samples == 0) {
    w.ns_per_byte = sample;
  } else {
    sample = std::min(sample, w.ns_per_byte * kOutlierFactor);
    w.ns_per_byte += (sample - w.ns_per_byte) / kWeight;
  }
  ++w.samples;
}

}  // namespace unetback::zerocopy
