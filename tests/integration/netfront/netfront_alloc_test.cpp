// Heap allocations per packet on the netfront-shim's data path in a steady stream (issue 16:
// none after warm-up). This binary replaces the global operator new/delete with counting
// versions. Only what the frontend does is counted (the calls made inside a Counting scope:
// Netfront's send/poll/handle_event and the shim's TAP writer), not the test backend, which
// allocates freely.
#include <atomic>
#include <cstdlib>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <memory>
#include <new>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/net/frame_builder.hpp"
#include "common/util/unique_fd.hpp"
#include "frontend-shim/netfront.hpp"
#include "frontend-shim/tap_rx_writer.hpp"
#include "tests/integration/netfront/netfront_world.hpp"
#include "tests/integration/netfront/test_backend.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/counting_allocator.hpp"

namespace unetback::test {
namespace {

using namespace std::chrono_literals;
using netfront::Netfront;
using netfront::RxGso;
using netfront::TxMeta;

using Counting = alloc_count::ThisThread;

/// One guest-RX pass of the shim (a function of its own: callgrind --toggle-collect counts
/// the instructions per packet in it).
[[gnu::noinline]] std::size_t frontend_rx_pass(Netfront& nf, shim::TapRxWriter& writer) {
  Counting c;
  (void)nf.handle_event();
  return nf.poll(writer);
}

constexpr int kWarmUp = 1000;   // several laps of the 256-slot rings
constexpr int kPackets = 5000;  // then the counted stream

class SteadyStream : public NetfrontWorldTest {
 protected:
  void SetUp() override {
    NetfrontWorldTest::SetUp();
    backend_->advertise({});
    nf_ = std::make_unique<Netfront>(*domu_, netfront::NetfrontOptions{});
    ASSERT_FALSE(nf_->connect(30s));  // a hang guard
    ASSERT_TRUE(backend_->attach(0));
  }

  static std::vector<std::byte> tcp_frame(std::size_t payload) {
    net::FrameSpec spec;
    spec.payload_len = payload;
    spec.checksum = net::L4ChecksumMode::partial;
    return net::build_frame(spec);
  }
};

// Host -> guest: the backend fills the RX ring in bursts; the frontend takes each burst as
// the shim does (handle_event, then poll into the TAP writer, refill by seed 002's rule).
TEST_F(SteadyStream, GuestRxAllocatesNothingPerPacketAfterWarmUp) {
  UniqueFd devnull(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(devnull);
  shim::TapRxWriter writer;
  writer.set_fd(devnull.get());
  // MTU-sized segments and TSO super-frames (GSO extra, 16 slots), as tcp1 host->guest.
  const auto mtu = tcp_frame(1448), tso = tcp_frame(60000);
  const RxGso gso{wire::GsoType::tcpv4, 1448};
  const auto flags = wire::RxFlag::csum_blank | wire::RxFlag::data_validated;
  std::uint64_t delivered = 0;
  auto stream = [&](int packets) {
    for (int sent = 0; sent < packets;) {
      int burst = 0;
      for (; burst < 24 && sent + burst < packets; ++burst) {
        const bool big = (sent + burst) % 4 == 0;
        if (!backend_->deliver_rx(big ? tso : mtu, big ? std::optional(gso) : std::nullopt, flags))
          break;
      }
      ASSERT_GT(burst, 0) << "the frontend stopped posting RX buffers";
      const std::size_t got = frontend_rx_pass(*nf_, writer);
      ASSERT_EQ(got, static_cast<std::size_t>(burst));
      sent += burst;
      delivered += burst;
      (void)backend_->drain_events();
    }
  };
  stream(kWarmUp);
  alloc_count::reset();
  stream(kPackets);
  const std::uint64_t allocs = alloc_count::count();
  EXPECT_EQ(writer.written(), delivered);
  EXPECT_EQ(writer.dropped(), 0U);
  EXPECT_EQ(allocs, 0U) << static_cast<double>(allocs) / kPackets << " allocations per packet";
  EXPECT_GT(nf_->stats().rx_refills, 0U);
}

// Guest -> host: frames sent as the shim sends them (a TxBuffer written and sent; small
// frames copied, large ones zerocopy under the PendingLimiter), answered by the backend in
// batches, the responses taken by handle_event.
TEST_F(SteadyStream, GuestTxAllocatesNothingPerPacketAfterWarmUp) {
  const auto small = tcp_frame(100), mtu = tcp_frame(1448), tso = tcp_frame(60000);
  TxMeta meta;
  meta.csum_blank = true;
  meta.data_validated = true;
  TxMeta tso_meta = meta;
  tso_meta.gso = RxGso{wire::GsoType::tcpv4, 1448};
  std::uint64_t answered = 0;
  auto stream = [&](int packets) {
    for (int sent = 0; sent < packets;) {
      int burst = 0;
      for (; burst < 8 && sent + burst < packets; ++burst) {
        const int kind = (sent + burst) % 3;
        const auto& frame = kind == 0 ? small : kind == 1 ? mtu : tso;
        bool ok = false;
        {
          Counting c;
          auto b = nf_->alloc_tx_buffer(frame.size());
          ok = b && b->write(0, frame) && nf_->send(std::move(*b), kind == 2 ? tso_meta : meta);
        }
        ASSERT_TRUE(ok) << "frame " << sent + burst;
      }
      for (int i = 0; i < burst; ++i) {
        auto got = backend_->receive_tx();
        ASSERT_TRUE(got);
        ASSERT_TRUE(got->copy_ok);
        ++answered;
      }
      {
        Counting c;
        (void)nf_->handle_event();
        nf_->process_tx_responses();
      }
      sent += burst;
      (void)backend_->drain_events();
    }
  };
  stream(kWarmUp);
  alloc_count::reset();
  stream(kPackets);
  const std::uint64_t allocs = alloc_count::count();
  const auto st = nf_->stats();
  EXPECT_EQ(st.tx_completed, answered);
  EXPECT_GT(st.tx_zerocopy, 0U);
  EXPECT_GT(st.tx_copy, 0U);
  EXPECT_EQ(allocs, 0U) << static_cast<double>(allocs) / kPackets << " allocations per packet";
}

}  // namespace
}  // namespace unetback::test
