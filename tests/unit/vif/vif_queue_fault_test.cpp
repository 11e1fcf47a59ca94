// A queue's event-loop handlers never unwind into the loop: whatever one of them throws (memory,
// a descriptor, an Asio wait refused) fails that vif, as a protocol violation does (on_fatal:
// the daemon closes it through xenbus), and the loop goes on serving the other vifs on it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <gtest/gtest.h>
#include <mutex>
#include <stdexcept>
#include <string>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "backend/vif/event_loop_pool.hpp"
#include "backend/vif/vif_queue.hpp"
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

TEST(VifQueueFaults, AHandlerThatThrowsFailsItsVifNotTheEventLoop) {
  EventLoopPool loops(1);
  test::Page tx_page{}, rx_page{};
  (void)ring::TxFrontRing::init(tx_page.bytes);
  (void)ring::RxFrontRing::init(rx_page.bytes);
  int tap[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, tap), 0);
  UniqueFd host_side(tap[1]);

  QueueResources res;
  res.table = std::make_unique<test::InMemoryGrantTable>();
  res.tx_ring = *ring::TxBackRing::attach(tx_page.bytes);
  res.rx_ring = *ring::RxBackRing::attach(rx_page.bytes);
  auto channel = std::make_unique<ThrowingEventChannel>();
  ThrowingEventChannel* evtchn = channel.get();
  res.evtchn = std::move(channel);
  res.tx_port = hv::BoundPort(*res.evtchn, Port{1});
  res.tap_fd = UniqueFd(tap[0]);
  res.tx.frontend = DomId{5};
  res.rx.frontend = DomId{5};

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
  // Guards against a hang only: a run that works ends each wait long before it.
  const auto until = [](const auto& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
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

}  // namespace
}  // namespace unetback::vif
