// Loss accounting from the sender's sequence numbers: a pure class, fed one sequence number
// per received datagram. The sender numbers its datagrams 0, 1, 2, ...; the receiver counts
// the distinct numbers it saw, so
//
//   lost = highest + 1 - distinct
//
// Datagrams sent after the receiver's window closed are above `highest` and so never count
// as lost. A duplicate (the same number twice) is counted apart and not as a delivery; a
// datagram older than the reorder window (kWindow numbers behind the highest) can no longer
// be told from a duplicate and is counted as `late`, not delivered.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace unetback::udpflow {

/// The sequence number's size on the wire: the payload's first 8 bytes, big-endian.
inline constexpr std::size_t kSeqLen = 8;

/// Writes `seq` into the first kSeqLen bytes of `payload` (which must hold that many).
void encode_seq(std::span<std::byte> payload, std::uint64_t seq);
/// Reads the sequence number of a payload of at least kSeqLen bytes (nullopt if shorter).
[[nodiscard]] std::optional<std::uint64_t> decode_seq(std::span<const std::byte> payload);

class SeqTracker {
 public:
  /// Numbers this far behind the highest are still recognised as reordered or duplicate.
  static constexpr std::uint64_t kWindow = 1u << 16;

  SeqTracker();

  void on_packet(std::uint64_t seq);

  [[nodiscard]] bool empty() const { return !highest_; }
  [[nodiscard]] std::optional<std::uint64_t> highest() const { return highest_; }
  /// Distinct numbers seen (within the window).
  [[nodiscard]] std::uint64_t distinct() const { return distinct_; }
  [[nodiscard]] std::uint64_t duplicates() const { return duplicates_; }
  /// Delivered after a higher number (late, but within the window).
  [[nodiscard]] std::uint64_t reordered() const { return reordered_; }
  /// Arrived more than kWindow behind the highest: not counted as delivered.
  [[nodiscard]] std::uint64_t late() const { return late_; }
  /// highest + 1 - distinct (0 before the first packet).
  [[nodiscard]] std::uint64_t lost() const;

 private:
  [[nodiscard]] bool test(std::uint64_t seq) const;
  void set(std::uint64_t seq, bool on);

  std::vector<std::uint64_t> seen_;  // kWindow bits: bit (seq % kWindow) for the last numbers
  std::optional<std::uint64_t> highest_;
  std::uint64_t distinct_ = 0, duplicates_ = 0, reordered_ = 0, late_ = 0;
};

}  // namespace unetback::udpflow
