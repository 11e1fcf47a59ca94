# shellcheck shell=bash
# Traffic and unetbackd's counters: ping, iperf3 between dom0 and a domU or between two domUs,
# and the runs apart from the throughput runs that count the daemon's syscalls or profile it.
#   ping_rtt TAG IP                 TAG.ping_rtt_ms (10 pings)
#   iperf TAG IP guest_rx|guest_tx [iperf3 args]   dom0 <-> domU: TAG.DIRECTION.mbps, and with
#                                   the daemon running its packets, wake-ups and CPU per run
#   iperf_once TAG DIRECTION -- CMD...  one run of any iperf3 client command, the same figures
#   in_domu IP ARGS..., iperf_d2d TAG   iperf3 in labu: labu -> labu2 and back (domu_to_domu*)
#   syscall_window TAG DIRECTION CMD... TAG.DIRECTION.syscalls_per_packet (perf stat or strace)
#   profile_window, profile_d2d, profiled  the daemon under perf record (PROFILE=1 only)
#   ub_counter NAME, ub_packets, ub_switches, ub_ticks, per_packet   the daemon's counters
# Uses from lib/common.sh: say, fig, check, up. Globals read: CTL, OUT, SECS, PROFILE,
# UNETBACKD_PID (empty: no daemon figures); set: SYSCALL_NAMES, SYSCALL_METHOD.

# ping_rtt TAG IP: average RTT of 10 pings, ms
ping_rtt() {
  local avg
  avg=$(ping -c 10 -i 0.2 -W 2 "$2" 2>/dev/null | awk -F/ '/^rtt|^round-trip/{print $5}')
  [ -n "$avg" ] && fig "$1.ping_rtt_ms" "$avg"
}

