// The hostile suite's world: a real xensim, the daemon's own control plane in this process
// (BackendManager + TunableStore + the real vif layer, pumped as ManagerLoop does), one
// well-behaved guest (the userspace Netfront, with a packet socket on its TAP) whose traffic
// is measured in every test, and any number of HostileFrontends. The whole process runs in a
// private network namespace (root): suite `hostile`.
//
// What every scenario checks, beside its own rule (docs/security.md):
//  * the backend survives: the good guest's packets, both ways, all arrive (sent == received),
//    measured after the attack (and, for floods, during it);
//  * no leak once the bad vif is gone: the bad guest's grants unmapped, the process's fds and
//    mappings back to their baseline, the TAP gone, the manager holds no vif for it;
//  * the log is rate-limited: the lines naming the bad vif stay under a small bound however
//    much the guest misbehaves (log::set_sink counts them).
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <mutex>
#include <net/if.h>
#include <poll.h>
#include <set>
#include <thread>
#include <unistd.h>

#include "backend/daemon/backend_manager.hpp"
#include "backend/daemon/tunables.hpp"
#include "backend/vif/vif.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/net/frame_builder.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"
#include "frontend-shim/netfront.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/figure.hpp"
#include "tests/support/hostile_frontend.hpp"
#include "tests/support/private_netns.hpp"
#include "tests/support/sim_guest.hpp"
#include "tests/support/wait.hpp"
#include "tests/support/xenbus_state.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::test {

using namespace std::chrono_literals;

/// Counts of the process's resources, to compare against a baseline.
struct Resources {
  std::size_t fds = 0;
  std::size_t maps = 0;
  std::size_t taps = 0;
  std::multiset<std::string> fd_targets;  // readlink of each fd, to name a leak
  std::multiset<std::string> map_names;   // the path column of /proc/self/maps
};

class HostileTest : public ::testing::Test {
 public:
  static std::vector<std::byte> frame(std::size_t payload, std::uint8_t seed) {
    net::FrameSpec spec;
    spec.payload_len = payload;
    spec.payload_seed = seed;
    return net::build_frame(spec);
  }

  /// A TX request for `len` bytes at `offset` of a page holding `data` there.
  static wire::TxRequest tx_request(GrantRef ref, std::uint16_t offset, std::uint16_t size,
                                    std::uint16_t id, std::uint16_t flags = 0) {
    wire::TxRequest r{};
    r.gref = ref.value();
    r.offset = offset;
    r.size = size;
    r.id = id;
    r.flags = flags;
    return r;
  }

 protected:
  /// Tunables the daemon starts with (a test may change them before SetUp via this hook).
  virtual vif::Tunables tunables() {
    vif::Tunables t;
    t.max_queues = 2;
    t.threads = 1;  // every vif on one event-loop thread: "the others go on" means something
    return t;
  }
  /// The descriptors every connect must leave free (unetbackd's FdReserve default), or
  /// nullopt for a vif layer that keeps none back (each connect step then meets EMFILE).
  virtual std::optional<std::size_t> fd_floor() { return FdReserve::kDefaultFloor; }
  /// Where vifs keep their state records (empty: nowhere, no vif is adoptable) and who keeps
  /// their TAPs' queues (nullptr: nobody), as unetbackd with a state directory under systemd.
  virtual std::filesystem::path state_dir() { return {}; }
  virtual vif::TapKeeper* tap_keeper() { return nullptr; }

