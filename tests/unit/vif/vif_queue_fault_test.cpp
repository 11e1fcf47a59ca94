// A queue's event-loop handlers never unwind into the loop: whatever one of them throws (memory,
// a descriptor, an Asio wait refused) fails that vif, as a protocol violation does (on_fatal:
// the daemon closes it through xenbus), and the loop goes on serving the other vifs on it.
// And what the control socket's `stats` reads of a queue never waits for the queue's thread:
// a busy loop (a flood, a long pass) cannot hold a scrape, nor a scrape the guest's traffic.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <gtest/gtest.h>
#include <mutex>
#include <stdexcept>
#include <string>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "backend/vif/vif_queue.hpp"
#include "common/event/event_loop_pool.hpp"
#include "common/util/unique_fd.hpp"
#include "tests/support/in_memory_grant_table.hpp"

namespace unetback::vif {
namespace {

/// An event channel over an eventfd whose pending() throws once `fail` is set: the stand-in
/// for an unexpected failure while the queue serves a guest's event.
class ThrowingEventChannel final : public hv::EventChannel {
 public:
  ThrowingEventChannel() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  [[nodiscard]] int fd() const override { return fd_.get(); }
  Result<Port> bind_unbound(DomId) override { return Port{1}; }
  Result<Port> bind_interdomain(DomId, Port) override { return Port{1}; }
  std::error_code notify(Port) override { return {}; }
  Result<std::optional<Port>> pending() override {
    std::uint64_t n = 0;
    (void)::read(fd_.get(), &n, sizeof n);
    if (fail.load()) throw std::runtime_error("injected failure");
    return std::optional<Port>{};
  }
  std::error_code unmask(Port) override { return {}; }
  std::error_code unbind(Port) override { return {}; }
  /// The guest's kick.
  void kick() {
    const std::uint64_t one = 1;
    (void)::write(fd_.get(), &one, sizeof one);
  }
  std::atomic<bool> fail{false};

 private:
  UniqueFd fd_;
};

/// One queue over in-memory rings, a socketpair for its TAP and a ThrowingEventChannel.
struct QueueBench {
  event::EventLoopPool loops{1};
  test::Page tx_page{}, rx_page{};
  ring::TxFrontRing tx_front = ring::TxFrontRing::init(tx_page.bytes);
  ring::RxFrontRing rx_front = ring::RxFrontRing::init(rx_page.bytes);
  UniqueFd host_side;
  ThrowingEventChannel* evtchn = nullptr;

  QueueResources resources() {
    int tap[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, tap), 0);
    host_side = UniqueFd(tap[1]);
    QueueResources res;
    res.table = std::make_unique<test::InMemoryGrantTable>();
    res.tx_ring = *ring::TxBackRing::attach(tx_page.bytes);
    res.rx_ring = *ring::RxBackRing::attach(rx_page.bytes);
    auto channel = std::make_unique<ThrowingEventChannel>();
    evtchn = channel.get();
    res.evtchn = std::move(channel);
    res.tx_port = hv::BoundPort(*res.evtchn, Port{1});
    res.tap_fd = UniqueFd(tap[0]);
    res.tx.frontend = DomId{5};
    res.rx.frontend = DomId{5};
    return res;
  }
};

/// Waits until `done()` (a guard against a hang only: a run that works ends each wait long
/// before it).
template <typename F>
void until(const F& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

std::uint64_t counter(const QueueReport& r, std::string_view name) {
  for (const auto& [n, v] : r.counters)
    if (n == name) return v;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(VifQueueFaults, AHandlerThatThrowsFailsItsVifNotTheEventLoop) {
  QueueBench bench;
  auto res = bench.resources();
  ThrowingEventChannel* evtchn = bench.evtchn;
  auto& loops = bench.loops;

  std::mutex mu;
  std::string reason;
  std::atomic<int> fatal{0};
  VifQueue q(
      loops.next(1), std::move(res), "vif5.0-q0",
      [&](const std::string& why) {
        const std::lock_guard lock(mu);
        reason = why;
        ++fatal;
      },
      nullptr);
  q.start();
  evtchn->fail = true;
  evtchn->kick();
  until([&] { return fatal.load() != 0; });
  EXPECT_EQ(fatal.load(), 1) << "the throw was not reported as this vif's failure";
  {
    const std::lock_guard lock(mu);
    EXPECT_NE(reason.find("injected failure"), std::string::npos) << reason;
  }
  // The loop still serves everything else on it.
  std::atomic<bool> ran{false};
  loops.next(1).post([&ran] { ran = true; });
  until([&] { return ran.load(); });
  EXPECT_TRUE(ran.load());
  q.stop();
}

// The guest posts RX buffers and kicks while the control socket asks for the queue's report;
// then the queue's thread is held busy (as by a long pass) and the report is asked again.
// Both answer at once, with the rings' indices as the queue's thread last saw them.
TEST(VifQueueReports, AReportNeverWaitsForTheQueuesThread) {
  QueueBench bench;
  VifQueue q(
      bench.loops.next(1), bench.resources(), "vif5.0-q0", [](const std::string&) {}, nullptr);
  q.start();
  for (std::uint32_t i = 0; i < 8; ++i) bench.rx_front.put_request(wire::RxRequest{});
  (void)bench.rx_front.push_requests();
  bench.evtchn->kick();
  until([&] { return q.report().rx_ring.req_prod == 8 && counter(q.report(), "events") >= 1; });
  EXPECT_EQ(q.report().rx_ring.req_prod, 8U) << "the guest's RX requests after its kick";

  std::promise<void> release;
  std::atomic<bool> busy{false};
  bench.loops.next(1).post([&busy, held = release.get_future().share()] {
    busy = true;
    (void)held.wait_for(std::chrono::seconds(60));
  });
  until([&] { return busy.load(); });
  auto report = std::async(std::launch::async, [&q] { return q.report(); });
  const bool answered = report.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  release.set_value();
  ASSERT_TRUE(answered) << "the report waited for the busy queue thread";
  const QueueReport r = report.get();
  EXPECT_EQ(r.rx_ring.req_prod, 8U);
  EXPECT_EQ(counter(r, "rx_queued_bytes"), 0U);
  EXPECT_GE(counter(r, "events"), 1U);
  q.stop();
}

}  // namespace
}  // namespace unetback::vif
