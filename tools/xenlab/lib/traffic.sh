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
#   domu_stat IP, dom0_stat, side_costs   both sides' interrupts and CPU around every iperf3
#                                   run, per frame of the first domU's eth0 (any backend)
# Uses from lib/common.sh: say, fig, check, up. Globals read: CTL, OUT, SECS, PROFILE,
# UNETBACKD_PID (empty: no daemon figures), STAT_DOMUS (the domUs a run involves, first the one
# whose frames count; iperf and iperf_d2d set it); set: SYSCALL_NAMES, SYSCALL_METHOD.

# ping_rtt TAG IP: average RTT of 10 pings, ms
ping_rtt() {
  local avg
  avg=$(ping -c 10 -i 0.2 -W 2 "$2" 2>/dev/null | awk -F/ '/^rtt|^round-trip/{print $5}')
  [ -n "$avg" ] && fig "$1.ping_rtt_ms" "$avg"
}

# unetbackd's counters NAME... summed over all vifs and queues, from one stats reply
# (ub_counter tx_switched; ub_counter rx_packets tx_packets).
ub_counter() {
  local names
  names=$(IFS='|'; echo "$*")
  "$CTL" --json stats 2>/dev/null | grep -oE "\"($names)\": *[0-9]+" |
    awk -F: '{s += $2} END {printf "%d", s}'
}
# unetbackd's packets moved so far, both directions, all vifs and queues (its counters).
ub_packets() { ub_counter tx_packets rx_packets; }
# Context switches (voluntary + nonvoluntary) of all of unetbackd's threads so far.
ub_switches() {
  cat /proc/"$UNETBACKD_PID"/task/*/status 2>/dev/null |
    awk '/^(non)?voluntary_ctxt_switches:/ {s += $2} END {printf "%d", s}'
}
per_packet() { awk -v a="$1" -v p="$2" 'BEGIN{if (p > 0) printf "%.3f", a / p}'; }
# unetbackd's CPU time so far (user + system, clock ticks, all threads: /proc/PID/stat 14, 15).
ub_ticks() { awk '{print $14 + $15}' /proc/"$UNETBACKD_PID"/stat 2>/dev/null || echo 0; }

# Where a transfer's time goes on each side, whatever the backend: domu_stat IP prints the domU's
# lab-stat line (tools/xenlab/domU-init: eth0's RX and TX frames, its event channels'
# interrupts, its busy and idle CPU ticks); dom0_stat prints dom0's in the same form: the
# interrupts of the backends' event channels (the kernel netback's vifD.N-qQ-tx/-rx, a
# userspace backend's evtchn:unetbackd) and dom0's busy and idle ticks, all vCPUs.
domu_stat() {
  (
    exec 3<>"/dev/tcp/$1/5395" || exit 1
    timeout 5 cat <&3
  ) 2>/dev/null | grep '^eth0 ' || echo "eth0 0 0 irqs 0 busy 0 idle 0"
}
dom0_stat() {
  local irqs cpu
  irqs=$(awk '$NF ~ /^vif[0-9]+\.[0-9]+/ || $NF ~ /^evtchn:unetbackd/ {for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i} END {print s + 0}' /proc/interrupts)
  cpu=$(awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6}' /proc/stat)
  echo "dom0 0 0 irqs $irqs busy ${cpu% *} idle ${cpu#* }"
}
# side_costs TAG DIRECTION BEFORE AFTER: from two snapshots (lines "dom0 ...;IP eth0 ...;...",
# dom0 first, then each of STAT_DOMUS) the figures per frame of the first domU's eth0 (RX + TX:
# every frame of a guest_tx, guest_rx or domU -> domU run passes it once): TAG.DIRECTION.pp.
# dom0_irqs, domU_irqs (every domU of the run), dom0_cpu_us, domU_cpu_us (busy time, USER_HZ
# 100), and the domUs' busy share of their vCPUs' time (domU_busy_pct).
side_costs() {
  local tag=$1 dir=$2 v
  v=$(awk -v b="$3" -v a="$4" '
    function parse(s, out,   n, parts, i, f) {
      n = split(s, parts, ";")
      for (i = 1; i <= n; i++) { split(parts[i], f, " "); out[i, "rx"] = f[2]; out[i, "tx"] = f[3]; out[i, "irq"] = f[5]; out[i, "busy"] = f[7]; out[i, "idle"] = f[9] }
      return n
    }
    BEGIN {
      n = parse(b, B); parse(a, A)
      frames = (A[2, "rx"] - B[2, "rx"]) + (A[2, "tx"] - B[2, "tx"])
      if (n < 2 || frames <= 0) exit
      for (i = 2; i <= n; i++) { irq += A[i, "irq"] - B[i, "irq"]; busy += A[i, "busy"] - B[i, "busy"]; all += A[i, "busy"] - B[i, "busy"] + A[i, "idle"] - B[i, "idle"] }
      printf "%d %.4g %.4g %.2f %.2f %.1f\n", frames, (A[1, "irq"] - B[1, "irq"]) / frames, irq / frames,
        (A[1, "busy"] - B[1, "busy"]) * 10000 / frames, busy * 10000 / frames, (all > 0 ? 100 * busy / all : 0)
    }')
  [ -n "$v" ] || return 0
  local frames dom0_irqs domu_irqs dom0_us domu_us domu_pct
  read -r frames dom0_irqs domu_irqs dom0_us domu_us domu_pct <<<"$v"
  fig "$tag.$dir.pp.frames" "$frames"
  fig "$tag.$dir.pp.dom0_irqs" "$dom0_irqs"
  fig "$tag.$dir.pp.domU_irqs" "$domu_irqs"
  fig "$tag.$dir.pp.dom0_cpu_us" "$dom0_us"
  fig "$tag.$dir.pp.domU_cpu_us" "$domu_us"
  fig "$tag.$dir.pp.domU_busy_pct" "$domu_pct"
}
# snapshot: dom0_stat, then domu_stat of each of STAT_DOMUS, joined by ";".
side_snapshot() {
  local ip line
  line=$(dom0_stat)
  for ip in ${STAT_DOMUS:-}; do line+=";$(domu_stat "$ip")"; done
  echo "$line"
}

# iperf_once TAG DIRECTION -- COMMAND...: runs one iperf3 client command (which must time out
# by itself), logs it, records
# TAG.DIRECTION.mbps (the receiver's figure) and its check; with unetbackd running also
# unetbackd's wake-ups per packet moved over the run (TAG.DIRECTION.wakeups_per_packet).
iperf_once() {
  local tag=$1 dir=$2 out mbps p0 s0 p1 s1 c0 c1 t0 t1 side0 side1
  shift 3
  side0=$(side_snapshot)
  if [ -n "$UNETBACKD_PID" ]; then p0=$(ub_packets); s0=$(ub_switches); c0=$(ub_ticks); t0=$(up); fi
  out=$("$@" 2>&1)
  if [ -n "$UNETBACKD_PID" ]; then p1=$(ub_packets); s1=$(ub_switches); c1=$(ub_ticks); t1=$(up); fi
  side1=$(side_snapshot)
  echo "$out" >>"$OUT/iperf3-$tag.log"
  mbps=$(echo "$out" | awk '/receiver/{for(i=1;i<=NF;i++) if($i=="Mbits/sec") v=$(i-1)} END{print v}')
  if [ -n "$mbps" ]; then
    fig "$tag.$dir.mbps" "$mbps"
    check "$tag.iperf3.$dir" 0 "$mbps Mbit/s"
    side_costs "$tag" "$dir" "$side0" "$side1"
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
  local tag=$1 ip=$2 dir=$3 args=(-c "$2" -f m -t "$SECS") STAT_DOMUS=$2
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
  local tag=$1 STAT_DOMUS="10.99.0.2 10.99.0.5"
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
  local tag=$1 dir=$2 method tracer p0 p1 h0 h1 n
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
  h0=$(ub_counter rx_copy_hypercalls tx_copy_hypercalls)
  "$@" >>"$OUT/iperf3-$tag.syscalls.log" 2>&1
  p1=$(ub_packets)
  h1=$(ub_counter rx_copy_hypercalls tx_copy_hypercalls)
  kill -INT "$tracer"
  wait "$tracer"
  if [ "$method" = perf ]; then
    n=$(awk -F, '$3 == "raw_syscalls:sys_enter" {print $1}' /tmp/sys-count)
  else
    n=$(awk '$NF == "total" {print $4}' /tmp/sys-count)
  fi
  cp /tmp/sys-count "$OUT/syscalls-$tag.$dir.txt" 2>/dev/null
  # The grant-copy hypercalls gntdev issued for those packets (16 ops each, an op per local
  # page a segment touches: the daemon counts them by gntdev's rule).
  [ $((p1 - p0)) -gt 0 ] && fig "$tag.$dir.copy_hypercalls_per_packet" "$(per_packet $((h1 - h0)) $((p1 - p0)))"
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
