// RingQueue: a FIFO of T in one growable circular buffer. Unlike std::deque (one node per
// element once an element is larger than its 512-byte blocks, as RxPacket is), a steady
// stream allocates nothing once the buffer has grown to the stream's depth: push_back only
// allocates when the queue is deeper than ever before (the capacity doubles).
//
// Single-threaded, like the path that owns it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace unetback::vif {

template <typename T>
class RingQueue {
 public:
  explicit RingQueue(std::size_t initial_capacity = 16) { grow(initial_capacity); }
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;

  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t capacity() const { return cap_; }

  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& operator[](std::size_t i) { return buf_[(head_ + i) & (cap_ - 1)]; }

  void push_back(T&& v) {
    if (size_ == cap_) grow(cap_ * 2);
    buf_[(head_ + size_) & (cap_ - 1)] = std::move(v);
    ++size_;
  }
  /// The slot is left moved-from (T's resources, if any, were moved out by the caller or are
  /// dropped here).
  void pop_front() {
    buf_[head_] = T{};
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  /// Removes every element for which pred(element) is true (after pred ran on it), keeping
  /// the others in order.
  template <typename Pred>
  std::size_t remove_if(Pred&& pred) {
    std::size_t kept = 0;
    const std::size_t n = size_;
    for (std::size_t i = 0; i < n; ++i) {
      T& e = (*this)[i];
      if (pred(e)) continue;
      if (kept != i) (*this)[kept] = std::move(e);
      ++kept;
    }
    for (std::size_t i = kept; i < n; ++i) (*this)[i] = T{};
    size_ = kept;
    return n - kept;
  }

 private:
  void grow(std::size_t cap) {
    std::size_t c = 1;
    while (c < cap) c *= 2;  // a power of two: indices wrap with a mask
    auto next = std::make_unique<T[]>(c);
    for (std::size_t i = 0; i < size_; ++i) next[i] = std::move((*this)[i]);
    buf_ = std::move(next);
    cap_ = c;
    head_ = 0;
  }

  std::unique_ptr<T[]> buf_;
  std::size_t cap_ = 0, head_ = 0, size_ = 0;
};

}  // namespace unetback::vif