  void SetUp() override {
    if (!enter_private_netns()) GTEST_SKIP() << "needs root and /dev/net/tun (suite hostile)";
    log::set_sink([this](log::Level, std::string_view prefix, std::string_view msg) {
      const std::lock_guard lock(log_mu_);
      log_lines_.emplace_back(std::string(prefix) + ": " + std::string(msg));
    });
    world_ = std::make_unique<XensimProcess>();
    dom0_ = test::open_backend_dom0(world_->dir());
    toolstack_xs_ = dom0_->open_xenstore();
    backend_xs_ = dom0_->open_xenstore();
    const auto t = tunables();
    loops_ = std::make_unique<event::EventLoopPool>(t.threads);
    tunable_store_ = std::make_unique<daemon::TunableStore>(*backend_xs_, kDom0, t);
    if (const auto floor = fd_floor()) fd_reserve_ = std::make_unique<FdReserve>(2, *floor);
    factory_ = std::make_unique<vif::VifFactoryImpl>(
        *dom0_, *loops_, [] {}, std::map<std::string, std::string>{}, fd_reserve_.get(),
        state_dir(), tap_keeper());
    manager_ = std::make_unique<daemon::BackendManager>(
        *backend_xs_, kDom0, *factory_, *tunable_store_,
        [this](DomId d) { return dom0_->domain_exists(d); });
    ASSERT_FALSE(manager_->start());
    start_pump();
    bring_up_good();
    if (HasFatalFailure()) return;
    // Warm-up: the first notifications each way fill xensim's caches of peer eventfds and
    // control pages; a test's resource baseline is taken after them.
    expect_good_traffic(8);
  }

  void TearDown() override {
    if (good_.netfront) good_.netfront->disconnect(kHangGuard);
    good_.netfront.reset();
    good_.sock.reset();
    if (toolstack_xs_ && good_.hv)
      (void)toolstack::remove_vif(*toolstack_xs_, kDom0, good_.dom, {});
    {
      const std::lock_guard lock(mu_);
      if (manager_) manager_->shutdown();
    }
    stop_pump();
    manager_.reset();
    factory_.reset();
    fd_reserve_.reset();
    tunable_store_.reset();
    loops_.reset();
    good_.hv.reset();
    backend_xs_.reset();
    toolstack_xs_.reset();
    dom0_.reset();
    world_.reset();
    log::set_sink({});
  }

  // --- the daemon's loop (ManagerLoop's job, on a thread of ours) ---
  void start_pump() {
    pump_ = std::thread([this] {
      auto last_check = std::chrono::steady_clock::now();
      bool more = true;  // events left from a bounded round wait without the fd readable
      while (!pump_stop_) {
        pollfd pfd{backend_xs_->watch_fd(), POLLIN, 0};
        (void)::poll(&pfd, 1, more ? 0 : 10);
        const std::lock_guard lock(mu_);
        if ((pfd.revents & POLLIN) || more) more = manager_->process_events();
        if (std::chrono::steady_clock::now() - last_check > 20ms) {
          manager_->check_vifs();
          last_check = std::chrono::steady_clock::now();
        }
      }
    });
  }
  void stop_pump() {
    pump_stop_ = true;
    if (pump_.joinable()) pump_.join();
  }

  // --- the toolstack ---
  void add_device(DomId dom) {
    toolstack::VifSpec spec;
    spec.mac = "00:16:3e:00:00:" + std::to_string(10 + dom.value() % 80);
    ASSERT_FALSE(toolstack::add_vif(*toolstack_xs_, kDom0, dom, spec));
    ASSERT_FALSE(wait_backend(dom, XenbusState::init_wait)) << "the backend never reached InitWait";
    const std::string tap = "vif" + std::to_string(dom.value()) + ".0";
    ASSERT_NE(::if_nametoindex(tap.c_str()), 0u) << "no TAP before InitWait";
    ASSERT_EQ(0, std::system(("ip link set " + tap + " up").c_str()));
    ASSERT_FALSE(toolstack_xs_->write(be_path(dom) + "/hotplug-status", "connected"));
  }
  /// libxl's removal (online=0, state=5, wait for Closed, delete the nodes); then the
  /// daemon must let the vif go entirely.
  void remove_device(DomId dom) {
    (void)toolstack::remove_vif(*toolstack_xs_, kDom0, dom, DevId{0});
    EXPECT_TRUE(wait_for([&] { return !has_vif(dom); }, kHangGuard)) << "the daemon kept the vif";
  }
  [[nodiscard]] static std::string be_path(DomId dom) {
    return toolstack::backend_path(kDom0, dom, DevId{0});
  }
  std::error_code wait_backend(DomId dom, XenbusState s, std::chrono::milliseconds t = kHangGuard) {
    return wait_for_state(*toolstack_xs_, be_path(dom) + "/state", s, t);
  }
  /// The backend's state (nullopt: no node, or no valid state in it).
  [[nodiscard]] std::optional<XenbusState> backend_state(DomId dom) {
    return read_state(*toolstack_xs_, be_path(dom) + "/state");
  }
  [[nodiscard]] std::optional<std::string> error_node(DomId dom) {
    auto v = toolstack_xs_->read("/local/domain/0/error/backend/vif/" +
                                 std::to_string(dom.value()) + "/0/error");
    if (!v) return std::nullopt;
    return *v;
  }