# unetbackd's counter NAME summed over all vifs and queues (ub_counter tx_switched).
ub_counter() {
  "$CTL" --json stats 2>/dev/null | grep -oE "\"$1\": *[0-9]+" |
    awk -F: '{s += $2} END {printf "%d", s}'
}
# unetbackd's packets moved so far, both directions, all vifs and queues (its counters).
ub_packets() { echo $(($(ub_counter tx_packets) + $(ub_counter rx_packets))); }
# Context switches (voluntary + nonvoluntary) of all of unetbackd's threads so far.
ub_switches() {
  cat /proc/"$UNETBACKD_PID"/task/*/status 2>/dev/null |
    awk '/^(non)?voluntary_ctxt_switches:/ {s += $2} END {printf "%d", s}'
}
per_packet() { awk -v a="$1" -v p="$2" 'BEGIN{if (p > 0) printf "%.3f", a / p}'; }
# unetbackd's CPU time so far (user + system, clock ticks, all threads: /proc/PID/stat 14, 15).
ub_ticks() { awk '{print $14 + $15}' /proc/"$UNETBACKD_PID"/stat 2>/dev/null || echo 0; }

# iperf_once TAG DIRECTION -- COMMAND...: runs one iperf3 client command (which must time out
# by itself), logs it, records
# TAG.DIRECTION.mbps (the receiver's figure) and its check; with unetbackd running also
# unetbackd's wake-ups per packet moved over the run (TAG.DIRECTION.wakeups_per_packet).
iperf_once() {
  local tag=$1 dir=$2 out mbps p0 s0 p1 s1 c0 c1 t0 t1
  shift 3
  if [ -n "$UNETBACKD_PID" ]; then p0=$(ub_packets); s0=$(ub_switches); c0=$(ub_ticks); t0=$(up); fi
  out=$("$@" 2>&1)
  if [ -n "$UNETBACKD_PID" ]; then p1=$(ub_packets); s1=$(ub_switches); c1=$(ub_ticks); t1=$(up); fi
  echo "$out" >>"$OUT/iperf3-$tag.log"
  mbps=$(echo "$out" | awk '/receiver/{for(i=1;i<=NF;i++) if($i=="Mbits/sec") v=$(i-1)} END{print v}')
  if [ -n "$mbps" ]; then
    fig "$tag.$dir.mbps" "$mbps"
    check "$tag.iperf3.$dir" 0 "$mbps Mbit/s"
    if [ -n "$UNETBACKD_PID" ] && [ $((p1 - p0)) -gt 0 ]; then
      fig "$tag.$dir.packets" $((p1 - p0))
      fig "$tag.$dir.wakeups_per_packet" "$(per_packet $((s1 - s0)) $((p1 - p0)))"
      # unetbackd's share of one dom0 vCPU over the run: near 100 it is CPU-bound, far
      # below it waits (for wake-ups, for the guest).
      fig "$tag.$dir.unetbackd_cpu_pct" "$(awk -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
        -v a="$t0" -v b="$t1" 'BEGIN{if (b > a) printf "%.1f", 100 * c / hz / (b - a)}')"
      { echo "== $tag.$dir: threads (tid psr %cpu), evtchn interrupts per vCPU"
        ps -L -o tid=,psr=,pcpu=,comm= -p "$UNETBACKD_PID"
        grep -E 'evtchn:unetbackd|xen-pirq|CPU' /proc/interrupts; } >>"$OUT/sched-$tag.txt" 2>&1
    fi
  else
    check "$tag.iperf3.$dir" 1 "$(echo "$out" | tail -2 | tr '\n' ' ')"
  fi
}

# iperf TAG IP DIRECTION(guest_tx|guest_rx) [extra args]: iperf3 between dom0 and the domU at
# IP; guest_rx = dom0 -> domU, guest_tx = domU -> dom0 (-R: the domU sends).
iperf() {
  local tag=$1 ip=$2 dir=$3 args=(-c "$2" -f m -t "$SECS")
  shift 3
  [ "$dir" = guest_tx ] && args+=(-R)
  iperf_once "$tag" "$dir" -- timeout $((SECS + 40)) iperf3 "${args[@]}" "$@"
}

# in_domu IP ARGS...: runs `iperf3 ARGS` in the domU at IP (its lab-iperf server on port 5399,
# see domU-init) and prints iperf3's output.
in_domu() {
  local ip=$1
  shift
  (
    exec 3<>"/dev/tcp/$ip/5399" || exit 1
    echo "$*" >&3
    timeout $((SECS + 40)) cat <&3
  )
}
# iperf_d2d TAG: labu (10.99.0.2) -> labu2 (10.99.0.5) and back (-R), iperf3 run in labu.
iperf_d2d() {
  local tag=$1
  iperf_once "$tag" domu_to_domu -- in_domu 10.99.0.2 -c 10.99.0.5 -f m -t "$SECS"
  iperf_once "$tag" domu_to_domu_reverse -- in_domu 10.99.0.2 -c 10.99.0.5 -f m -t "$SECS" -R
}

# syscall_window TAG DIRECTION CMD...: one more run of CMD (an iperf3 transfer), apart from the
# throughput runs, with unetbackd's syscalls counted: perf stat -e raw_syscalls:sys_enter
# (counting only), or strace -c -f when perf cannot count here (strace stops the daemon at every
# syscall: its run is far slower, so fewer packets are left per pass). Records
# TAG.DIRECTION.syscalls_per_packet, per packet of unetbackd's counters (a domU -> domU frame is
# two: one guest's TX, the other's RX), and the method (TAG.syscalls_method). The run's
# throughput is logged, not a figure.
SYSCALL_NAMES="read write readv writev pread64 pwrite64 preadv2 ioctl io_uring_enter epoll_wait epoll_pwait epoll_ctl
  poll ppoll futex mmap munmap madvise mprotect brk recvmsg sendmsg recvmmsg sendmmsg recvfrom sendto clock_nanosleep
  nanosleep timerfd_settime timerfd_gettime eventfd2 sched_yield rt_sigprocmask rt_sigtimedwait getpid gettid tgkill
  lseek fcntl dup close openat newfstatat statx getrandom getrusage clock_gettime times prctl socket connect accept4"
syscall_window() {
  local tag=$1 dir=$2 method tracer p0 p1 n
  shift 2
  [ -n "$UNETBACKD_PID" ] || return 0
  if [ -z "${SYSCALL_METHOD:-}" ]; then
    SYSCALL_METHOD=none
    if perf stat -x, -e raw_syscalls:sys_enter -- true 2>&1 | grep -q '^[0-9][0-9]*,.*raw_syscalls:sys_enter'; then
      SYSCALL_METHOD=perf
    elif command -v strace >/dev/null; then
      SYSCALL_METHOD=strace
    fi
    say "unetbackd's syscalls counted with: $SYSCALL_METHOD"
  fi
  method=$SYSCALL_METHOD
  fig "$tag.syscalls_method" "$method"
  [ "$method" = none ] && return 0
  rm -f /tmp/sys-count
  if [ "$method" = perf ]; then
    # The total, and the calls a pass of the data path may make, one by one (where this
    # kernel has their tracepoints): which of them the per-packet figure is made of.
    local ev=raw_syscalls:sys_enter s
    for s in $SYSCALL_NAMES; do
      [ -d "/sys/kernel/tracing/events/syscalls/sys_enter_$s" ] || [ -d "/sys/kernel/debug/tracing/events/syscalls/sys_enter_$s" ] &&
        ev+=",syscalls:sys_enter_$s"
    done
    perf stat -x, -e "$ev" -p "$UNETBACKD_PID" -o /tmp/sys-count &
  else
    strace -c -f -q -p "$UNETBACKD_PID" -o /tmp/sys-count &
  fi
  tracer=$!
  sleep 1 # attached before the traffic starts
  p0=$(ub_packets)
  "$@" >>"$OUT/iperf3-$tag.syscalls.log" 2>&1
  p1=$(ub_packets)
  kill -INT "$tracer"
  wait "$tracer"
  if [ "$method" = perf ]; then
    n=$(awk -F, '$3 == "raw_syscalls:sys_enter" {print $1}' /tmp/sys-count)
  else
    n=$(awk '$NF == "total" {print $4}' /tmp/sys-count)
  fi
  cp /tmp/sys-count "$OUT/syscalls-$tag.$dir.txt" 2>/dev/null
  if [ -n "$n" ] && [ $((p1 - p0)) -gt 0 ]; then
    fig "$tag.$dir.syscalls_per_packet" "$(per_packet "$n" $((p1 - p0)))"
    if [ "$method" = perf ]; then
      awk -F, '$3 ~ /^syscalls:sys_enter_/ && $1 + 0 > 0 {sub(/^syscalls:sys_enter_/, "", $3); print $3, $1}' /tmp/sys-count |
        while read -r s c; do fig "$tag.$dir.syscalls.$s" "$(per_packet "$c" $((p1 - p0)))"; done
    fi
    check "$tag.syscalls.$dir" 0 "$n syscalls ($method) for $((p1 - p0)) packets"
  else
    check "$tag.syscalls.$dir" 1 "no count from $method (syscalls ${n:-none}, packets $((p1 - p0)))"
  fi
}

# profile_window TAG IP DIRECTION [iperf3 args] (xenlab.sh --profile): one more iperf3 run
# between dom0 and the domU at IP with unetbackd sampled by perf record (cpu-clock, call
# graphs); where its time goes, by symbol, in out/profile-TAG.DIRECTION.txt. Nothing is recorded
# as a figure. profile_d2d TAG: the same around labu -> labu2 (iperf3 run in labu).
profile_window() {
  local tag=$1 ip=$2 dir=$3 args=(-c "$2" -f m -t "$SECS")
  shift 3
  [ "$dir" = guest_tx ] && args+=(-R)
  profiled "$tag" "$dir" timeout $((SECS + 40)) iperf3 "${args[@]}" "$@"
}
profile_d2d() {
  profiled "$1" domu_to_domu in_domu 10.99.0.2 -c 10.99.0.5 -f m -t "$SECS"
  profiled "$1" domu_to_domu_reverse in_domu 10.99.0.2 -c 10.99.0.5 -f m -t "$SECS" -R
}
# profiled TAG DIRECTION CMD...: CMD with unetbackd under perf record.
profiled() {
  local tag=$1 dir=$2 rec
  shift 2
  [ "$PROFILE" = 1 ] && [ -n "$UNETBACKD_PID" ] && command -v perf >/dev/null || return 0
  perf record -q -e cpu-clock -F 2000 -g -p "$UNETBACKD_PID" -o /tmp/prof.data 2>>"$OUT/perf.log" &
  rec=$!
  sleep 1
  "$@" >>"$OUT/iperf3-$tag.profile.log" 2>&1
  kill -INT "$rec"
  wait "$rec"
  { perf report -i /tmp/prof.data --stdio --no-children --sort dso,sym -g none --percent-limit 0.5 2>&1 | head -80
    echo "== with callers"
    perf report -i /tmp/prof.data --stdio --children --sort sym -g none --percent-limit 2 2>&1 | head -60
  } >"$OUT/profile-$tag.$dir.txt"
  say "profile of unetbackd ($tag $dir) in out/profile-$tag.$dir.txt"
}
