// MapChooser: whether a guest-TX pass to a TAP grant-maps its big packets or grant-copies
// them, chosen by what each way costs here, as measured.
//
// Which way wins depends on the host, not on the packet. Mapping costs a fixed price per pass
// (a gntdev map ioctl, an mmap, a munmap and an unmap ioctl; in a PV dom0 each of them is a
// trip through Xen, and the munmap a TLB flush) and nothing per byte; copying costs Xen a
// memcpy per byte and one grant-copy call for the whole pass. Measured in the real-Xen lab's
// PV dom0 (perf, guest TX, mapping): map + unmap took 36 % of unetbackd's time, the TAP write
// 18 %; the copying daemon made 1.8 syscalls per packet against 4.1. On xensim a map is a
// lookup. So `auto` measures: each pass's cost (the caller's clock, ns) per byte it carried,
// an average kept per way, and every pass goes the cheaper way, except one pass in
// `kExploreEvery`, which goes the other way so its figure stays current (a host whose load
// changes flips the choice within a few hundred passes).
//
// Timing a pass costs two clock reads, and in a PV dom0 without a vDSO clock each is a syscall
// through Xen: so not every pass is timed (time_this_pass). Warm-up and exploring passes are;
// of the others, one in kTimeEvery, enough for averages that move by 1/kWeight a sample.
//
// `always` and `never` fix the choice (the tunable tx-map). The packets a pass copies anyway
// (shorter than goodcopy-len, PendingLimiter) are the caller's business: only a pass that
// carried bytes that could have been mapped is a sample.
//
// Pure: no clock of its own, no syscall, no allocation. One per queue, used from its thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace unetback::zerocopy {

enum class MapMode : std::uint8_t { auto_choice, always, never };

[[nodiscard]] std::string_view map_mode_name(MapMode m);
[[nodiscard]] std::optional<MapMode> parse_map_mode(std::string_view s);

class MapChooser {
 public:
  /// Of every this many passes with a sample, one goes the way that is not the cheaper one.
  static constexpr std::uint32_t kExploreEvery = 32;
  /// Samples of each way before the averages decide (until then the ways alternate).
  static constexpr std::uint32_t kWarmupSamples = 8;
  /// The averages' weight of a new sample: 1/kWeight.
  static constexpr std::uint32_t kWeight = 16;
  /// Of the passes that go the cheaper way (or the fixed way of `always` / `never`), one in
  /// this many is timed.
  static constexpr std::uint32_t kTimeEvery = 8;
  /// A sample counts at most this many times the way's average (a pass that was preempted
  /// or met a page fault must not decide for the next few hundred).
  static constexpr std::uint32_t kOutlierFactor = 4;

  explicit MapChooser(MapMode mode = MapMode::auto_choice) : mode_(mode) {}

  [[nodiscard]] MapMode mode() const { return mode_; }

  /// Whether the pass under way maps its big packets (true) or copies them. Ask once per pass,
  /// at its first packet that could be mapped, and record() that pass if time_this_pass().
  [[nodiscard]] bool map_this_pass();

  /// Whether the pass map_this_pass() last chose is to be timed and record()ed (the others
  /// are not samples: record() only the timed ones).
  [[nodiscard]] bool time_this_pass() const { return time_pass_; }

  /// The pass ran (`mapped`: the way map_this_pass() chose); it carried `bytes` that could have
  /// been mapped and took `ns` in all. Passes with bytes == 0 are not samples.
  void record(bool mapped, std::uint64_t bytes, std::uint64_t ns);

  /// The averages, in ns per KiB carried (0 before the first sample of that way).
  [[nodiscard]] std::uint64_t map_ns_per_kib() const { return ns_per_kib(map_); }
  [[nodiscard]] std::uint64_t copy_ns_per_kib() const { return ns_per_kib(copy_); }
  /// Passes recorded as mapped / copied.
  [[nodiscard]] std::uint64_t mapped_passes() const { return map_.passes; }
  [[nodiscard]] std::uint64_t copied_passes() const { return copy_.passes; }

 private:
  struct Way {
    std::uint64_t samples = 0;
    std::uint64_t passes = 0;
    double ns_per_byte = 0;  // weighted average
  };
  /// One pass more of the kind that is timed one in kTimeEvery: is it that one?
  bool timed_in_turn() {
    if (++since_timed_ < kTimeEvery) return false;
    since_timed_ = 0;
    return true;
  }
  static std::uint64_t ns_per_kib(const Way& w) {
    return static_cast<std::uint64_t>(w.ns_per_byte * 1024.0 + 0.5);
  }

  MapMode mode_;
  Way map_, copy_;
  std::uint32_t since_explore_ = 0;
  std::uint32_t since_timed_ = 0;
  bool time_pass_ = false;
};

}  // namespace unetback::zerocopy