  // --- the daemon's view ---
  bool has_vif(DomId dom) {
    const std::lock_guard lock(mu_);
    return manager_->status(daemon::VifId{dom, DevId{0}}).has_value();
  }
  std::size_t vif_count() {
    const std::lock_guard lock(mu_);
    return manager_->vif_count();
  }
  std::uint64_t counter(DomId dom, std::string_view name) {
    const std::lock_guard lock(mu_);
    const auto st = manager_->status(daemon::VifId{dom, DevId{0}});
    std::uint64_t sum = 0;
    if (!st) return 0;
    for (const auto& q : st->report.queues)
      for (const auto& [k, v] : q.counters)
        if (k == name) sum += v;
    return sum;
  }
  /// Every counter of the vif, summed over its queues, from one report (each queue's read once
  /// the pass in progress has ended: what a pass that began before the call bumped together is
  /// seen together).
  std::map<std::string, std::uint64_t> counters(DomId dom) {
    const std::lock_guard lock(mu_);
    std::map<std::string, std::uint64_t> out;
    const auto st = manager_->status(daemon::VifId{dom, DevId{0}});
    if (!st) return out;
    for (const auto& q : st->report.queues)
      for (const auto& [k, v] : q.counters) out[k] += v;
    return out;
  }
  bool connected(DomId dom) {
    const std::lock_guard lock(mu_);
    const auto st = manager_->status(daemon::VifId{dom, DevId{0}});
    return st && st->report.connected;
  }

  template <typename Pred>
  static bool wait_for(Pred pred, std::chrono::milliseconds t = kHangGuard) {
    return wait_until(pred, t, 5ms);
  }

  // --- the good guest ---
  void bring_up_good() {
    good_.open_domain(world_->dir(), "good");
    add_device(good_.dom);
    ASSERT_FALSE(good_.connect(netfront::NetfrontOptions{}, kHangGuard));
    ASSERT_FALSE(wait_backend(good_.dom, XenbusState::connected));
    ASSERT_TRUE(good_.open_packet_socket()) << std::strerror(errno);
  }

  /// A packet socket on `dom`'s TAP (the host side of its vif).
  static PacketSocket tap_socket(DomId dom) {
    return PacketSocket::open("vif" + std::to_string(dom.value()) + ".0");
  }

