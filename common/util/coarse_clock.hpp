// coarse_now(): the monotonic clock as of the kernel's last timer tick (CLOCK_MONOTONIC_COARSE),
// on std::chrono::steady_clock's time line (libstdc++'s steady_clock is CLOCK_MONOTONIC, so a
// coarse time point compares with a steady_clock one: it is behind by less than a tick).
//
// Why: in a PV dom0 whose Xen has no stable TSC (Xen under QEMU, the lab) the kernel has no
// vDSO clocksource, so each steady_clock::now() is a clock_gettime syscall through Xen; the lab
// counted them at 0.48 / 0.54 per packet (guest RX / TX) with one read per pass, a fifth of
// unetbackd's syscalls. The coarse clock is read from the vDSO page without a clocksource
// (lib/vdso/gettimeofday.c, do_coarse): no syscall on any x86 kernel. It lags by up to one
// tick (1–10 ms, CONFIG_HZ), which is what the kernel netback's own timers work in (jiffies).
// Use it for ageing, expiry and stall detection; never to time a pass or to set a deadline a
// timer waits for (a deadline a coarse clock has not reached yet would fire again at once).
#pragma once

#include <chrono>
#include <ctime>

namespace unetback {

[[nodiscard]] inline std::chrono::steady_clock::time_point coarse_now() noexcept {
  timespec ts{};
  (void)::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

}  // namespace unetback
