#!/bin/bash
# The xenlab scenarios, run in the PV dom0 from the 9p share (/host) by /sbin/xenlab-init.
#   /host/lab.conf   ROUNDS, SECS (iperf3 seconds), SHIM (1: run scenario 3)
#   /host/bin/       unetbackd, unetback-ctl (built on the host; dom0 has the same libraries)
#   /host/vmlinuz, /host/domU-initrd.cpio.gz (xen-netfront), /host/domU-shim-initrd.cpio.gz
# Writes /host/out/results.txt: "FIG name value" and "CHECK name PASS|FAIL detail" lines, and
# logs (unetbackd.log, xl-*.log) beside it. Everything is also echoed on the console.
# Directions are the project's: guest_tx = domU -> dom0, guest_rx = dom0 -> domU; domu_to_domu
# is labu -> labu2 over xenbr0 (domu_to_domu_reverse the other way), iperf3 run in labu.
set -u
export PATH=/usr/lib/xen-4.17/bin:/usr/sbin:/usr/bin:/sbin:/bin
H=/host
OUT=$H/out
mkdir -p "$OUT"
RES=$OUT/results.txt
: >"$RES"
ROUNDS=1 SECS=3 SHIM=1 ONLY= DAEMON_ARGS= DAEMON_WRAP= FROM_SHARE=0 B_ARGS= B_ENV= PROFILE=0
. "$H/lab.conf"

