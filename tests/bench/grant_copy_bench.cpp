// xensim cost figures: grant copy of 64 x 4 KiB segments per call against a plain memcpy
// of the same bytes, and the event-channel round trip between two processes. Starts its
// own xensim (--xensim PATH, else $XENSIM_BIN, else the binary of this build tree).
//
//   grant_copy_bench [--rounds N] [--calls N] [--events N]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <vector>

#include "common/hv/sim/mapped_region.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/wire/grant.hpp"
#include "tests/integration/xensim/echo_child.hpp"
#include "tests/integration/xensim/event_wait.hpp"
#include "tests/integration/xensim/granter_child.hpp"
#include "tests/integration/xensim/xensim_process.hpp"

namespace {

using namespace unetback;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kSegments = 64;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Keeps the compiler from dropping copies whose result nobody reads.
void clobber(void* p) {
  asm volatile("" : : "g"(p) : "memory");
}

struct Options {
  int rounds = 9;
  int calls = 2000;
  int events = 20000;
};

hv::HypervisorOptions backend_opts() {
  hv::HypervisorOptions o;
  o.role = hv::Role::backend;
  o.copy_batch = kSegments;
  return o;
}

int bench_grant_copy(const test::XensimProcess& world, const Options& opt) {
  const std::string dir = world.dir();
  test::ChildProcess child([dir](int ctrl) { return test::granter_main(ctrl, dir, "bench"); });
  auto hello = child.recv();
  if (!hello || !hello->starts_with("domid ")) return 1;
  const DomId domu{static_cast<std::uint16_t>(std::stoul(hello->substr(6)))};
  child.send("share " + std::to_string(kSegments) + " ro 0");
  auto refs_line = child.recv();
  if (!refs_line) return 1;
  std::istringstream in(*refs_line);
  std::string word;
  int set = 0;
  in >> word >> set;
  std::vector<GrantRef> refs;
  for (std::uint32_t r; in >> r;) refs.emplace_back(r);
  if (refs.size() != kSegments) return 1;

  hv::SimHypervisor dom0(dir, backend_opts());
  auto& gt = dom0.grant_table();
  // Page-aligned buffers on both sides, as the granted pages are: with glibc's rep-movsb
  // memcpy on some CPUs (AMD with FSRM) a page-aligned source copied to a destination 16
  // bytes off alignment runs several times slower, which would swamp what we measure.
  const std::size_t bytes = kSegments * hv::kPageSize;
  auto dst_region = hv::sim::MappedRegion::reserve(bytes);
  auto src_region = hv::sim::MappedRegion::reserve(bytes);
  if (!dst_region || !src_region ||
      ::mprotect(dst_region->data(), bytes, PROT_READ | PROT_WRITE) != 0 ||
      ::mprotect(src_region->data(), bytes, PROT_READ | PROT_WRITE) != 0)
    return 1;
  const std::span<std::byte> dst(dst_region->data(), bytes);
  const std::span<std::byte> src(src_region->data(), bytes);
  std::memset(src.data(), 0x5a, src.size());
  std::memset(dst.data(), 0, dst.size());
  std::vector<hv::GrantCopySegment> segs(kSegments);
  auto fill = [&] {
    for (std::size_t i = 0; i < kSegments; ++i)
      segs[i] = {hv::GrantCopyPtr::granted(domu, refs[i], 0),
                 hv::GrantCopyPtr::local(dst.data() + i * hv::kPageSize),
                 static_cast<std::uint16_t>(hv::kPageSize), 0};
  };
  fill();
  gt.copy(segs);  // warm-up: maps the domain
  for (const auto& s : segs)
    if (s.status != GNTST_okay) {
      std::fprintf(stderr, "grant copy failed: %d\n", s.status);
      return 1;
    }

  std::vector<double> grant_ns, memcpy_ns;
  for (int r = 0; r < opt.rounds; ++r) {
    auto t0 = Clock::now();
    for (int c = 0; c < opt.calls; ++c) {
      fill();
      gt.copy(segs);
      clobber(dst.data());
    }
    grant_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
                       opt.calls);
    t0 = Clock::now();
    for (int c = 0; c < opt.calls; ++c) {
      for (std::size_t i = 0; i < kSegments; ++i)
        std::memcpy(dst.data() + i * hv::kPageSize, src.data() + i * hv::kPageSize, hv::kPageSize);
      clobber(dst.data());
    }
    memcpy_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
                        opt.calls);
  }
  const auto stats = gt.copy_stats();
  const double g = median(grant_ns), m = median(memcpy_ns);
  std::printf("grant copy: %zu segments x 4096 B per call, %llu calls, %.1f segments/call\n",
              kSegments, static_cast<unsigned long long>(stats.calls),
              static_cast<double>(stats.segments) / static_cast<double>(stats.calls));
  std::printf("grant copy: median %.2f us per call (%.1f ns per segment, %.2f GB/s)\n", g / 1e3,
              g / kSegments, static_cast<double>(kSegments * hv::kPageSize) / g);
  std::printf("memcpy:     median %.2f us for the same bytes (%.1f ns per page, %.2f GB/s)\n",
              m / 1e3, m / kSegments, static_cast<double>(kSegments * hv::kPageSize) / m);
  std::printf("ratio grant copy / memcpy: %.2f\n", g / m);
  child.send("exit");
  (void)child.wait();
  return 0;
}

int bench_events(const test::XensimProcess& world, const Options& opt) {
  using namespace std::chrono_literals;
  const std::string dir = world.dir();
  const int total = opt.events * opt.rounds;
  test::ChildProcess child([dir, total](int ctrl) { return test::echo_main(ctrl, dir, total); });
  auto hello = child.recv();
  if (!hello) return 1;
  std::istringstream in(*hello);
  unsigned domid = 0, port = 0;
  in >> domid >> port;
  hv::SimHypervisor dom0(dir, backend_opts());
  auto ch = dom0.open_event_channel();
  auto local = ch->bind_interdomain(DomId{static_cast<std::uint16_t>(domid)}, Port{port});
  if (!local) return 1;
  std::vector<double> rtt_us;
  for (int r = 0; r < opt.rounds; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < opt.events; ++i) {
      (void)ch->notify(*local);
      if (test::wait_event(*ch, 10s) != *local) {
        std::fprintf(stderr, "event lost in round %d at %d\n", r, i);
        return 1;
      }
      (void)ch->unmask(*local);
    }
    rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                     opt.events);
  }
  const auto seen = child.recv();
  std::printf("event round trip between two processes: median %.2f us (%.0f round trips/s), %s\n",
              median(rtt_us), 1e6 / median(rtt_us), seen.value_or("?").c_str());
  child.send("bye");
  (void)child.wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "--xensim") {
      ::setenv("XENSIM_BIN", argv[i + 1], 1);
      continue;
    }
    const int v = std::atoi(argv[i + 1]);
    if (v <= 0) {
      std::fprintf(stderr, "bad value for %s\n", argv[i]);
      return 2;
    }
    if (a == "--rounds")
      opt.rounds = v;
    else if (a == "--calls")
      opt.calls = v;
    else if (a == "--events")
      opt.events = v;
    else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--calls N] [--events N] [--xensim PATH]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    test::XensimProcess world;
    if (int rc = bench_grant_copy(world, opt)) return rc;
    return bench_events(world, opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grant_copy_bench: %s\n", e.what());
    return 1;
  }
}
