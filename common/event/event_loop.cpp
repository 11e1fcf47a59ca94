#include "common/event/event_loop.hpp"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <exception>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::event {
namespace {

thread_local const EventLoop* tl_current = nullptr;

// The eventfd and the timerfd are told apart from slots by these addresses.
char wake_tag;
char timer_tag;

UniqueFd must(int fd, const char* what) {
  if (fd < 0) {
    const auto ec = last_errno();
    throw SetupError(std::string(what) + ": " + ec.message(), ec);
  }
  return UniqueFd(fd);
}

void add_edge(int ep, int fd, void* tag) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.ptr = tag;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
    const auto ec = last_errno();
    throw SetupError("epoll_ctl: " + ec.message(), ec);
  }
}

std::error_code canceled() {
  return std::make_error_code(std::errc::operation_canceled);
}

}  // namespace

EventLoop::EventLoop(std::string name)
    : name_(std::move(name)),
      epoll_(must(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1")),
      wake_fd_(must(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd")),
      timer_fd_(must(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd")) {
  // Both edge-triggered and never read: each write or expiry is a new edge, and an eventfd's
  // counter would take 2^64 writes to fill (timerfd_settime resets the timer's).
  add_edge(epoll_.get(), wake_fd_.get(), &wake_tag);
  add_edge(epoll_.get(), timer_fd_.get(), &timer_tag);
  ready_.reserve(64);
  running_.reserve(64);
  remote_.reserve(64);
}

EventLoop::~EventLoop() = default;

bool EventLoop::in_loop_thread() const {
  return tl_current == this;
}

void EventLoop::post(Task t) {
  if (tl_current == this) {
    ready_.push_back(std::move(t));
    return;
  }
  {
    const std::lock_guard lock(mu_);
    remote_.push_back(std::move(t));
    remote_pending_.store(true, std::memory_order_seq_cst);
  }
  // The loop sets sleeping_ and then looks at remote_pending_; we set remote_pending_ and then
  // look at sleeping_: one of the two sees the other's store.
  if (sleeping_.load(std::memory_order_seq_cst) && !wake_sent_.exchange(true)) {
    stats_.wakes.fetch_add(1, std::memory_order_relaxed);
    wake();
  }
}

void EventLoop::stop() {
  stop_.store(true, std::memory_order_seq_cst);
  wake();
}

void EventLoop::wake() noexcept {
  const std::uint64_t one = 1;
  // EAGAIN only at a counter of 2^64 - 2: a wake-up is pending then anyway.
  (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

template <typename F, typename... A>
void EventLoop::call_logged(F& f, A&&... a) noexcept {
  // The data paths catch their own (loop_handler.hpp); this keeps the loop and every other
  // queue on it alive if something else throws.
  try {
    f(std::forward<A>(a)...);
  } catch (const std::exception& e) {
    log::write(log::Level::error, name_, e.what());
  } catch (...) {
    log::write(log::Level::error, name_, "unknown exception");
  }
}

void EventLoop::take_remote() {
  {
    const std::lock_guard lock(mu_);
    running_.swap(remote_);
    remote_pending_.store(false, std::memory_order_relaxed);
  }
  for (auto& t : running_) ready_.push_back(std::move(t));
  running_.clear();
}

void EventLoop::run_tasks() {
  // A round: what was posted before it. What its tasks post runs in the next round, after
  // the descriptors were looked at again (a queue that yields lets the others in).
  running_.swap(ready_);
  for (auto& t : running_) {
    call_logged(t);
    t.reset();  // its HandlerToken goes now (stop() waits for the last one)
  }
  running_.clear();
}

void EventLoop::run() {
  tl_current = this;
  std::array<epoll_event, 64> events{};
  while (!stop_.load(std::memory_order_acquire)) {
    if (have_dead_.load(std::memory_order_acquire)) recycle_slots();
    if (remote_pending_.load(std::memory_order_acquire)) take_remote();
    run_tasks();
    if (remote_pending_.load(std::memory_order_acquire)) take_remote();
    int timeout = 0;
    if (ready_.empty()) {
      sleeping_.store(true, std::memory_order_seq_cst);
      if (remote_pending_.load(std::memory_order_seq_cst) || stop_.load()) {
        sleeping_.store(false, std::memory_order_relaxed);
        continue;
      }
      timeout = -1;
      stats_.sleeps.fetch_add(1, std::memory_order_relaxed);
    }
    stats_.waits.fetch_add(1, std::memory_order_relaxed);
    const int n =
        ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout);
    if (timeout != 0) {
      sleeping_.store(false, std::memory_order_relaxed);
      wake_sent_.store(false, std::memory_order_relaxed);
    }
    for (int i = 0; i < n; ++i) {
      void* tag = events[static_cast<std::size_t>(i)].data.ptr;
      if (tag == &wake_tag) continue;  // the posts are taken at the top
      if (tag == &timer_tag) {
        fire_timers();
        continue;
      }
      on_ready(static_cast<Slot*>(tag));
    }
  }
  tl_current = nullptr;
}

void EventLoop::on_ready(Slot* s) {
  if (s->dead.load(std::memory_order_acquire)) return;  // closed after the event was taken
  s->ready = true;
  if (!s->handler) return;  // remembered for the next wait
  Handler h = std::move(s->handler);
  call_logged(h, std::error_code{});
}

EventLoop::Slot* EventLoop::open_slot(int fd) {
  Slot* s = nullptr;
  {
    const std::lock_guard lock(mu_);
    if (free_.empty()) {
      slots_.push_back(std::make_unique<Slot>());
      s = slots_.back().get();
    } else {
      s = free_.back();
      free_.pop_back();
    }
  }
  s->fd = fd;
  s->ready = false;
  s->dead.store(false, std::memory_order_release);
  try {
    add_edge(epoll_.get(), fd, s);
  } catch (...) {
    s->dead.store(true, std::memory_order_release);
    const std::lock_guard lock(mu_);
    free_.push_back(s);
    throw;
  }
  return s;
}

void EventLoop::close_slot(Slot* s) noexcept {
  // Fails only if the fd is gone already (its registration went with it).
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->fd, nullptr);
  s->dead.store(true, std::memory_order_release);
  const std::lock_guard lock(mu_);
  dead_.push_back(s);
  have_dead_.store(true, std::memory_order_release);
}

void EventLoop::recycle_slots() {
  const std::lock_guard lock(mu_);
  for (Slot* s : dead_) {
    s->handler.reset();
    s->ready = false;
    free_.push_back(s);
  }
  dead_.clear();
  have_dead_.store(false, std::memory_order_relaxed);
}

void EventLoop::arm_timer(LoopTimer* t) {
  timers_.push_back(t);
  if (t->expiry_ < programmed_) {
    programmed_ = t->expiry_;
    program_timerfd();
  }
}

void EventLoop::disarm_timer(LoopTimer* t) noexcept {
  // The timerfd stays set: if it fires for nothing, fire_timers sets it to the next expiry.
  auto it = std::find(timers_.begin(), timers_.end(), t);
  if (it == timers_.end()) return;
  *it = timers_.back();
  timers_.pop_back();
}

void EventLoop::program_timerfd() {
  itimerspec its{};
  if (programmed_ != Clock::time_point::max()) {
    // steady_clock is CLOCK_MONOTONIC: an absolute expiry on its time line. A time already
    // past fires at once.
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(programmed_.time_since_epoch())
            .count();
    its.it_value.tv_sec = static_cast<time_t>(std::max<std::int64_t>(ns, 1) / 1'000'000'000);
    its.it_value.tv_nsec = static_cast<long>(std::max<std::int64_t>(ns, 1) % 1'000'000'000);
  }
  stats_.timer_sets.fetch_add(1, std::memory_order_relaxed);
  (void)::timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
}

void EventLoop::fire_timers() {
  const auto now = Clock::now();
  programmed_ = Clock::time_point::max();  // the timerfd is one-shot: it is unset now
  std::vector<Handler>& due = due_timers_;
  for (std::size_t i = 0; i < timers_.size();) {
    LoopTimer* t = timers_[i];
    if (t->expiry_ <= now) {
      t->armed_ = false;
      due.push_back(std::move(t->handler_));  // no allocation once it has grown
      timers_[i] = timers_.back();
      timers_.pop_back();
    } else {
      ++i;
    }
  }
  Clock::time_point next = Clock::time_point::max();
  for (const LoopTimer* t : timers_) next = std::min(next, t->expiry_);
  if (next != Clock::time_point::max()) {
    programmed_ = next;
    program_timerfd();
  }
  for (auto& h : due) {
    call_logged(h, std::error_code{});
  }
  due.clear();
}

void LoopWatch::watch(int fd) {
  close();
  slot_ = loop_->open_slot(fd);
}

void LoopWatch::async_wait(EventLoop::Handler h) {
  if (slot_ == nullptr) {
    loop_->post(
        [h = std::move(h)]() mutable { h(std::make_error_code(std::errc::bad_file_descriptor)); });
    return;
  }
  if (slot_->ready) {
    // Still ready from an edge the reader has not drained: complete now, after this handler.
    loop_->post([h = std::move(h)]() mutable { h({}); });
    return;
  }
  slot_->handler = std::move(h);
}

void LoopWatch::cancel() {
  if (slot_ == nullptr || !slot_->handler) return;
  loop_->post([h = std::move(slot_->handler)]() mutable { h(canceled()); });
}

void LoopWatch::close() noexcept {
  if (slot_ == nullptr) return;
  try {
    cancel();
  } catch (...) {
    slot_->handler.reset();  // no memory to post it: it is dropped, its token with it
  }
  loop_->close_slot(std::exchange(slot_, nullptr));
}

void LoopTimer::async_wait(EventLoop::Handler h) {
  if (armed_) cancel();
  handler_ = std::move(h);
  armed_ = true;
  loop_->arm_timer(this);
}

std::size_t LoopTimer::cancel() noexcept {
  if (!armed_) return 0;
  armed_ = false;
  loop_->disarm_timer(this);
  try {
    loop_->post([h = std::move(handler_)]() mutable { h(canceled()); });
  } catch (...) {
    handler_.reset();
  }
  return 1;
}

}  // namespace unetback::event
