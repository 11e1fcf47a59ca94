#include "tools/udpflow/seq_tracker.hpp"

#include <algorithm>

namespace unetback::udpflow {

void encode_seq(std::span<std::byte> payload, std::uint64_t seq) {
  for (std::size_t i = 0; i < kSeqLen; ++i)
    payload[i] = static_cast<std::byte>(seq >> (8 * (kSeqLen - 1 - i)));
}

std::optional<std::uint64_t> decode_seq(std::span<const std::byte> payload) {
  if (payload.size() < kSeqLen) return std::nullopt;
  std::uint64_t seq = 0;
  for (std::size_t i = 0; i < kSeqLen; ++i)
    seq = (seq << 8) | std::to_integer<std::uint64_t>(payload[i]);
  return seq;
}

SeqTracker::SeqTracker() : seen_(kWindow / 64, 0) {}

bool SeqTracker::test(std::uint64_t seq) const {
  const std::uint64_t bit = seq % kWindow;
  return (seen_[bit / 64] >> (bit % 64)) & 1u;
}

void SeqTracker::set(std::uint64_t seq, bool on) {
  const std::uint64_t bit = seq % kWindow;
  const std::uint64_t mask = std::uint64_t{1} << (bit % 64);
  if (on)
    seen_[bit / 64] |= mask;
  else
    seen_[bit / 64] &= ~mask;
}

void SeqTracker::on_packet(std::uint64_t seq) {
  if (!highest_ || seq > *highest_) {
    // The window slides forward: forget the numbers that fall out of it (all of them after
    // a jump of a whole window or more).
    const std::uint64_t from = highest_ ? *highest_ + 1 : 0;
    if (seq - from >= kWindow) {
      std::fill(seen_.begin(), seen_.end(), 0);
    } else {
      for (std::uint64_t s = from; s < seq; ++s) set(s, false);
    }
    set(seq, true);
    highest_ = seq;
    ++distinct_;
    return;
  }
  if (*highest_ - seq >= kWindow) {
    ++late_;
    return;
  }
  if (test(seq)) {
    ++duplicates_;
    return;
  }
  set(seq, true);
  ++distinct_;
  ++reordered_;
}

std::uint64_t SeqTracker::lost() const {
  return highest_ ? *highest_ + 1 - distinct_ : 0;
}

}  // namespace unetback::udpflow