  struct Traffic {
    std::size_t sent = 0, received = 0;
  };
  /// `n` frames each way through the good guest; what arrived. Frames are sent in small
  /// bursts so neither ring nor socket overflows (we measure the backend, not buffer sizes).
  /// Every wait returns once its frames are in; one hang guard bounds the whole exchange, so
  /// lost frames cost one guard, not one per burst.
  Traffic good_traffic(std::size_t n = 32) {
    Traffic tr;
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    const auto left = [&] {
      return std::max(std::chrono::milliseconds(0),
                      std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now()));
    };
    const auto out = frame(1000, 0x42);
    for (std::size_t i = 0; i < n; ++i) {
      // A full ring frees slots as the backend answers: retry until it has, or the guard.
      for (;;) {
        if (good_.netfront->send(out)) {
          ++tr.sent;
          break;
        }
        if (std::chrono::steady_clock::now() >= deadline) break;
        good_.netfront->handle_event();
        good_.netfront->process_tx_responses();
        std::this_thread::sleep_for(1ms);
      }
      if (i % 8 == 7 || i + 1 == n) {
        const auto got = good_.sock.receive((i % 8) + 1, left());
        for (const auto& f : got)
          if (f == out) ++tr.received;
      }
    }
    const auto in = frame(800, 0x17);
    for (std::size_t i = 0; i < n; ++i) {
      if (good_.sock.send(in)) ++tr.sent;
      if (i % 8 == 7 || i + 1 == n) {
        std::vector<netfront::RxPacket> got;
        const std::size_t want = (i % 8) + 1;
        while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
          good_.netfront->handle_event();
          (void)good_.netfront->poll(got);
          std::this_thread::sleep_for(1ms);
        }
        for (const auto& p : got)
          if (p.bytes == in) ++tr.received;
      }
    }
    good_.netfront->process_tx_responses();
    return tr;
  }
  void expect_good_traffic(std::size_t n = 32) {
    const auto tr = good_traffic(n);
    EXPECT_EQ(tr.sent, 2 * n);
    EXPECT_EQ(tr.received, tr.sent) << "the well-behaved guest lost traffic";
  }

  // --- hostile guests ---
  /// A hostile domain with its device made by the toolstack, backend in InitWait, TAP up.
  std::unique_ptr<HostileFrontend> hostile(const std::string& name = "bad") {
    auto h = std::make_unique<HostileFrontend>(world_->dir(), name, dom0_.get());
    h->attach();
    add_device(h->dom());
    return h;
  }
  /// A hostile guest whose rings are connected the proper way (the attack comes after).
  std::unique_ptr<HostileFrontend> connected_hostile(const std::string& name = "bad") {
    auto h = hostile(name);
    if (::testing::Test::HasFatalFailure()) return h;
    EXPECT_FALSE(h->make_rings());
    EXPECT_FALSE(h->publish());
    EXPECT_FALSE(wait_backend(h->dom(), XenbusState::connected));
    return h;
  }

  // --- leaks ---
  static std::size_t count_dir(const char* path, std::string_view prefix = {}) {
    std::size_t n = 0;
    DIR* d = ::opendir(path);
    if (d == nullptr) return 0;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view name(e->d_name);
      if (name == "." || name == "..") continue;
      if (name.substr(0, prefix.size()) == prefix) ++n;
    }
    ::closedir(d);
    return n;
  }
  static Resources resources() {
    Resources r;
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        char target[512] = {};
        const std::string link = std::string("/proc/self/fd/") + e->d_name;
        const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
        r.fd_targets.insert(n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "?");
      }
      ::closedir(d);
    }
    r.fds = r.fd_targets.size() - 1;  // the directory stream itself
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      // Grant and ring mappings are views of a domain's memory file (named); anonymous
      // mappings are the allocator's (heap arenas, thread stacks, and under ASan its own
      // regions, which grow as it pleases) and say nothing about grants.
      const auto slash = line.find_first_of("/[");
      if (slash == std::string::npos) continue;
      ++r.maps;
      r.map_names.insert(line.substr(slash));
    }
    r.taps = count_dir("/sys/class/net", "vif");
    return r;
  }
  /// Waits (bounded) for the process to get back to `base`: the data path lets go of pages
  /// and sockets on its own thread, a little after the xenbus side reported Closed.
  void expect_no_leak(const Resources& base) {
    Resources now;
    wait_for(
        [&] {
          now = resources();
          return now.fds <= base.fds && now.maps <= base.maps && now.taps <= base.taps;
        },
        kHangGuard);
    EXPECT_LE(now.fds, base.fds) << "file descriptors leaked:"
                                 << extra(now.fd_targets, base.fd_targets);
    EXPECT_LE(now.maps, base.maps)
        << "mappings (grants, rings) leaked:" << extra(now.map_names, base.map_names);
    EXPECT_LE(now.taps, base.taps) << "a TAP outlived its vif";
  }

  static std::string extra(const std::multiset<std::string>& now,
                           const std::multiset<std::string>& base) {
    std::vector<std::string> diff;
    std::set_difference(now.begin(), now.end(), base.begin(), base.end(), std::back_inserter(diff));
    std::string out;
    for (const auto& d : diff) out += " " + d;
    return out;
  }

  // --- the log ---
  /// Lines naming vif<dom>.* (every data-path and xenbus message of that vif carries it).
  std::size_t log_lines_about(DomId dom) {
    const std::string tag = "vif" + std::to_string(dom.value()) + ".";
    const std::string tag2 = "vif " + std::to_string(dom.value()) + "/";
    const std::lock_guard lock(log_mu_);
    std::size_t n = 0;
    for (const auto& l : log_lines_)
      if (l.find(tag) != std::string::npos || l.find(tag2) != std::string::npos) ++n;
    return n;
  }
  /// The end of every hostile scenario: the good guest still passes traffic both ways, the
  /// bad guest's log lines stayed bounded, and once the toolstack removed its device and the
  /// domain died, nothing of it is left in the process.
  void finish(std::unique_ptr<test::HostileFrontend>& bad, const Resources& base) {
    expect_good_traffic();
    expect_log_bounded(bad->dom());
    const DomId dom = bad->dom();
    remove_device(dom);
    EXPECT_EQ(bad->grants_in_use(), 0u) << "the backend still holds grants of a removed vif";
    bad.reset();  // the domain dies
    expect_no_leak(base);
    expect_good_traffic(8);
  }
  /// The bound, with the lines themselves in the failure message.
  void expect_log_bounded(DomId dom, std::size_t bound = kLogBound) {
    const std::size_t n = log_lines_about(dom);
    if (n <= bound) return;
    const std::string tag = "vif" + std::to_string(dom.value()) + ".";
    const std::string tag2 = "vif " + std::to_string(dom.value()) + "/";
    std::string text;
    const std::lock_guard lock(log_mu_);
    for (const auto& l : log_lines_)
      if (l.find(tag) != std::string::npos || l.find(tag2) != std::string::npos) text += l + "\n";
    ADD_FAILURE() << n << " log lines about vif" << dom.value() << " (bound " << bound
                  << "): the log is not rate-limited\n"
                  << text;
  }
  std::size_t log_line_count() {
    const std::lock_guard lock(log_mu_);
    return log_lines_.size();
  }
  /// A barrier through the daemon's xenstore connection: when it returns, every watch event
  /// xenstored queued for the daemon before the call (a frontend's writes, the toolstack's) has
  /// been handled, with whatever it logged. The toolstack writes a tunable (copy-batch, toggled
  /// between two harmless values that apply to later connects only); its event queues behind
  /// all earlier ones on the one connection, handled in order, and the store holds the new
  /// value once the daemon has handled it. For a test that must show something did not happen.
  void sync_daemon() {
    const auto copy_batch = [&] {
      const std::lock_guard lock(mu_);
      return tunable_store_->current().copy_batch;
    };
    const std::uint32_t next = copy_batch() == 64 ? 63 : 64;
    ASSERT_FALSE(
        toolstack_xs_->write(daemon::tunables_dir(kDom0) + "/copy-batch", std::to_string(next)));
    ASSERT_TRUE(wait_for([&] { return copy_batch() == next; }))
        << "the daemon never handled a tunable written after the scenario's writes";
  }
  /// A guest that keeps misbehaving must not make the log grow with it.
  static constexpr std::size_t kLogBound = 40;

  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> dom0_;
  std::unique_ptr<hv::XenStore> toolstack_xs_, backend_xs_;
  std::unique_ptr<event::EventLoopPool> loops_;
  std::unique_ptr<daemon::TunableStore> tunable_store_;
  std::unique_ptr<FdReserve> fd_reserve_;
  std::unique_ptr<vif::VifFactoryImpl> factory_;
  std::unique_ptr<daemon::BackendManager> manager_;
  std::mutex mu_;  // the manager, against the pump thread
  std::thread pump_;
  std::atomic<bool> pump_stop_{false};
  SimGuest good_;
  std::mutex log_mu_;
  std::vector<std::string> log_lines_;
};

}  // namespace unetback::test