up() { cut -d' ' -f1 /proc/uptime; }
say() {
  echo "XENLAB $(up) $*"
  up >/tmp/last-say
}
fig() { echo "FIG $1 $2" >>"$RES"; say "figure $1 = $2"; }
check() { # check NAME 0|1 DETAIL...   (0: passed, as a shell status)
  local name=$1 st=$2
  shift 2
  local v=PASS
  [ "$st" = 0 ] || v=FAIL
  echo "CHECK $name $v $*" >>"$RES"
  say "check $name: $v $*"
}
# wait_for SECONDS CMD...: polls CMD every 0.5 s; status 0 as soon as it succeeds.
wait_for() {
  local t=$1 i=0
  shift
  while ! "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -ge $((t * 2)) ] && return 1
    sleep 0.5
  done
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

BE=/local/domain/0/backend/vif
UNETBACKD_PID=
# The programs run from dom0's own tmpfs, as installed programs would, not from the 9p share
# (their pages would be read in over 9p while the scenarios run).
BIN=/usr/local/lib/unetback
[ "$FROM_SHARE" = 1 ] && BIN=$H/bin # xenlab.sh --programs-from-share (debugging)
CTL="$BIN/unetback-ctl"

# ---------------------------------------------------------------------------------------------
# dom0 setup, as the Debian xen-utils init script would do it (no systemd here)
say "dom0 up, kernel $(uname -r), rounds=$ROUNDS secs=$SECS shim=$SHIM"
modprobe -a xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs bridge tun
mount -t xenfs xenfs /proc/xen
# perf finds its tracepoints (unetbackd's syscall count) in tracefs.
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
# A process that dies of a signal with a core dump is named on the console (the core itself
# is dropped): heap corruption in any dom0 process shows which one it was.
cat >/tmp/corelog <<'EOF2'
#!/bin/sh
echo "XENLAB-CORE $(cut -d' ' -f1 /proc/uptime) $1[$2] died of signal $3" >/dev/console
cat >/dev/null
EOF2
chmod +x /tmp/corelog
echo '|/tmp/corelog %e %p %s' >/proc/sys/kernel/core_pattern
ulimit -c unlimited
mkdir -p /run/xen /run/xenstored /var/lib/xen /var/lib/xenstored /var/log/xen/console /run/lock \
  /run/unetback
xenstored --pid-file=/run/xenstored.pid || say "xenstored FAILED"
xen-init-dom0 >/dev/null 2>&1
xenconsoled --pid-file=/run/xenconsoled.pid --log=guest
# The operator's setup for unetbackd: xen-netback must not be auto-loaded by udev (modalias
# xen-backend:vif) when libxl writes a backend/vif directory. `modprobe xen-netback` by name, as
# the kernel rounds do, still works.
echo "blacklist xen-netback" >/etc/modprobe.d/unetback.conf
# udevd handles the new devices' uevents (no coldplug: it would only load unrelated drivers).
/lib/systemd/systemd-udevd --daemon >/dev/null 2>&1
ip link add xenbr0 type bridge
ip addr add 10.99.0.1/24 dev xenbr0
ip link set xenbr0 up
ip link set lo up
if [ "$BIN" != "$H/bin" ]; then
  mkdir -p "$BIN"
  mount -t tmpfs tmpfs "$BIN"
  cp "$H"/bin/* "$BIN/"
fi
# sums_match DIR: the programs in DIR match the checksums xenlab.sh took when it built them.
sums_match() { (cd "$1" && sha256sum -c --quiet SHA256SUMS >/dev/null 2>&1); }
sums_match "$BIN"
check dom0.programs_copied $? "unetbackd, unetback-ctl copied from the share into $BIN, checksums as built"
# Integrity probe: a tmpfs file of random data whose checksum is taken again after every
# scenario. A stray write into dom0 memory (a grant copy landing on the wrong frame, say) shows
# up here, or as processes dying of heap corruption (counted from the console on the host).
head -c 128M /dev/urandom >/tmp/canary
CANARY_SUM=$(sha256sum </tmp/canary)
integrity() { # integrity TAG
  local s
  s=$(sha256sum </tmp/canary)
  check "$1.dom0_memory_intact" "$([ "$s" = "$CANARY_SUM" ] && echo 0 || echo 1)" \
    "128 MiB tmpfs canary checksum $([ "$s" = "$CANARY_SUM" ] && echo unchanged || echo CHANGED)"
}
say "dom0 ready: $(xl info | awk '/xen_version/{print "xen " $3}'), $(nproc) vCPUs"
fig dom0_ready_s "$(up)"

# Watchdog: when the scenarios have said nothing for 45 s, what every process is doing goes
# to the console (a hang then shows where it is: a command in D state, a spinning process, or
# nothing at all when the whole of dom0 stopped).
(
  while sleep 15; do
    quiet=$(awk -v l="$(cat /tmp/last-say 2>/dev/null || echo 0)" -v n="$(up)" 'BEGIN{printf "%d", n-l}')
    if [ "${quiet:-0}" -ge 45 ]; then
      echo "XENLAB-WATCHDOG $(up) quiet ${quiet}s, load $(cut -d' ' -f1-3 /proc/loadavg)"
      ps -eo pid,ppid,stat,pcpu,wchan:24,args --sort=-pcpu 2>&1 | head -25 | sed 's/^/XENLAB-WATCHDOG   /' | cut -c1-180
    fi
  done
) &
WATCHDOG_PID=$!

# domU configs: stock xl, stock vif-bridge (the default vif script).
mkdir -p /tmp/img
cp "$H/vmlinuz" "$H"/domU-*.cpio.gz /tmp/img/
mkcfg() { # mkcfg FILE NAME VCPUS IP MAC RAMDISK
  cat >"$1" <<EOF
name = "$2"
type = "pv"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/$6"
extra = "console=hvc0 rdinit=/init lab_ip=$4/24 quiet loglevel=4"
memory = 256
vcpus = $3
vif = [ 'bridge=xenbr0,mac=$5' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
}
mkcfg /tmp/u1.cfg labu 1 10.99.0.2 00:16:3e:00:00:02 domU-initrd.cpio.gz
mkcfg /tmp/u2.cfg labu2 1 10.99.0.5 00:16:3e:00:00:05 domU-initrd.cpio.gz
mkcfg /tmp/mq.cfg labmq 2 10.99.0.3 00:16:3e:00:00:03 domU-initrd.cpio.gz
mkcfg /tmp/shim.cfg labshim 1 10.99.0.4 00:16:3e:00:00:04 domU-shim-initrd.cpio.gz

# ---------------------------------------------------------------------------------------------
# helpers

start_unetbackd() { # [ARG...]: added to the command line (the B variant's); env: START_ENV
  rm -f /run/unetback/unetbackd.sock
  # shellcheck disable=SC2086 # DAEMON_WRAP, DAEMON_ARGS, START_ENV: words (xenlab.sh --daemon-wrap/-arg, --b-env)
  ${START_ENV:+env $START_ENV} $DAEMON_WRAP "$BIN/unetbackd" --hypervisor xen --log-level info $DAEMON_ARGS "$@" >>"$OUT/unetbackd.log" 2>&1 &
  UNETBACKD_PID=$!
  wait_for 30 "$CTL" list
  local st=$?
  check "unetbackd.start" $st "pid $UNETBACKD_PID, control socket answers"
  return $st
}

stop_unetbackd() {
  [ -n "$UNETBACKD_PID" ] || return 0
  kill -TERM "$UNETBACKD_PID"
  local i=0
  while kill -0 "$UNETBACKD_PID" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.5; i=$((i + 1)); done
  if kill -0 "$UNETBACKD_PID" 2>/dev/null; then
    check "unetbackd.stop" 1 "still running 20 s after SIGTERM"
    kill -KILL "$UNETBACKD_PID"
  fi
  wait "$UNETBACKD_PID"
  local rc=$?
  check "unetbackd.stop" "$([ $rc = 0 ] && echo 0 || echo 1)" "exit status $rc after SIGTERM"
  UNETBACKD_PID=
}

# xl_create TAG CFG NAME IP: creates, times it, waits for ping. Status 0 when pingable.
xl_create() {
  local tag=$1 cfg=$2 name=$3 ip=$4 t0 rc
  t0=$(now)
  xl -vvv create "$cfg" >"$OUT/xl-create-$tag.log" 2>&1
  rc=$?
  fig "$tag.create_s" "$(since "$t0")"
  check "$tag.xl_create" $rc "xl create rc=$rc"
  if [ $rc != 0 ]; then
    grep -E "error|ERROR|unable|timed out|hotplug" "$OUT/xl-create-$tag.log" | tail -8 | sed 's/^/XENLAB   xl: /'
    return 1
  fi
  t0=$(now)
  wait_for 90 ping -c1 -W1 "$ip"
  rc=$?
  fig "$tag.ping_ready_s" "$(since "$t0")"
  check "$tag.ping" $rc "$ip answers ping"
  if [ $rc != 0 ]; then
    local d
    d=$(xl domid "$name")
    xenstore-ls -f "$BE/$d" 2>&1 | sed 's/^/XENLAB   be: /' | head -40
    xenstore-ls -f "/local/domain/$d/device/vif" 2>&1 | sed 's/^/XENLAB   fe: /' | head -40
    tail -20 "/var/log/xen/console/guest-$name.log" 2>/dev/null | sed 's/^/XENLAB   console: /'
  fi
  return $rc
}

# ping_rtt TAG IP: average RTT of 10 pings, ms
ping_rtt() {
  local avg
  avg=$(ping -c 10 -i 0.2 -W 2 "$2" 2>/dev/null | awk -F/ '/^rtt|^round-trip/{print $5}')
  [ -n "$avg" ] && fig "$1.ping_rtt_ms" "$avg"
}

# unetbackd's packets moved so far, both directions, all vifs and queues (its counters).
ub_packets() {
  "$CTL" --json stats 2>/dev/null | grep -oE '"(tx|rx)_packets": *[0-9]+' |
    awk -F: '{s += $2} END {printf "%d", s}'
}
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

# syscall_window TAG IP DIRECTION: one more iperf3 run, apart from the throughput runs, with
# unetbackd's syscalls counted: perf stat -e raw_syscalls:sys_enter (counting only), or
# strace -c -f when perf cannot count here (strace stops the daemon at every syscall: its run
# is far slower, so fewer packets are left per pass). Records TAG.DIRECTION.syscalls_per_packet
# and the method (TAG.syscalls_method). The run's throughput is logged, not a figure.
syscall_window() {
  local tag=$1 ip=$2 dir=$3 args=(-c "$2" -f m -t "$SECS") method tracer p0 p1 n
  [ "$dir" = guest_tx ] && args+=(-R)
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
    perf stat -x, -e raw_syscalls:sys_enter -p "$UNETBACKD_PID" -o /tmp/sys-count &
  else
    strace -c -f -q -p "$UNETBACKD_PID" -o /tmp/sys-count &
  fi
  tracer=$!
  sleep 1 # attached before the traffic starts
  p0=$(ub_packets)
  timeout $((SECS + 40)) iperf3 "${args[@]}" >>"$OUT/iperf3-$tag.syscalls.log" 2>&1
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
    check "$tag.syscalls.$dir" 0 "$n syscalls ($method) for $((p1 - p0)) packets"
  else
    check "$tag.syscalls.$dir" 1 "no count from $method (syscalls ${n:-none}, packets $((p1 - p0)))"
  fi
}

# profile_window TAG IP DIRECTION (xenlab.sh --profile): one more iperf3 run with unetbackd
# sampled by perf record (cpu-clock, call graphs); where its time goes, by symbol, in
# out/profile-TAG.DIRECTION.txt. Nothing is recorded as a figure.
profile_window() {
  local tag=$1 ip=$2 dir=$3 args=(-c "$2" -f m -t "$SECS") rec
  [ "$dir" = guest_tx ] && args+=(-R)
  [ "$PROFILE" = 1 ] && [ -n "$UNETBACKD_PID" ] && command -v perf >/dev/null || return 0
  perf record -q -e cpu-clock -F 2000 -g -p "$UNETBACKD_PID" -o /tmp/prof.data 2>>"$OUT/perf.log" &
  rec=$!
  sleep 1
  timeout $((SECS + 40)) iperf3 "${args[@]}" >>"$OUT/iperf3-$tag.profile.log" 2>&1
  kill -INT "$rec"
  wait "$rec"
  { perf report -i /tmp/prof.data --stdio --no-children --sort dso,sym -g none --percent-limit 0.5 2>&1 | head -80
    echo "== with callers"
    perf report -i /tmp/prof.data --stdio --children --sort sym -g none --percent-limit 2 2>&1 | head -60
  } >"$OUT/profile-$tag.$dir.txt"
  say "profile of unetbackd ($tag $dir) in out/profile-$tag.$dir.txt"
}

# Remote-domain event channels dom0 holds for domain $1 (lsevtchn: "Remote Domain N").
evtchn_lines() { lsevtchn 0 2>/dev/null | grep -E "Remote Domain $1([^0-9]|$)"; }
gntdev_maps() { # gntdev mappings (mapped grants) in unetbackd's address space
  local n=0
  [ -n "$UNETBACKD_PID" ] && n=$(grep -c gntdev "/proc/$UNETBACKD_PID/maps")
  echo "${n:-0}"
}
# MAPS_LEFT: the mappings other vifs still hold (the domU -> domU scenario's first domU).
MAPS_LEFT=0
no_gntdev_maps() { [ "$(gntdev_maps)" -le "$MAPS_LEFT" ]; }

# After a vif of domain $2 went away (detach or destroy): no TAP, no mapped grant, no event
# channel of ours left to it. Frontend ports are passed in $4 (the ones the vif had bound); $5:
# how many gntdev mappings other, still connected vifs hold (default 0).
check_vif_gone() { # TAG DOMID TAP FE_PORTS [MAPS_LEFT]
  local tag=$1 d=$2 tap=$3 ports=$4 p left
  MAPS_LEFT=${5:-0}
  ip link show "$tap" >/dev/null 2>&1
  check "$tag.no_tap" "$([ $? != 0 ] && echo 0 || echo 1)" "$tap gone"
  wait_for 10 no_gntdev_maps
  check "$tag.no_mapped_grant" $? "gntdev mappings in unetbackd: $(gntdev_maps) (other vifs hold $MAPS_LEFT)"
  MAPS_LEFT=0
  # Ours would show as "Waiting connection" (the frontend closed its end) or still
  # "Connected" to one of the vif's frontend ports.
  left=
  for i in $(seq 1 20); do
    left=$(evtchn_lines "$d" | grep -E "Waiting")
    for p in $ports; do left+=$(evtchn_lines "$d" | grep -E "Connected.*Port $p\$"); done
    [ -z "$left" ] && break
    sleep 0.5
  done
  check "$tag.no_bound_port" "$([ -z "$left" ] && echo 0 || echo 1)" "${left:-no event channel left to dom$d}"
}

fe_ports() { # all event-channel* values under a frontend vif dir
  xenstore-ls -f "$1" 2>/dev/null | awk -F' = ' '/event-channel/{gsub(/"/,"",$2); print $2}' | tr '\n' ' '
}

# xl destroy + the checks of the issue: backend reached 6 (libxl saw it, no timeout), no TAP,
# no mapped grant, no bound port.
destroy_checked() { # TAG NAME [MAPS_LEFT]
  local tag=$1 name=$2 d ports t0 rc
  d=$(xl domid "$name")
  ports=$(fe_ports "/local/domain/$d/device/vif")
  # Record every backend state written during the teardown (libxl deletes the directory as
  # soon as it has seen 6).
  (
    for i in $(seq 1 400); do
      s=$(xenstore-read "$BE/$d/0/state" 2>/dev/null) || break
      echo "$s"
      sleep 0.05
    done | uniq | tr '\n' ' ' >"/tmp/states-$tag"
  ) &
  local watcher=$!
  t0=$(now)
  xl -vvv destroy "$name" >"$OUT/xl-destroy-$tag.log" 2>&1
  rc=$?
  fig "$tag.destroy_s" "$(since "$t0")"
  wait $watcher
  check "$tag.xl_destroy" $rc "xl destroy rc=$rc"
  local seen6=1
  grep -q "wanted state 6 ok" "$OUT/xl-destroy-$tag.log" && seen6=0
  grep -qw 6 "/tmp/states-$tag" && seen6=0
  check "$tag.backend_state6" $seen6 "states seen: $(cat "/tmp/states-$tag"); libxl: $(grep -o 'wanted state 6 [a-z ]*[0-9]*' "$OUT/xl-destroy-$tag.log" | tail -1)"
  check_vif_gone "$tag" "$d" "vif$d.0" "$ports" "${3:-0}"
}

# The 2-vCPU domU on the kernel netback: the baseline of unetbackd's multi-queue scenario.
kernel_mq() { # [long]: also network-detach/attach, as unetbackd's scenario does
  local tag=kernel.mq d q
  say "=== kernel xen-netback: 2-vCPU domU"
  modprobe xen-netback
  if xl_create "$tag" /tmp/mq.cfg labmq 10.99.0.3; then
    d=$(xl domid labmq)
    q=$(xenstore-read "/local/domain/$d/device/vif/0/multi-queue-num-queues" 2>/dev/null)
    fig "$tag.queues" "${q:-1}"
    check "$tag.two_queues" "$([ "${q:-1}" = 2 ] && echo 0 || echo 1)" "frontend multi-queue-num-queues=${q:-unset}"
    iperf "$tag" 10.99.0.3 guest_rx -P 2
    iperf "$tag" 10.99.0.3 guest_tx -P 2
  fi
  if [ "${1:-}" = long ] && xl domid labmq >/dev/null 2>&1; then
    # The same detach/attach as unetbackd's scenario (and so the same time with the domU).
    xl network-detach labmq 0 >"$OUT/xl-detach-kernel.log" 2>&1
    check "$tag.detach.rc" $? "xl network-detach rc=$?"
    xl network-attach labmq bridge=xenbr0 mac=00:16:3e:00:00:03 >"$OUT/xl-attach-kernel.log" 2>&1
    check "$tag.attach.rc" $? "xl network-attach rc=$?"
    wait_for 60 ping -c1 -W1 10.99.0.3
    check "$tag.attach.ping" $? "10.99.0.3 answers again on the re-attached vif"
    iperf "$tag.attach" 10.99.0.3 guest_rx
  fi
  xl destroy labmq >/dev/null 2>&1
  wait_for 20 rmmod xen-netback
  check "$tag.rmmod" $? "xen-netback unloaded"
  integrity "$tag"
}

kernel_round() { # ROUND
  local tag=kernel.r$1
  say "=== round $1: kernel xen-netback"
  modprobe xen-netback
  if xl_create "$tag" /tmp/u1.cfg labu 10.99.0.2; then
    ping_rtt "$tag" 10.99.0.2
    iperf "$tag" 10.99.0.2 guest_rx
    iperf "$tag" 10.99.0.2 guest_tx
    xl_create "$tag.d2d" /tmp/u2.cfg labu2 10.99.0.5 && iperf_d2d "$tag"
  fi
  xl destroy labu2 >/dev/null 2>&1
  xl destroy labu >/dev/null 2>&1
  wait_for 20 rmmod xen-netback
  check "$tag.rmmod" $? "xen-netback unloaded for the next unetbackd round"
  integrity "$tag"
}

# XDP in the domU (issue 19). xen-netfront, given a native XDP program (xdp-pass in the domU,
# through lab-xdp on port 5398), asks its backend for XDP_PACKET_HEADROOM the way
# xennet_xdp_set does: frontend Reconfiguring (7), xdp-headroom=256, wait for the backend's
# Reconfigured (8), Connected (4) again; detaching does the same with 0. Checked: the program
# is on, what the frontend wrote, the states unetbackd wrote (its log: it writes Reconfigured
# only to answer the frontend's Reconfiguring) and where both ends ended, the headroom
# unetbackd lays guest RX out with (rx_xdp_headroom), and ping.
# xdp_step TAG DOMID IP attach|detach HEADROOM
xdp_step() {
  local tag=$1.xdp.$4 d=$2 ip=$3 cmd=$4 want=$5 fe be t0 out mark hr seen
  fe=/local/domain/$d/device/vif/0
  be=$BE/$d/0
  mark=$(wc -l <"$OUT/unetbackd.log")
  t0=$(now)
  out=$(
    exec 3<>"/dev/tcp/$ip/5398" || exit 1
    echo "$cmd" >&3
    timeout 30 cat <&3
  )
  fig "$tag.s" "$(since "$t0")"
  echo "$out" | grep -q "lab-xdp: rc=0"
  check "$tag.done" $? "xdp-pass $cmd eth0 in the domU: $(echo "$out" | tr '\n' ' ')"
  hr=$(xenstore-read "$fe/xdp-headroom" 2>/dev/null)
  check "$tag.frontend_headroom" "$([ "$hr" = "$want" ] && echo 0 || echo 1)" \
    "$fe/xdp-headroom = ${hr:-absent} (want $want)"
  wait_for 10 sh -c "[ \"\$(xenstore-read $fe/state)\" = 4 ] && [ \"\$(xenstore-read $be/state)\" = 4 ]"
  check "$tag.connected_again" $? \
    "frontend state $(xenstore-read "$fe/state" 2>&1), backend state $(xenstore-read "$be/state" 2>&1)"
  seen=$(tail -n +$((mark + 1)) "$OUT/unetbackd.log" | grep -o 'backend state -> [A-Za-z]*' | awk '{print $4}' | tr '\n' ' ')
  check "$tag.reconfigured" "$(echo "$seen" | grep -q 'Reconfigured Connected' && echo 0 || echo 1)" \
    "unetbackd wrote: ${seen:-nothing}"
  hr=$("$CTL" --json stats 2>/dev/null | grep -o '"rx_xdp_headroom": *[0-9]*' | grep -o '[0-9]*$' | head -1)
  check "$tag.backend_headroom" "$([ "$hr" = "$want" ] && echo 0 || echo 1)" \
    "unetbackd lays guest RX out after ${hr:-?} bytes (rx_xdp_headroom; want $want)"
  ping -c 3 -i 0.2 -W 2 "$ip" >/dev/null 2>&1
  check "$tag.ping" $? "$ip answers ping"
}
# xdp_round TAG NAME IP: attach, traffic, detach, traffic (a few seconds of iperf3).
xdp_round() {
  local tag=$1 d t=2
  d=$(xl domid "$2")
  fig "$tag.xdp.headroom_at_connect" "$(xenstore-read "/local/domain/$d/device/vif/0/xdp-headroom" 2>/dev/null || echo absent)"
  xdp_step "$tag" "$d" "$3" attach 256
  # With a program attached xen-netfront drops every packet of more than one slot (its XDP
  # runs on single pages only), so guest RX is UDP of one slot a datagram; guest TX is TCP.
  iperf_once "$tag.xdp" guest_rx -- timeout 40 iperf3 -c "$3" -f m -t $t -u -b 200M -l 1400
  local got
  got=$(awk -v k="$tag.xdp.guest_rx.mbps" '$1 == "FIG" && $2 == k {print $3}' "$RES")
  check "$tag.xdp.guest_rx_delivered" "$(awk -v m="${got:-0}" 'BEGIN{print (m > 0) ? 0 : 1}')" \
    "UDP dom0 -> domU through the XDP program: ${got:-no} Mbit/s received"
  iperf_once "$tag.xdp" guest_tx -- timeout 40 iperf3 -c "$3" -f m -t $t -R
  xdp_step "$tag" "$d" "$3" detach 0
  iperf_once "$tag.xdp_off" guest_rx -- timeout 40 iperf3 -c "$3" -f m -t $t
}

unetbackd_round() { # ROUND [b]: b runs unetbackd with B_ARGS added and B_ENV set (xenlab.sh --b-arg, --b-env)
  local tag=unetbackd.r$1 extra=() START_ENV=
  if [ "${2:-}" = b ]; then
    tag=unetbackd_b.r$1
    read -r -a extra <<<"$B_ARGS"
    START_ENV=$B_ENV
  fi
  say "=== round $1: unetbackd${2:+ ($B_ENV$B_ARGS)}"
  start_unetbackd "${extra[@]}" || return
  if xl_create "$tag" /tmp/u1.cfg labu 10.99.0.2; then
    check "$tag.netback_not_loaded" "$(lsmod | grep -q '^xen_netback' && echo 1 || echo 0)" \
      "xen-netback blacklisted: not auto-loaded by udev"
    local d maps1
    d=$(xl domid labu)
    maps1=$(gntdev_maps) # labu's rings (it stays connected while labu2 comes and goes)
    fig "$tag.gntdev_maps_connected" "$maps1"
    fig "$tag.backend_state_connected" "$(xenstore-read "$BE/$d/0/state")"
    ping_rtt "$tag" 10.99.0.2
    iperf "$tag" 10.99.0.2 guest_rx
    iperf "$tag" 10.99.0.2 guest_tx
    [ "$1" = 1 ] && [ "${2:-}" != b ] && xdp_round "$tag" labu 10.99.0.2
    if xl_create "$tag.d2d" /tmp/u2.cfg labu2 10.99.0.5; then
      iperf_d2d "$tag"
      destroy_checked "$tag.d2d" labu2 "$maps1"
    else
      xl destroy labu2 >/dev/null 2>&1
    fi
    # Apart from the throughput runs above: the same transfers with unetbackd's syscalls counted.
    syscall_window "$tag" 10.99.0.2 guest_rx
    syscall_window "$tag" 10.99.0.2 guest_tx
    profile_window "$tag" 10.99.0.2 guest_rx
    profile_window "$tag" 10.99.0.2 guest_tx
    "$CTL" stats >"$OUT/ctl-stats-$tag.txt" 2>&1
    destroy_checked "$tag" labu
  else
    xl destroy labu >/dev/null 2>&1
  fi
  integrity "$tag"
  stop_unetbackd
}

# Multi-queue, a tunable changed through xenstore, network-detach/attach on a running domain.
unetbackd_extras() {
  local tag=unetbackd.mq d fe q ports
  say "=== unetbackd: 2-vCPU domU, tunable, detach/attach"
  xl_create "$tag" /tmp/mq.cfg labmq 10.99.0.3 || { xl destroy labmq >/dev/null 2>&1; return; }
  d=$(xl domid labmq)
  fe=/local/domain/$d/device/vif/0
  q=$(xenstore-read "$fe/multi-queue-num-queues" 2>/dev/null)
  fig "$tag.queues" "${q:-1}"
  check "$tag.two_queues" "$([ "${q:-1}" = 2 ] && echo 0 || echo 1)" "frontend multi-queue-num-queues=${q:-unset} (backend offers $(xenstore-read "$BE/$d/0/multi-queue-max-queues"))"
  iperf "$tag" 10.99.0.3 guest_rx -P 2
  iperf "$tag" 10.99.0.3 guest_tx -P 2
  integrity "$tag"

  # The tunable: max-queues 1, written straight into xenstore as an operator would.
  xenstore-write /local/domain/0/unetback/max-queues 1
  wait_for 10 sh -c "'$CTL' get max-queues | grep -qw 1"
  check "unetbackd.tunable.seen" $? "unetback-ctl get max-queues: $("$CTL" get max-queues 2>&1 | tr '\n' ' ')"

  # Detach while running: the vif must go away completely, and the domain keeps running.
  ports=$(fe_ports "$fe")
  local t0
  t0=$(now)
  xl network-detach labmq 0 >"$OUT/xl-detach.log" 2>&1
  local rc=$?
  fig "unetbackd.detach_s" "$(since "$t0")"
  check "unetbackd.detach.rc" $rc "xl network-detach rc=$rc"
  wait_for 15 sh -c "! xenstore-read $BE/$d/0/state"
  check "unetbackd.detach.backend_removed" $? "backend directory removed"
  check_vif_gone unetbackd.detach "$d" "vif$d.0" "$ports"

  t0=$(now)
  xl network-attach labmq bridge=xenbr0 mac=00:16:3e:00:00:03 >"$OUT/xl-attach.log" 2>&1
  rc=$?
  fig "unetbackd.attach_s" "$(since "$t0")"
  check "unetbackd.attach.rc" $rc "xl network-attach rc=$rc"
  local dev
  dev=$(xenstore-list "/local/domain/$d/device/vif" 2>/dev/null | tail -1)
  t0=$(now)
  wait_for 60 ping -c1 -W1 10.99.0.3
  check "unetbackd.attach.ping" $? "10.99.0.3 answers again on the re-attached vif $dev"
  fig "unetbackd.attach.ping_ready_s" "$(since "$t0")"
  local mq nq
  mq=$(xenstore-read "$BE/$d/$dev/multi-queue-max-queues" 2>/dev/null)
  nq=$(xenstore-read "/local/domain/$d/device/vif/$dev/multi-queue-num-queues" 2>/dev/null)
  check "unetbackd.tunable.applied" "$([ "$mq" = 1 ] && [ "${nq:-1}" = 1 ] && echo 0 || echo 1)" \
    "after xenstore-write max-queues 1: backend offers ${mq:-unset}, frontend uses ${nq:-1}"
  iperf unetbackd.attach 10.99.0.3 guest_rx
  xenstore-write /local/domain/0/unetback/max-queues 4
  destroy_checked "$tag" labmq
  integrity unetbackd.extras
}

# Scenario 3: netfront-shim in a domU (no kernel netfront there), against $1 (kernel|unetbackd).
shim_round() {
  local be=$1 tag=shim.$1
  say "=== shim in a domU against $be"
  if [ "$be" = kernel ]; then modprobe xen-netback; else start_unetbackd || return; fi
  if xl_create "$tag" /tmp/shim.cfg labshim 10.99.0.4; then
    ping_rtt "$tag" 10.99.0.4
    iperf "$tag" 10.99.0.4 guest_rx
    iperf "$tag" 10.99.0.4 guest_tx
  fi
  xl destroy labshim >/dev/null 2>&1
  cp /var/log/xen/console/guest-labshim.log "$OUT/console-$tag.log" 2>/dev/null
  if [ "$be" = kernel ]; then
    wait_for 20 rmmod xen-netback
  else
    stop_unetbackd
  fi
  integrity "$tag"
}

# ---------------------------------------------------------------------------------------------
# Order: the alternating rounds, the shim, and last the 2-vCPU domU. Last because in this
# emulated machine a 2-vCPU PV domU makes dom0 processes die of memory corruption now and then,
# with the kernel netback alone as well (README, "The lab"): whatever happens there cannot
# spoil the rounds' figures.
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
for r in $(seq 1 "$ROUNDS"); do
  want kernel && kernel_round "$r"
  want unetbackd && unetbackd_round "$r"
  want unetbackd && [ -n "$B_ARGS$B_ENV" ] && unetbackd_round "$r" b
done
if [ "$SHIM" = 1 ] && want shim; then
  shim_round kernel
  shim_round unetbackd
fi
if [ "$ONLY" = kmq ]; then # the kernel netback's 2-vCPU scenario, three times (debugging)
  kernel_mq long
  kernel_mq long
  kernel_mq long
else
  { want kernel || want mq; } && kernel_mq
  { want unetbackd || want mq || [ "$ONLY" = umq ]; } && start_unetbackd && {
    unetbackd_extras
    stop_unetbackd
  }
fi
for f in /var/log/xen/console/guest-*.log; do [ -f "$f" ] && cp "$f" "$OUT/console-$(basename "$f")"; done
cp /var/log/xen/xl-*.log "$OUT/" 2>/dev/null
dmesg >"$OUT/dmesg.txt" 2>/dev/null
sums_match "$BIN"
check dom0.programs_intact $? "the programs in $BIN still match their build checksums"
echo 3 >/proc/sys/vm/drop_caches
sums_match "$H/bin"
check dom0.share_intact $? "the programs read again over 9p match their build checksums"
kill "$WATCHDOG_PID" 2>/dev/null
fig dom0_uptime_end_s "$(up)"
say "DONE"
