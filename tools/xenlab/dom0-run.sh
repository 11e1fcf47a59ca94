#!/bin/bash
# The xenlab scenarios, run in the PV dom0 from the 9p share (/host) by /sbin/xenlab-init,
# which systemd (PID 1) starts as xenlab.service after xen.service.
#   /host/lab.conf   ROUNDS, SECS (iperf3 seconds), SHIM (1: run scenario 3), SMOKE (1: the smoke
#                    test alone, smoke_part)
#   /host/debs/      the project's Debian package(s) (unetback_*.deb), installed with dpkg -i
#   /host/bin/       unetbackd, unetback-ctl of the build dir (--programs-from-share only)
#   /host/vmlinuz, /host/domU-initrd.cpio.gz (xen-netfront), /host/domU-shim-initrd.cpio.gz
#   /host/xen.config the hypervisor's build configuration
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
ROUNDS=1 SECS=3 SHIM=1 ONLY= SKIP= DAEMON_ARGS= DAEMON_WRAP= FROM_SHARE=0 B_ARGS= B_ENV= PROFILE=0 SMOKE=0
. "$H/lab.conf"
# full: a full run (3 rounds). In the full run only, so that CI's quick run keeps to its time:
# the kernel netback's baselines beyond the rounds of 1 and the shim (the reload under a
# running guest, the driver domain, the 2-vCPU domU, the lifecycle), unetbackd's internal
# switch, the planned takeover and the upgrade (the crash recovery stays), and the domU -> domU
# syscall counts.
full() { [ "$ROUNDS" != 1 ]; }

up() { cut -d' ' -f1 /proc/uptime; }
say() {
  echo "XENLAB $(up) $*"
  up >/tmp/last-say.new && mv /tmp/last-say.new /tmp/last-say # never read half-written
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
# unetbackd and unetback-ctl as the package installs them; unetbackd runs as unetbackd.service.
BIN=/usr/sbin
CTL=/usr/bin/unetback-ctl
[ "$FROM_SHARE" = 1 ] && BIN=$H/bin CTL=$H/bin/unetback-ctl # --programs-from-share (debugging)
UNIT=unetbackd.service

# ---------------------------------------------------------------------------------------------
# dom0 setup. systemd (PID 1) ran Debian's /etc/init.d/xen as xen.service: xenfs, xen-evtchn,
# xen-gntdev, xenstored, xen-init-dom0, xenconsoled. What is left is the operator's part.
say "dom0 up, kernel $(uname -r), rounds=$ROUNDS secs=$SECS shim=$SHIM"
fig dom0_boot_s "$(up)"
check dom0.systemd_pid1 "$([ "$(cat /proc/1/comm)" = systemd ] && echo 0 || echo 1)" \
  "PID 1 is $(cat /proc/1/comm), system state $(systemctl is-system-running 2>&1)"
XS_PID=$(pgrep -o -x oxenstored || pgrep -o -x xenstored)
check dom0.xenstored_from_xen_service "$(grep -qs '/xen.service$' "/proc/${XS_PID:-0}/cgroup" && echo 0 || echo 1)" \
  "$(cat "/proc/${XS_PID:-0}/comm" 2>/dev/null || echo "no xenstored") pid ${XS_PID:-none}, cgroup $(cut -d: -f3 "/proc/${XS_PID:-0}/cgroup" 2>/dev/null)"
fig dom0.xenstored "$(cat "/proc/${XS_PID:-0}/comm" 2>/dev/null || echo none)"
systemd-analyze >"$OUT/systemd-analyze-at-start.txt" 2>&1
modprobe -a xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs bridge tun
mountpoint -q /proc/xen || mount -t xenfs xenfs /proc/xen
# perf finds its tracepoints (unetbackd's syscall count) in tracefs.
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
# A process that dies of a signal with a core dump is named on the console (the core itself
# is dropped): heap corruption in any dom0 process shows which one it was.
cat >/run/corelog <<'EOF2'
#!/bin/sh
echo "XENLAB-CORE $(cut -d' ' -f1 /proc/uptime) $1[$2] died of signal $3" >/dev/console
cat >/dev/null
EOF2
chmod +x /run/corelog
echo '|/run/corelog %e %p %s' >/proc/sys/kernel/core_pattern
ulimit -c unlimited
mkdir -p /var/log/xen/console
ip link add xenbr0 type bridge
ip addr add 10.99.0.1/24 dev xenbr0
ip link set xenbr0 up
ip link set lo up

# The package, as an operator installs it: dpkg -i from the share. Its postinst enables and
# starts unetbackd.service (Type=notify: systemctl's start job ends at the daemon's READY=1).
# mono_us: CLOCK_MONOTONIC in microseconds (/proc/uptime is CLOCK_BOOTTIME: the same here, no
# suspend), for comparison with systemd's *TimestampMonotonic.
mono_us() { awk '{printf "%d", $1 * 1000000}' /proc/uptime; }
unit_prop() { systemctl show -p "$1" --value "$UNIT"; }
t0=$(now)
dpkg -i "$H"/debs/unetback_*.deb >"$OUT/dpkg-install.log" 2>&1
rc=$?
fig pkg.install_s "$(since "$t0")"
check pkg.dpkg_install $rc "dpkg -i $(cd "$H/debs" && ls unetback_*.deb | tr '\n' ' ')rc=$rc"
[ $rc = 0 ] || tail -15 "$OUT/dpkg-install.log" | sed 's/^/XENLAB   dpkg: /'
dpkg --verify unetback >/dev/null 2>&1
check dom0.programs_copied $? "the package's files in dom0 match its md5sums (dpkg --verify unetback)"
st=$(systemctl is-active "$UNIT")
check systemd.unetbackd_active "$([ "$st" = active ] && echo 0 || echo 1)" \
  "after dpkg -i: systemctl is-active $UNIT: $st (Type=$(unit_prop Type), enabled: $(systemctl is-enabled "$UNIT" 2>&1))"
READY_US=$(unit_prop ActiveEnterTimestampMonotonic)
EXEC_US=$(unit_prop ExecMainStartTimestampMonotonic)
[ "${READY_US:-0}" -gt 0 ] && [ "${EXEC_US:-0}" -gt 0 ] &&
  fig systemd.ready_after_exec_s "$(awk -v a="$EXEC_US" -v b="$READY_US" 'BEGIN{printf "%.3f", (b - a) / 1e6}')"
befores=$(unit_prop Before)
check systemd.unetbackd_before_libvirtd "$(echo " $befores " | grep -q ' libvirtd.service ' && echo 0 || echo 1)" \
  "Before=$befores"
# The modprobe file: udev's alias load is blacklisted, an explicit load by name is refused.
# The kernel netback rounds below load it with modprobe -i (--ignore-install), which skips the
# package's "install xen-netback /bin/false" on purpose, with unetbackd.service stopped.
MODFILE=$(dpkg -L unetback 2>/dev/null | grep '/modprobe.d/' | head -1)
modprobe xen-netback >/dev/null 2>&1
rc=$?
lsmod | grep -q '^xen_netback'
loaded=$?
check pkg.netback_load_refused "$([ $rc != 0 ] && [ $loaded != 0 ] && echo 0 || echo 1)" \
  "modprobe xen-netback rc=$rc, $([ $loaded = 0 ] && echo loaded || echo not loaded) ($MODFILE: $(grep -v '^#' "$MODFILE" 2>/dev/null | tr '\n' ';'))"
rmmod xen-netback 2>/dev/null
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
# What the hypervisor can run: virt_caps has hvm and hap when the emulated CPU offers SVM with
# nested paging (XENLAB_CPU), which PVH guests and their live migration need (log-dirty on HAP;
# this Xen has no shadow paging). Xen's boot messages about it are kept in out/.
xl info >"$OUT/xl-info.txt" 2>&1
xl dmesg >"$OUT/xl-dmesg-boot.txt" 2>&1
VIRT_CAPS=$(awk -F': *' '/^virt_caps/ {print $2}' "$OUT/xl-info.txt")
fig xen.virt_caps "$(echo "${VIRT_CAPS:-none}" | tr -s ' ' ',')"
grep -E 'SVM|HAP|VMX|HVM:' "$OUT/xl-dmesg-boot.txt" | head -12 | sed 's/^/XENLAB   xen: /'
has_hap() { echo " $VIRT_CAPS " | grep -q ' hap '; }
for u in xen.service libvirtd.socket systemd-udevd.service; do say "unit $u: $(systemctl is-active $u)"; done
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
mkcfg() { # mkcfg FILE NAME VCPUS IP MAC RAMDISK [TYPE: pv (default) or pvh]
  cat >"$1" <<EOF
name = "$2"
type = "${7:-pv}"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/$6"
extra = "console=hvc0 rdinit=/init lab_ip=$4/24 quiet loglevel=4"
memory = 256
vcpus = $3
vif = [ 'bridge=xenbr0,mac=$5' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
  # A guest that crashes (Xen: "Triple fault - invoking HVM shutdown action 1", a reboot) is not
  # restarted under a new domid in the middle of a scenario.
  echo 'on_reboot = "destroy"' >>"$1"
}
mkcfg /tmp/u1.cfg labu 1 10.99.0.2 00:16:3e:00:00:02 domU-initrd.cpio.gz
mkcfg /tmp/u2.cfg labu2 1 10.99.0.5 00:16:3e:00:00:05 domU-initrd.cpio.gz
# The same two domUs on unetbackd's internal switch "lab" (its hotplug script, no dom0 bridge):
# see switch_d2d_round.
sed "s/'bridge=xenbr0,mac=\(.*\)'/'bridge=unetback:lab,script=vif-unetback,mac=\1'/" /tmp/u1.cfg >/tmp/u1s.cfg
sed "s/'bridge=xenbr0,mac=\(.*\)'/'bridge=unetback:lab,script=vif-unetback,mac=\1'/" /tmp/u2.cfg >/tmp/u2s.cfg
mkcfg /tmp/mq.cfg labmq 2 10.99.0.3 00:16:3e:00:00:03 domU-initrd.cpio.gz
mkcfg /tmp/shim.cfg labshim 1 10.99.0.4 00:16:3e:00:00:04 domU-shim-initrd.cpio.gz
# PVH domUs (the guest lifecycle's migrations): the same kernel, initramfs and xen-netfront,
# booted directly as PVH guests (no device model). Their log-dirty mode runs on HAP, which Xen
# has when the emulated CPU offers SVM with nested paging (XENLAB_CPU, xenlab.sh).
mkcfg /tmp/p1.cfg labp 1 10.99.0.6 00:16:3e:00:00:06 domU-initrd.cpio.gz pvh
mkcfg /tmp/pmq.cfg labpmq 2 10.99.0.7 00:16:3e:00:00:07 domU-initrd.cpio.gz pvh

# ---------------------------------------------------------------------------------------------
# helpers

# unetbackd runs as the package's unetbackd.service. Extra arguments (the B variant's, xenlab.sh
# --daemon-arg / --daemon-wrap / --programs-from-share) go into a runtime drop-in that replaces
# the unit's ExecStart with the same command line plus them, and START_ENV (the B variant's
# --b-env) into its Environment=; without any, no drop-in.
DROPIN=/run/systemd/system/$UNIT.d/xenlab.conf
unit_cmdline() { sed -n 's/^ExecStart=//p' "/lib/systemd/system/$UNIT" | tail -1; }
set_dropin() { # [ARG...]
  local cmd want=
  # shellcheck disable=SC2086 # DAEMON_WRAP, DAEMON_ARGS: words
  if [ -n "$DAEMON_WRAP$DAEMON_ARGS$*" ] || [ "$FROM_SHARE" = 1 ]; then
    cmd=$(unit_cmdline)
    [ "$FROM_SHARE" = 1 ] && cmd="$BIN/unetbackd ${cmd#* }"
    want=$(printf '[Service]\nExecStart=\nExecStart=%s %s %s %s\n' "$DAEMON_WRAP" "$cmd" "$DAEMON_ARGS" "$*")
  fi
  # START_ENV: NAME=VALUE words without spaces (xenlab.sh checks them), as Environment= takes them
  if [ -n "${START_ENV:-}" ]; then
    [ -n "$want" ] || want='[Service]'
    want=$(printf '%s\nEnvironment=%s\n' "$want" "$START_ENV")
  fi
  [ "$want" = "$(cat "$DROPIN" 2>/dev/null)" ] && return 0
  if [ -n "$want" ]; then
    mkdir -p "$(dirname "$DROPIN")"
    echo "$want" >"$DROPIN"
  else
    rm -f "$DROPIN"
  fi
  systemctl daemon-reload
}

# The first xl create after unetbackd got ready is checked against its readiness (READY_US).
READY_CHECK_PENDING=0
start_unetbackd() { # [ARG...]: added to the command line (the B variant's); env: START_ENV
  set_dropin "$@"
  local t0 rc
  t0=$(now)
  systemctl start "$UNIT"
  rc=$?
  fig unetbackd.systemctl_start_s "$(since "$t0")"
  UNETBACKD_PID=$(unit_prop MainPID)
  [ "$UNETBACKD_PID" = 0 ] && UNETBACKD_PID=
  READY_US=$(unit_prop ActiveEnterTimestampMonotonic)
  [ "$READY_CHECK_PENDING" = 0 ] && READY_CHECK_PENDING=1
  # Type=notify: systemctl start returned at READY=1, which the daemon sends once it serves
  # xenstore; its control socket must answer at once, without waiting.
  "$CTL" list >/dev/null 2>&1
  local at_once=$?
  wait_for 30 "$CTL" list
  local st=$?
  [ $rc = 0 ] || st=1
  check "unetbackd.start" $st "systemctl start $UNIT rc=$rc, pid ${UNETBACKD_PID:-none}, control socket answers"
  check "systemd.ready_means_serving" $at_once "unetback-ctl list right after systemctl start returned: rc=$at_once"
  return $st
}

stop_unetbackd() {
  [ -n "$UNETBACKD_PID" ] || [ "$(systemctl is-active "$UNIT")" = active ] || return 0
  local t0 code status
  t0=$(now)
  systemctl stop "$UNIT"
  fig unetbackd.systemctl_stop_s "$(since "$t0")"
  # ExecMainCode 1: the process exited (2 would be: killed by a signal), with ExecMainStatus.
  code=$(unit_prop ExecMainCode)
  status=$(unit_prop ExecMainStatus)
  check "unetbackd.stop" "$([ "$code" = 1 ] && [ "$status" = 0 ] && echo 0 || echo 1)" \
    "systemctl stop: exit code $code status $status after SIGTERM ($(since "$t0") s), result $(unit_prop Result)"
  UNETBACKD_PID=
}

# xl_create_logged TAG CFG: xl create, timed and checked, its log in out/. Status: xl's.
xl_create_logged() {
  local t0 rc
  t0=$(now)
  xl -vvv create "$2" >"$OUT/xl-create-$1.log" 2>&1
  rc=$?
  fig "$1.create_s" "$(since "$t0")"
  check "$1.xl_create" $rc "xl create rc=$rc"
  [ $rc = 0 ] && return 0
  grep -E "error|ERROR|unable|timed out|hotplug" "$OUT/xl-create-$1.log" | tail -8 | sed 's/^/XENLAB   xl: /'
  xl dmesg 2>&1 | tail -8 | sed 's/^/XENLAB   xen: /' # the hypervisor's side of a refusal
  return 1
}

# xl_create TAG CFG NAME IP: creates, times it, waits for ping. Status 0 when pingable.
xl_create() {
  local tag=$1 cfg=$2 name=$3 ip=$4 t0 rc
  if [ "$READY_CHECK_PENDING" = 1 ] && [ -n "$UNETBACKD_PID" ]; then
    # The first xl create served by unetbackd.service: its READY=1 came before it.
    local c_us
    c_us=$(mono_us)
    check systemd.ready_before_xl_create "$([ "${READY_US:-0}" -gt 0 ] && [ "$READY_US" -lt "$c_us" ] && echo 0 || echo 1)" \
      "READY=1 at monotonic ${READY_US:-0} us, xl create at $c_us us"
    fig systemd.ready_to_xl_create_s "$(awk -v a="${READY_US:-0}" -v b="$c_us" 'BEGIN{printf "%.3f", (b - a) / 1e6}')"
    READY_CHECK_PENDING=2
  fi
  xl_create_logged "$tag" "$cfg" || return 1
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

# domain_evtchn_lines DOMAIN REMOTE: the event channels DOMAIN holds to domain REMOTE
# (lsevtchn: "Remote Domain N"; dom0's lsevtchn sees every domain's, a driver domain's too);
# evtchn_lines REMOTE: dom0's.
domain_evtchn_lines() { lsevtchn "$1" 2>/dev/null | grep -E "Remote Domain $2([^0-9]|$)"; }
evtchn_lines() { domain_evtchn_lines 0 "$1"; }
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
# DESTROY_WITH: the command that destroys the domain (virsh's for the libvirt domain); its log
# (and libvirt's libxl log, DESTROY_LOG) is searched for libxl's "wanted state 6 ok".
DESTROY_WITH="xl -vvv destroy" DESTROY_LOG=
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
  local lines0=0
  [ -n "$DESTROY_LOG" ] && lines0=$(wc -l <"$DESTROY_LOG" 2>/dev/null || echo 0)
  $DESTROY_WITH "$name" >"$OUT/xl-destroy-$tag.log" 2>&1
  rc=$?
  fig "$tag.destroy_s" "$(since "$t0")"
  wait $watcher
  [ -n "$DESTROY_LOG" ] && tail -n +$((lines0 + 1)) "$DESTROY_LOG" >>"$OUT/xl-destroy-$tag.log" 2>/dev/null
  local tool=${DESTROY_WITH#timeout [0-9]* } # xl, or virsh (under its time limit)
  check "$tag.xl_destroy" $rc "${tool%% *} destroy rc=$rc"
  local seen6=1
  grep -q "wanted state 6 ok" "$OUT/xl-destroy-$tag.log" && seen6=0
  grep -qw 6 "/tmp/states-$tag" && seen6=0
  check "$tag.backend_state6" $seen6 "states seen: $(cat "/tmp/states-$tag"); libxl: $(grep -o 'wanted state 6 [a-z ]*[0-9]*' "$OUT/xl-destroy-$tag.log" | tail -1)"
  check_vif_gone "$tag" "$d" "vif$d.0" "$ports" "${3:-0}"
}

# The kernel netback's turn: unetbackd.service stopped (it would race the kernel netback for
# every vif), then xen-netback loaded by name with -i (--ignore-install: skips the package's
# "install xen-netback /bin/false", which is there to stop exactly this load).
kernel_netback_load() {
  stop_unetbackd
  modprobe -i xen-netback
}

# The 2-vCPU domU on the kernel netback: the baseline of unetbackd's multi-queue scenario.
kernel_mq() { # [long]: also network-detach/attach, as unetbackd's scenario does
  local tag=kernel.mq d q
  say "=== kernel xen-netback: 2-vCPU domU"
  kernel_netback_load
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
  kernel_netback_load
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
  # unetbackd runs under systemd: its lines are in the journal (the cursor marks where this
  # step starts).
  mark=$(journalctl -u $UNIT -n 1 --show-cursor 2>/dev/null | sed -n 's/^-- cursor: //p')
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
  wait_for 10 vif_connected "$d"
  check "$tag.connected_again" $? \
    "frontend state $(xenstore-read "$fe/state" 2>&1), backend state $(xenstore-read "$be/state" 2>&1)"
  # journald takes the daemon's stderr stream a moment later: look for up to 5 s.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    seen=$(journalctl -u $UNIT ${mark:+--after-cursor="$mark"} -o cat 2>/dev/null |
      grep -o 'backend state -> [A-Za-z]*' | awk '{print $4}' | tr '\n' ' ')
    echo "$seen" | grep -q 'Reconfigured Connected' && break
    sleep 0.5
  done
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
      profile_d2d "$tag"
      if full; then # the quick run counts the syscalls of guest RX and TX below only
        syscall_window "$tag" domu_to_domu in_domu 10.99.0.2 -c 10.99.0.5 -f m -t "$SECS"
        syscall_window "$tag" domu_to_domu_reverse in_domu 10.99.0.2 -c 10.99.0.5 -f m -t "$SECS" -R
      fi
      destroy_checked "$tag.d2d" labu2 "$maps1"
    else
      xl destroy labu2 >/dev/null 2>&1
    fi
    # Apart from the throughput runs above: the same transfers with unetbackd's syscalls counted.
    syscall_window "$tag" guest_rx timeout $((SECS + 40)) iperf3 -c 10.99.0.2 -f m -t "$SECS"
    syscall_window "$tag" guest_tx timeout $((SECS + 40)) iperf3 -c 10.99.0.2 -f m -t "$SECS" -R
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

# domU -> domU on unetbackd's internal switch: labu and labu2 with bridge=unetback:lab and
# script=vif-unetback, so a frame goes from one domU's TX ring to the other's RX ring inside
# unetbackd (one grant copy per chunk, source gref to destination gref) and crosses no TAP and
# no dom0 bridge, where the kernel netback's path (and unetbackd's on xenbr0) is TX copy, dom0's
# bridge, RX copy. The switch's uplink TAP ubup0 sits on xenbr0, so dom0 still reaches both
# domUs (their command server, ping). Figures unetbackd_sw.rN.domu_to_domu*, compared with the
# kernel netback's domU -> domU over xenbr0 in the same round (ratio domu_to_domu_switch).
switch_d2d_round() { # ROUND
  local tag=unetbackd_sw.r$1 sw0 sw1 maps1=0
  say "=== round $1: unetbackd, domU -> domU on its internal switch"
  stop_unetbackd # the switch and its uplink exist from the daemon's start (it may be running)
  start_unetbackd --switch-uplink lab=ubup0 || return
  ip link set ubup0 master xenbr0 && ip link set ubup0 up
  check "$tag.uplink_on_bridge" $? "the switch's uplink TAP ubup0 on xenbr0"
  # labu's rings stay mapped while labu2 comes and goes: what labu2's teardown may leave.
  xl_create "$tag" /tmp/u1s.cfg labu 10.99.0.2 && maps1=$(gntdev_maps) &&
    xl_create "$tag.d2d" /tmp/u2s.cfg labu2 10.99.0.5
  if [ $? = 0 ]; then
    sw0=$(ub_counter tx_switched)
    iperf_d2d "$tag"
    sw1=$(ub_counter tx_switched)
    # The iperf3 traffic went through the switch: its packets are counted as switched.
    check "$tag.switched" "$([ "$((sw1 - sw0))" -gt 1000 ] && echo 0 || echo 1)" \
      "tx_switched grew by $((sw1 - sw0)) during the two transfers"
    fig "$tag.tx_switched" "$((sw1 - sw0))"
    "$CTL" stats >"$OUT/ctl-stats-$tag.txt" 2>&1
  fi
  xl list labu2 >/dev/null 2>&1 && destroy_checked "$tag.d2d" labu2 "$maps1"
  xl list labu >/dev/null 2>&1 && destroy_checked "$tag" labu
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
  profile_window "$tag" 10.99.0.3 guest_rx -P 2
  profile_window "$tag" 10.99.0.3 guest_tx -P 2
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
  if [ "$be" = kernel ]; then kernel_netback_load; else start_unetbackd || return; fi
  if xl_create "$tag" /tmp/shim.cfg labshim 10.99.0.4; then
    ping_rtt "$tag" 10.99.0.4
    iperf "$tag" 10.99.0.4 guest_rx
    iperf "$tag" 10.99.0.4 guest_tx
    # netfront-shim starts over (state 1) when its backend closes: the guest whose vif the
    # restarted daemon adopts without help from inside the guest.
    [ "$be" = unetbackd ] && sigkill_restart "$tag" 10.99.0.4
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


# SIGKILL of the daemon: systemd restarts it (Restart=on-failure), the new daemon adopts the vif
# (docs/operator-guide.md, "Restart, takeover and crash recovery") and the guest at IP answers ping again.
sigkill_restart() { # TAG IP
  local tag=$1 ip=$2 old=$UNETBACKD_PID n0 n1 new t0 rc
  n0=$(unit_prop NRestarts)
  say "=== SIGKILL of unetbackd (pid $old), restart by systemd"
  t0=$(now)
  kill -KILL "$old"
  wait_for 30 sh -c "[ \"\$(systemctl show -p NRestarts --value $UNIT)\" -gt $n0 ] && systemctl is-active -q $UNIT && [ \"\$(systemctl show -p MainPID --value $UNIT)\" != $old ]"
  rc=$?
  fig systemd.restart_after_sigkill_s "$(since "$t0")"
  n1=$(unit_prop NRestarts)
  new=$(unit_prop MainPID)
  check systemd.restart_after_sigkill $rc "NRestarts $n0 -> $n1, pid $old -> $new, $(systemctl is-active $UNIT)"
  [ "$new" != 0 ] && UNETBACKD_PID=$new
  wait_for 60 ping -c1 -W1 "$ip"
  rc=$?
  fig systemd.served_after_restart_s "$(since "$t0")"
  check systemd.served_after_restart $rc "$ip answers ping again after the restart ($(since "$t0") s after the SIGKILL)"
  [ $rc = 0 ] && iperf "$tag.restarted" "$ip" guest_rx
}

# ---------------------------------------------------------------------------------------------
# A backend restart the guest does not notice (issue 20): labu's Linux netfront, served by
# unetbackd.service, across a SIGKILL of the daemon (systemd starts it again and the new process
# adopts the vif from its state record: rings mapped again, the frontend's ports bound again,
# the same persistent TAP on xenbr0), across a planned takeover (systemctl restart: the old
# process hands over at a pass boundary) and across an upgrade in place (unetback-ctl upgrade:
# the same process hands over to its own next image, execve, no fork and no unit restart).
# Neither side's state may leave 4 (a Linux netfront
# that sees its backend leave Connected tears its rings down), a TCP stream and a 50 ms pinger
# run across, and unetback-ctl list says how the vif was taken (recovered, taken_over).
adopt_states_start() { # TAG DOMID: the frontend's and the backend's state every 20 ms
  rm -f "/tmp/adopt-stop-$1"
  (
    while [ ! -e "/tmp/adopt-stop-$1" ]; do
      echo "$(xenstore-read "/local/domain/$2/device/vif/0/state" 2>/dev/null || echo gone)/$(xenstore-read "$BE/$2/0/state" 2>/dev/null || echo gone)"
      sleep 0.02
    done | uniq >"/tmp/adopt-states-$1"
  ) &
  ADOPT_STATES_PID=$!
}
adopt_states_end() { # TAG: stops the watcher (its states, in order: /tmp/adopt-states-TAG)
  touch "/tmp/adopt-stop-$1"
  wait "$ADOPT_STATES_PID" 2>/dev/null
}
adopt_states_stop() { # TAG: checks TAG.states_stayed_4
  local seen
  adopt_states_end "$1"
  seen=$(sort -u "/tmp/adopt-states-$1" | tr '\n' ' ')
  check "$1.states_stayed_4" "$([ "$seen" = "4/4 " ] && echo 0 || echo 1)" "frontend/backend states seen every 20 ms: $seen"
}
adopt_step() { # TAG KIND(crash|takeover|upgrade) DOMID IP
  local tag=$1 kind=$2 d=$3 ip=$4 old=$UNETBACKD_PID want ifi0 ifi1 master t0 rc pidcmp='!='
  ifi0=$(cat "/sys/class/net/vif$d.0/ifindex" 2>/dev/null)
  outage_start "$tag" "$ip"
  stream_start "$tag" "$ip"
  adopt_states_start "$tag" "$d"
  t0=$(now)
  if [ "$kind" = crash ]; then
    want=recovered
    kill -KILL "$old"
  elif [ "$kind" = upgrade ]; then
    # A package upgrade, as an operator makes it: dpkg -i of the package again (its postinst
    # runs with the old version as $2) makes unetback-ctl upgrade the running daemon: it starts
    # /usr/sbin/unetbackd again as its successor, which sets up while the old one serves, asks
    # for the handover and becomes the unit's MainPID (MAINPID=). With --programs-from-share the
    # daemon is not the package's: unetback-ctl upgrade directly.
    want=taken_over
    if [ "$FROM_SHARE" = 1 ]; then
      "$CTL" upgrade >"$OUT/upgrade-$tag.txt" 2>&1
    else
      dpkg -i "$H"/debs/unetback_*.deb >"$OUT/upgrade-$tag.txt" 2>&1
    fi
    rc=$?
    # dpkg's whole run (unpack, postinst, daemon-reload): adopted_s below counts it too.
    fig "$tag.trigger_s" "$(since "$t0")"
    say "after the upgrade: unit $(systemctl show -p ActiveState -p SubState --value "$UNIT" | tr '\n' '/')"
    check "$tag.to_successor" "$([ $rc = 0 ] && grep -q '^upgraded: pid' "$OUT/upgrade-$tag.txt" && echo 0 || echo 1)" \
      "$([ "$FROM_SHARE" = 1 ] && echo "unetback-ctl upgrade" || echo "dpkg -i (the postinst's unetback-ctl upgrade)") rc=$rc: $(grep -E 'upgraded|serving again|unetback-ctl' "$OUT/upgrade-$tag.txt" | tr '\n' ' ')"
  else
    want=taken_over
    systemctl restart "$UNIT"
  fi
  wait_for 30 sh -c "systemctl is-active -q $UNIT && [ \"\$(systemctl show -p MainPID --value $UNIT)\" $pidcmp $old ] && '$CTL' list 2>/dev/null | grep -qw $want"
  rc=$?
  fig "$tag.adopted_s" "$(since "$t0")"
  UNETBACKD_PID=$(unit_prop MainPID)
  [ "$kind" = upgrade ] && check "$tag.unit_running" "$([ "$(unit_prop ActiveState)/$(unit_prop SubState)" = active/running ] && echo 0 || echo 1)" \
    "systemd: $(unit_prop ActiveState)/$(unit_prop SubState), NRestarts $(unit_prop NRestarts), after RELOADING=1, MAINPID= and the successor's READY=1"
  check "$tag.adopted" $rc "pid $old -> $UNETBACKD_PID ($kind), unetback-ctl list: $("$CTL" list 2>&1 | tail -n +2 | tr -s ' ' | tr '\n' ';')"
  stream_stop "$tag"
  outage_stop "$tag"
  adopt_split "$tag" "$kind" "$t0" "$old" "$UNETBACKD_PID" "$d"
  adopt_states_stop "$tag"
  ifi1=$(cat "/sys/class/net/vif$d.0/ifindex" 2>/dev/null)
  master=$(basename "$(readlink "/sys/class/net/vif$d.0/master" 2>/dev/null)" 2>/dev/null)
  check "$tag.same_tap" "$([ -n "$ifi0" ] && [ "$ifi0" = "$ifi1" ] && [ "$master" = xenbr0 ] && echo 0 || echo 1)" \
    "vif$d.0 ifindex $ifi0 -> ${ifi1:-gone}, on ${master:-no bridge}"
  ping -c1 -W2 "$ip" >/dev/null 2>&1
  check "$tag.ping" $? "$ip answers after the $kind"
}
# adopt_ms NAME PID: the realtime (s) of unetbackd's milestone NAME logged by process PID
# ("milestone NAME realtime=S.US pid=PID ...", backend/daemon/milestone.hpp), from the journal
# lines adopt_split saved; empty if not logged.
adopt_ms() {
  sed -n "s/.*milestone $1 realtime=\([0-9.]*\) pid=$2\b.*/\1/p" "$ADOPT_JOURNAL" | head -1
}
# adopt_vif_ms NAME PID DOMID: the same for a milestone of vif DOMID/0 ("... vif=DOMID/0").
adopt_vif_ms() {
  sed -n "s/.*milestone $1 realtime=\([0-9.]*\) pid=$2 vif=$3\/0.*/\1/p" "$ADOPT_JOURNAL" | head -1
}
# adopt_fig TAG.NAME FROM TO: TO - FROM (realtime seconds) in ms as a figure, if both are known.
adopt_fig() {
  [ -n "$2" ] && [ -n "$3" ] && fig "$1" "$(awk -v a="$2" -v b="$3" 'BEGIN{printf "%.1f", (b - a) * 1000}')"
}
# adopt_split TAG KIND T0 OLD_PID NEW_PID DOMID: where the ping gap of the step went. T0 is when
# the lab killed the daemon or ran systemctl restart (date +%s.%N, the clock of ping -D and of
# the daemon's milestones). Figures (ms):
#   request_to_signal_ms   T0 to the old daemon's SIGTERM (takeover: systemctl and systemd)
#   request_to_upgrade_ms  upgrade: T0 to the daemon's upgrade_requested (unetback-ctl)
#   successor_to_main_ms   upgrade: the successor's fork to its main() (exec, dynamic linking;
#                          the old daemon serves meanwhile)
#   successor_setup_ms     upgrade: its main() to its tunables read and threads started
#   successor_ask_ms       upgrade: from then to the old daemon's SIGUSR2 (the lock asked for)
#   exit_to_lock_ms        upgrade: the old daemon's exit to the successor's lock
#   restart_query_ms       SIGTERM to handover_requested (the sd-bus question: a restart job?)
#   handover_ms            SIGTERM to handed_over (every vif stopped at a pass boundary)
#   handed_over_to_exit_ms handed_over to the _exit (the owner node removed from xenstore)
#   exit_to_exec_ms        the old process's exit to the new one's main() (systemd, exec)
#   kill_to_exec_ms        T0 to the new process's main()
#   fork_to_main_ms        systemd's ExecMainStartTimestamp to main() (exec, dynamic linking)
#   exec_to_xenstore_ms    main() to the xenstore connection (hypervisor opened)
#   exec_to_setup_ms       main() to setup_done (lock, tunables, threads, watches: the loop starts)
#   setup_to_adopted_ms    setup_done to the vif's adoption (rings mapped, ports bound, notified),
#                          in three: setup_to_config_ms (the scan, the backend's and frontend's
#                          keys read), config_to_rings_ms (the record, rings mapped, ports bound,
#                          TAP attached, queues started), rings_to_adopted_ms (the vif's watches)
#   adopted_to_reply_ms    the adoption to the first ping reply after the gap
#   gap_after_start_ms     the part of the longest ping gap after the new process's main()
#   gap_before_start_ms    the part before it
adopt_split() {
  local tag=$1 kind=$2 t0=$3 old=$4 new=$5 d=$6 sig req hov oexit nmain nxs nsetup nadopt exec_at gap a b
  local ncfg nrings upg nsucc ntun nlock
  ADOPT_JOURNAL=$OUT/journal-$tag.txt
  journalctl -u "$UNIT" --since "@${t0%.*}" -o cat >"$ADOPT_JOURNAL" 2>&1
  sig=$(adopt_ms signal_seen "$old")
  upg=$(adopt_ms upgrade_requested "$old")
  nsucc=$(adopt_ms successor_started "$old")
  req=$(adopt_ms handover_requested "$old")
  hov=$(adopt_ms handed_over "$old")
  oexit=$(adopt_ms exit "$old")
  nmain=$(adopt_ms main_entered "$new")
  nxs=$(adopt_ms xenstore_connected "$new")
  nsetup=$(adopt_ms setup_done "$new")
  ntun=$(adopt_ms tunables_read "$new")
  nlock=$(adopt_ms lock_taken "$new")
  nadopt=$(adopt_vif_ms vif_adopted "$new" "$d")
  ncfg=$(adopt_vif_ms vif_config_read "$new" "$d")
  nrings=$(adopt_vif_ms vif_rings_taken "$new" "$d")
  check "$tag.milestones" "$([ -n "$nmain" ] && [ -n "$nsetup" ] && [ -n "$nadopt" ] &&
    { [ "$kind" = crash ] || [ -n "$hov" ]; } && { [ "$kind" != upgrade ] || [ -n "$nsucc" ]; } && echo 0 || echo 1)" \
    "old pid $old: signal_seen=${sig:--} upgrade_requested=${upg:--} successor_started=${nsucc:--} handover_requested=${req:--} handed_over=${hov:--} exit=${oexit:--}; new pid $new: main_entered=${nmain:--} xenstore_connected=${nxs:--} setup_done=${nsetup:--} vif_adopted=${nadopt:--}; T0=$t0"
  if [ "$kind" = upgrade ]; then
    adopt_fig "$tag.request_to_upgrade_ms" "$t0" "$upg"
    adopt_fig "$tag.successor_to_main_ms" "$nsucc" "$nmain"
    adopt_fig "$tag.successor_setup_ms" "$nmain" "$ntun"
    adopt_fig "$tag.successor_ask_ms" "$ntun" "$sig"
    adopt_fig "$tag.handover_ms" "$sig" "$hov"
    adopt_fig "$tag.handed_over_to_exit_ms" "$hov" "$oexit"
    adopt_fig "$tag.exit_to_lock_ms" "$oexit" "$nlock"
  fi
  if [ "$kind" = takeover ]; then
    adopt_fig "$tag.request_to_signal_ms" "$t0" "$sig"
    adopt_fig "$tag.restart_query_ms" "$sig" "$req"
    adopt_fig "$tag.handover_ms" "$sig" "$hov"
    adopt_fig "$tag.handed_over_to_exit_ms" "$hov" "$oexit"
    adopt_fig "$tag.exit_to_exec_ms" "$oexit" "$nmain"
  fi
  adopt_fig "$tag.kill_to_exec_ms" "$t0" "$nmain"
  # systemd's fork of the main process, in microseconds (systemctl show --timestamp=us); an
  # upgrade's successor is forked by the old daemon, not by systemd.
  if [ "$kind" != upgrade ]; then
    exec_at=$(systemctl show --timestamp=us -p ExecMainStartTimestamp --value "$UNIT" 2>/dev/null)
    [ -n "$exec_at" ] && exec_at=$(date -d "$exec_at" +%s.%N 2>/dev/null)
    adopt_fig "$tag.fork_to_main_ms" "$exec_at" "$nmain"
  fi
  adopt_fig "$tag.exec_to_xenstore_ms" "$nmain" "$nxs"
  adopt_fig "$tag.exec_to_setup_ms" "$nmain" "$nsetup"
  adopt_fig "$tag.setup_to_adopted_ms" "$nsetup" "$nadopt"
  adopt_fig "$tag.setup_to_config_ms" "$nsetup" "$ncfg"
  adopt_fig "$tag.config_to_rings_ms" "$ncfg" "$nrings"
  adopt_fig "$tag.rings_to_adopted_ms" "$nrings" "$nadopt"
  # The longest gap between ping replies (as outage_stop), by its ends A and B.
  gap=$(awk -F'[][]' '/bytes from/ {t = $2 + 0; if (n++ && t - p > m) {m = t - p; a = p; b = t}; p = t}
    END {if (n >= 2) printf "%.6f %.6f", a, b}' "$OUTAGE_LOG")
  a=${gap% *} b=${gap#* }
  [ -n "$gap" ] || return 0
  adopt_fig "$tag.adopted_to_reply_ms" "$nadopt" "$b"
  [ -n "$nmain" ] || return 0
  # The part of the gap after main(): from whichever is later, main() or the last reply.
  fig "$tag.gap_after_start_ms" "$(awk -v a="$a" -v b="$b" -v m="$nmain" 'BEGIN{s = (m > a) ? m : a; printf "%.1f", (b - s) * 1000}')"
  fig "$tag.gap_before_start_ms" "$(awk -v a="$a" -v b="$b" -v m="$nmain" 'BEGIN{e = (m < b) ? m : b; d = e - a; printf "%.1f", (d > 0 ? d : 0) * 1000}')"
}
# The baseline (issue 20): the same guest on the kernel's xen-netback across a reload of the
# module. Linux refuses `rmmod xen-netback` while a vif is live (each holds a reference: "in
# use"), so the reload is what an operator can do: the vif unbound from the driver (sysfs
# /sys/bus/xen-backend/drivers/vif/unbind: the driver's remove, as its module exit would do),
# rmmod, modprobe (the driver probes the device again). Whatever the guest does is the
# result: the checks pass once the reload was made and watched for ADOPT_KERNEL_WINDOW seconds;
# only a failure to measure (no domU, no pings before, the module not reloaded) fails them.
# Figures:
#   adopt.kernel.reload.rmmod_live_rc  rmmod's status with the vif live (1: refused, in use)
#   adopt.kernel.reload.unbind_rc      the unbind's status
#   adopt.kernel.reload.rmmod_rc       rmmod's status after the unbind (0: the module went)
#   adopt.kernel.reload.guest_lost   1 if no ping reply came in the window after the reload
#   adopt.kernel.reload.outage_ms    the longest gap between replies, if replies came again
#   adopt.kernel.reload.window_ms    the time watched after the reload began
#   adopt.kernel.reload.states_seen  frontend/backend states seen every 20 ms, in order
ADOPT_KERNEL_WINDOW=20
adopt_kernel_reload() {
  local tag=adopt.kernel.reload d t0 t1 rc out after lost ms states
  say "=== the baseline: the kernel's xen-netback reloaded under a running guest"
  kernel_netback_load
  if ! lsmod | grep -q '^xen_netback'; then
    check "$tag.measured" 1 "xen-netback did not load (modprobe -i xen-netback)"
    return 1
  fi
  if ! xl_create adopt.kernel /tmp/u1.cfg labu 10.99.0.2; then
    check "$tag.measured" 1 "the domU did not come up on the kernel netback"
    xl destroy labu >/dev/null 2>&1
    wait_for 20 rmmod xen-netback
    return 1
  fi
  d=$(xl domid labu)
  outage_start "$tag" 10.99.0.2
  adopt_states_start "$tag" "$d"
  sleep 1
  out=$(timeout 30 rmmod xen-netback 2>&1)
  rc=$?
  fig "$tag.rmmod_live_rc" "$rc"
  say "rmmod xen-netback with the vif live: rc=$rc${out:+: $out}"
  t0=$(now)
  if [ $rc != 0 ]; then
    timeout 30 sh -c "echo vif-$d-0 >/sys/bus/xen-backend/drivers/vif/unbind"
    fig "$tag.unbind_rc" $?
    out=$(timeout 30 rmmod xen-netback 2>&1)
    rc=$?
    fig "$tag.rmmod_rc" "$rc"
  fi
  modprobe -i xen-netback
  fig "$tag.modprobe_rc" $?
  t1=$(now)
  fig "$tag.rmmod_modprobe_ms" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b - a) * 1000}')"
  sleep "$ADOPT_KERNEL_WINDOW"
  kill -INT "$OUTAGE_PID" 2>/dev/null
  wait "$OUTAGE_PID" 2>/dev/null
  adopt_states_end "$tag"
  states=$(paste -sd, "/tmp/adopt-states-$tag")
  fig "$tag.window_ms" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%d", (b - a) * 1000}')"
  # Replies after the reload began (t1: the module back), and the longest gap across it.
  after=$(awk -F'[][]' -v t="$t1" '/bytes from/ && $2 + 0 > t {n++} END {print n + 0}' "$OUTAGE_LOG")
  lost=$([ "$after" = 0 ] && echo 1 || echo 0)
  fig "$tag.guest_lost" "$lost"
  ms=$(awk -F'[][]' '/bytes from/ {t = $2 + 0; if (n++) { g = t - p; if (g > m) m = g }; p = t}
    END {if (n >= 2) printf "%d", m * 1000}' "$OUTAGE_LOG")
  [ "$lost" = 0 ] && [ -n "$ms" ] && fig "$tag.outage_ms" "$ms"
  fig "$tag.states_seen" "${states:-none}"
  local before
  before=$(awk -F'[][]' -v t="$t0" '/bytes from/ && $2 + 0 < t {n++} END {print n + 0}' "$OUTAGE_LOG")
  check "$tag.measured" "$([ "$before" -gt 0 ] && [ -n "$states" ] && [ "$rc" = 0 ] && echo 0 || echo 1)" \
    "unbind, rmmod rc=$rc${out:+ ($out)}, modprobe; $before ping replies before, $after in the ${ADOPT_KERNEL_WINDOW} s after; guest $([ "$lost" = 1 ] && echo lost || echo "answered again, longest gap ${ms:-?} ms"); states (frontend/backend): ${states:-none}; backend now $(xenstore-read "$BE/$d/0/state" 2>&1), frontend $(xenstore-read "/local/domain/$d/device/vif/0/state" 2>&1)"
  xl destroy labu >/dev/null 2>&1
  wait_for 20 rmmod xen-netback
  check "$tag.rmmod" $? "xen-netback unloaded after the baseline"
  integrity "$tag"
}
adopt_part() {
  local tag=adopt.unetbackd d
  # The kernel netback's reload first, as the baseline (where the module exists; full run).
  full && modinfo xen-netback >/dev/null 2>&1 && adopt_kernel_reload
  say "=== unetbackd: SIGKILL and a planned takeover under a running guest (issue 20)"
  start_unetbackd || return
  if xl_create "$tag" /tmp/u1.cfg labu 10.99.0.2; then
    d=$(xl domid labu)
    adopt_step "$tag.crash" crash "$d" 10.99.0.2
    # The planned takeover and the upgrade through dpkg -i: full run (e2e-adopt and root-package
    # run both on xensim in every test run); the quick run keeps the crash recovery.
    if full || [ "$ONLY" = adopt ]; then
      adopt_step "$tag.takeover" takeover "$d" 10.99.0.2
      adopt_step "$tag.upgrade" upgrade "$d" 10.99.0.2
    fi
    iperf "$tag.after" 10.99.0.2 guest_rx
    iperf "$tag.after" 10.99.0.2 guest_tx
    destroy_checked "$tag" labu
  else
    xl destroy labu >/dev/null 2>&1
  fi
  integrity "$tag"
  stop_unetbackd
}

# ---------------------------------------------------------------------------------------------
# Guest lifecycle (issue 18): xl save + xl restore, xl migrate to this same host, and a TCP
# stream across a migration, on the kernel netback (the baseline) and on unetbackd.
# The outage of each step is measured by a ping every 50 ms from dom0 (ping -D: a timestamp per
# reply): the longest gap between two replies, from the last one before to the first one after.
OUTAGE_PID= OUTAGE_LOG=
outage_start() { # TAG IP
  OUTAGE_LOG=$OUT/ping-$1.log
  ping -D -n -i 0.05 -W 1 "$2" >"$OUTAGE_LOG" 2>&1 &
  OUTAGE_PID=$!
  wait_for 10 grep -q 'bytes from' "$OUTAGE_LOG"
}
# outage_stop TAG: stops the pinger, records TAG.outage_ms and checks that it saw replies on
# both sides of the step. RESUMED_AT (date +%s.%N, the clock of ping -D) is when xl had
# finished (the domain runs again): TAG.first_ping_after_ms is the part of the outage after it,
# the time the guest's vif took to be served again.
RESUMED_AT=
outage_stop() { # TAG [FIGURE: default outage_ms]
  local tag=$1 what=${2:-outage_ms} ms first
  sleep 1 # replies after the first one that answered again
  kill -INT "$OUTAGE_PID" 2>/dev/null
  wait "$OUTAGE_PID" 2>/dev/null
  ms=$(awk -F'[][]' '/bytes from/ {t = $2 + 0; if (n++) { g = t - p; if (g > m) m = g }; p = t}
    END {if (n >= 2) printf "%d", m * 1000}' "$OUTAGE_LOG")
  if [ -n "$RESUMED_AT" ]; then
    first=$(awk -F'[][]' -v r="$RESUMED_AT" '/bytes from/ && $2 + 0 >= r {printf "%d", ($2 - r) * 1000; exit}' "$OUTAGE_LOG")
    [ -n "$first" ] && fig "$tag.first_ping_after_ms" "$first"
    RESUMED_AT=
  fi
  if [ -n "$ms" ]; then
    fig "$tag.$what" "$ms"
    check "$tag.outage_measured" 0 "longest gap between ping replies $ms ms ($(grep -c 'bytes from' "$OUTAGE_LOG") replies at 50 ms)"
  else
    check "$tag.outage_measured" 1 "fewer than 2 ping replies: $(tail -2 "$OUTAGE_LOG" | tr '\n' ' ')"
  fi
}
# vif_connected DOMID: the domain's vif 0, frontend and backend both Connected (4), where its
# backend is dom0.
vif_connected() {
  [ "$(xenstore-read "/local/domain/$1/device/vif/0/state" 2>/dev/null)" = 4 ] &&
    [ "$(xenstore-read "$BE/$1/0/state" 2>/dev/null)" = 4 ]
}
# served_again TAG NAME IP OLD_DOMID [QUEUES]: after a save/restore or a migration, the domain
# runs under a new domid, its vif is Connected (with QUEUES queues) and it pings.
served_again() {
  local tag=$1 name=$2 ip=$3 d0=$4 want_q=${5:-} d1 q
  d1=$(xl domid "$name" 2>/dev/null)
  check "$tag.new_domid" "$([ -n "$d1" ] && [ "$d1" != "$d0" ] && echo 0 || echo 1)" "domid $d0 -> ${d1:-none}"
  [ -n "$d1" ] || return 1
  wait_for 60 ping -c1 -W1 "$ip"
  check "$tag.ping" $? "$ip answers ping under domid $d1"
  wait_for 30 vif_connected "$d1"
  check "$tag.connected" $? "vif $d1/0: frontend state $(xenstore-read "/local/domain/$d1/device/vif/0/state" 2>&1), backend state $(xenstore-read "$BE/$d1/0/state" 2>&1)"
  if [ -n "$want_q" ]; then
    q=$(xenstore-read "/local/domain/$d1/device/vif/0/multi-queue-num-queues" 2>/dev/null)
    check "$tag.queues" "$([ "${q:-1}" = "$want_q" ] && echo 0 || echo 1)" "frontend multi-queue-num-queues=${q:-unset} after the resume (want $want_q)"
  fi
}
# STREAM=1: an iperf3 TCP stream (domU -> dom0: dom0's client reports what it received per
# 100 ms) runs across the step: stream_start before it, stream_stop TAG after it. The same
# connection must carry data again afterwards (no reset: iperf3 neither fails nor ends), and
# TAG.stall_ms is the longest run of 100 ms intervals without a byte.
STREAM_PID= STREAM_LOG=
stream_start() { # TAG IP
  STREAM_LOG=$OUT/iperf3-$1.stream.log
  timeout 300 iperf3 -c "$2" -R -f m -t 240 -i 0.1 >"$STREAM_LOG" 2>&1 &
  STREAM_PID=$!
  wait_for 20 sh -c "grep -c 'Mbits/sec' '$STREAM_LOG' | awk '{exit !(\$1 >= 10)}'"
}
stream_stop() { # TAG [FIGURE: default stall_ms]
  local tag=$1 what=${2:-stall_ms} st stall after rates
  sleep 3 # the stream after the step
  kill -0 "$STREAM_PID" 2>/dev/null
  st=$? # 0: iperf3 still running: the connection survived
  kill -INT "$STREAM_PID" 2>/dev/null
  wait "$STREAM_PID" 2>/dev/null
  # Interval lines: "[  5]  12.30-12.40  sec  1.25 MBytes   105 Mbits/sec"
  rates=$(awk '/ sec .*bits\/sec/ && !/sender|receiver/ {
      for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec$/) r = $(i - 1) + 0
      print r }' "$STREAM_LOG")
  stall=$(echo "$rates" | awk '{ if ($1 == 0) { z++; if (z > m) m = z } else z = 0; n++ } END {if (n) printf "%d", m * 100}')
  after=$(echo "$rates" | tail -20 | awk '$1 > 0 {n++} END {print n + 0}')
  grep -qiE 'reset|error|unable' "$STREAM_LOG" && st=1
  check "$tag.stream_survived" "$([ $st = 0 ] && [ "$after" -ge 5 ] && echo 0 || echo 1)" \
    "iperf3 $([ $st = 0 ] && echo "still running" || echo "ended or failed") after the step, $after of its last 20 intervals (100 ms) carried data; $(grep -iE 'reset|error|unable' "$STREAM_LOG" | head -1)"
  [ -n "$stall" ] && fig "$tag.$what" "$stall"
}
# saverestore_once TAG NAME IP [QUEUES]: xl save to a file (the domain is gone after it: its vif
# must be gone completely), xl restore from it.
saverestore_once() {
  local tag=$1 name=$2 ip=$3 d0 ports t0 rc file=/var/tmp/$2.save
  d0=$(xl domid "$name")
  ports=$(fe_ports "/local/domain/$d0/device/vif")
  outage_start "$tag" "$ip"
  [ "${STREAM:-0}" = 1 ] && stream_start "$tag" "$ip"
  t0=$(now)
  xl -vvv save "$name" "$file" >"$OUT/xl-save-$tag.log" 2>&1
  rc=$?
  fig "$tag.save_s" "$(since "$t0")"
  check "$tag.xl_save" $rc "xl save rc=$rc ($(du -m "$file" 2>/dev/null | cut -f1) MiB)"
  check_vif_gone "$tag.saved" "$d0" "vif$d0.0" "$ports"
  t0=$(now)
  xl -vvv restore "$file" >"$OUT/xl-restore-$tag.log" 2>&1
  rc=$?
  fig "$tag.restore_s" "$(since "$t0")"
  RESUMED_AT=$(now)
  check "$tag.xl_restore" $rc "xl restore rc=$rc"
  rm -f "$file"
  [ $rc = 0 ] || grep -E "error|ERROR|unable" "$OUT/xl-restore-$tag.log" | tail -5 | sed 's/^/XENLAB   xl: /'
  served_again "$tag" "$name" "$ip" "$d0" "${4:-}"
  [ "${STREAM:-0}" = 1 ] && stream_stop "$tag"
  outage_stop "$tag"
}
# checkpoint_once TAG NAME IP: xl save -c, a checkpoint: the domain suspends, its memory is
# written to a file and it resumes where it stopped (the way a failed migration or Remus/COLO
# resume it), under the same domid, with its frontends still connected. Its vif must stay
# served: the same TAP (ifindex), both states at 4 throughout, pings answered after it. A
# suspend is a shutdown to the hypervisor (xenstored fires @releaseDomain), not a domain gone.
checkpoint_once() {
  local tag=$1 name=$2 ip=$3 d0 d1 idx0 idx1 t0 rc file=/var/tmp/$2.checkpoint
  d0=$(xl domid "$name")
  idx0=$(cat "/sys/class/net/vif$d0.0/ifindex" 2>/dev/null)
  outage_start "$tag" "$ip"
  [ "${STREAM:-0}" = 1 ] && stream_start "$tag" "$ip"
  t0=$(now)
  xl -vvv save -c "$name" "$file" >"$OUT/xl-save-c-$tag.log" 2>&1
  rc=$?
  RESUMED_AT=$(now)
  fig "$tag.checkpoint_s" "$(since "$t0")"
  check "$tag.xl_save_c" $rc "xl save -c rc=$rc ($(du -m "$file" 2>/dev/null | cut -f1) MiB)"
  rm -f "$file"
  [ $rc = 0 ] || grep -E "error|ERROR|unable" "$OUT/xl-save-c-$tag.log" | tail -5 | sed 's/^/XENLAB   xl: /'
  d1=$(xl domid "$name" 2>/dev/null)
  check "$tag.same_domid" "$([ "$d1" = "$d0" ] && echo 0 || echo 1)" "domid $d0 -> ${d1:-none} (a checkpoint resumes the same domain)"
  wait_for 60 ping -c1 -W1 "$ip"
  check "$tag.ping" $? "$ip answers ping after the checkpoint"
  idx1=$(cat "/sys/class/net/vif$d0.0/ifindex" 2>/dev/null)
  check "$tag.same_tap" "$([ -n "$idx0" ] && [ "$idx1" = "$idx0" ] && echo 0 || echo 1)" "vif$d0.0 ifindex ${idx0:-none} -> ${idx1:-none}"
  vif_connected "$d0"
  check "$tag.connected" $? "vif $d0/0: frontend state $(xenstore-read "/local/domain/$d0/device/vif/0/state" 2>&1), backend state $(xenstore-read "$BE/$d0/0/state" 2>&1)"
  [ "${STREAM:-0}" = 1 ] && stream_stop "$tag"
  outage_stop "$tag"
}
# migrate_once TAG NAME IP [QUEUES]: xl migrate to this host. With an empty -s (no ssh command)
# xl runs its "host" argument as the shell command that receives the stream, so
# `xl migrate -s '' NAME 'xl migrate-receive'` is a localhost migration without a network login
# (tools/xl/xl_migrate.c: rune = host when ssh_command is empty). Afterwards the old domid's vif
# is gone completely (no TAP, no event channel to it, no more gntdev mappings than the one vif
# held before) and the new domain is served. Status 2: the hypervisor cannot migrate a PV domain
# live (no log-dirty mode: Debian's Xen 4.17 is built without CONFIG_SHADOW_PAGING, which PV
# log-dirty needs); then the domain must have stayed where it was, still served, and the target
# half-built by xl migrate-receive must have left nothing behind.
migrate_once() {
  local tag=$1 name=$2 ip=$3 d0 ports t0 rc maps0 target cfg
  d0=$(xl domid "$name")
  ports=$(fe_ports "/local/domain/$d0/device/vif")
  maps0=$(gntdev_maps)
  outage_start "$tag" "$ip"
  [ "${STREAM:-0}" = 1 ] && stream_start "$tag" "$ip"
  t0=$(now)
  xl migrate -s '' "$name" 'xl migrate-receive' >"$OUT/xl-migrate-$tag.log" 2>&1
  rc=$?
  fig "$tag.migrate_s" "$(since "$t0")"
  if [ $rc != 0 ] && grep -q "Failed to enable logdirty" "$OUT/xl-migrate-$tag.log"; then
    cfg=$(grep -h 'SHADOW_PAGING' "$H/xen.config" 2>/dev/null | head -1)
    fig migrate.pv_live_migration unsupported
    say "xl migrate: this Xen has no log-dirty mode for PV guests (${cfg:-no xen.config in the share}): $(grep -m1 'logdirty' "$OUT/xl-migrate-$tag.log")"
    target=$(sed -n 's/.*Domain \([0-9]*\):cannot (re-)build domain.*/\1/p' "$OUT/xl-migrate-$tag.log" | head -1)
    check "$tag.refused_cleanly" "$([ "$(xl domid "$name" 2>/dev/null)" = "$d0" ] && ! xl list 2>/dev/null | grep -q -- '--incoming' && echo 0 || echo 1)" \
      "xl migrate rc=$rc: log-dirty refused (${cfg:-?}); $name still domid $(xl domid "$name" 2>/dev/null), no --incoming domain left"
    wait_for 30 vif_connected "$d0"
    check "$tag.still_served" $? "vif $d0/0 after the refused migration: frontend $(xenstore-read "/local/domain/$d0/device/vif/0/state" 2>&1), backend $(xenstore-read "$BE/$d0/0/state" 2>&1)"
    if [ -n "$target" ]; then
      check "$tag.target_gone" "$(! xenstore-read "$BE/$target/0/state" >/dev/null 2>&1 && ! ip link show "vif$target.0" >/dev/null 2>&1 && [ -z "$(evtchn_lines "$target")" ] && echo 0 || echo 1)" \
        "the target domain $target: no backend dir, no TAP vif$target.0, no event channel"
    fi
    # The figures of a refused attempt are not a migration's outage: named apart.
    [ "${STREAM:-0}" = 1 ] && stream_stop "$tag" refused_stall_ms
    outage_stop "$tag" refused_outage_ms
    return 2
  fi
  RESUMED_AT=$(now)
  check "$tag.xl_migrate" $rc "xl migrate localhost rc=$rc"
  if [ $rc != 0 ]; then
    grep -E "error|ERROR|unable|failed" "$OUT/xl-migrate-$tag.log" | tail -5 | sed 's/^/XENLAB   xl: /'
    xl dmesg >"$OUT/xl-dmesg-$tag.txt" 2>&1
    tail -8 "$OUT/xl-dmesg-$tag.txt" | sed 's/^/XENLAB   xen: /'
  fi
  check_vif_gone "$tag.old_vif" "$d0" "vif$d0.0" "$ports" "$maps0"
  served_again "$tag" "$name" "$ip" "$d0" "${4:-}"
  # A failed migration's gap (e.g. the guest crashed) is not a migration's outage: named apart.
  local sfx=
  [ $rc = 0 ] || sfx=failed_
  [ "${STREAM:-0}" = 1 ] && stream_stop "$tag" "${sfx}stall_ms"
  outage_stop "$tag" "${sfx}outage_ms"
  return $rc
}
# lifecycle BACKEND (kernel|unetbackd): the PV domU saved and restored (quick: once; full:
# twice, the first with a TCP stream across it), then checkpointed (xl save -c) with a stream
# across it; in the full run also one xl migrate of it, which
# this Xen refuses (no PV log-dirty without shadow paging) and which must leave the guest served
# and nothing of the half-built target. Then the PVH domU migrated to this host (quick: once;
# full: ten times in a row), the first migration with a TCP stream across it. Without HAP (the
# emulated CPU has no SVM with nested paging) there is no PVH guest and no migration: a failed
# check says so.
lifecycle() {
  local be=$1 n nsr=2 nmig=10
  [ "$ROUNDS" = 1 ] && nsr=1 nmig=1
  say "=== guest lifecycle on $be: xl save/restore x$nsr (PV), xl migrate localhost x$nmig (PVH)"
  if [ "$be" = kernel ]; then kernel_netback_load; else start_unetbackd || return; fi
  if xl_create "life.$be" /tmp/u1.cfg labu 10.99.0.2; then
    STREAM=1 saverestore_once "saverestore.$be.1" labu 10.99.0.2
    for n in $(seq 2 "$nsr"); do saverestore_once "saverestore.$be.$n" labu 10.99.0.2; done
    iperf "saverestore.$be" 10.99.0.2 guest_rx
    STREAM=1 checkpoint_once "checkpoint.$be" labu 10.99.0.2
    # The PV guest's refused migration: in the full run, and in a run without HAP (CI's quick
    # run, XENLAB_CPU qemu64) in place of the PVH one.
    { [ "$ROUNDS" != 1 ] || ! has_hap; } && migrate_once "migrate.$be.pv" labu 10.99.0.2
    destroy_checked "life.$be" labu
  else
    xl destroy labu >/dev/null 2>&1
  fi
  # A full run must have HAP (its default CPU has SVM with nested paging); a quick run without
  # it has no PVH guest to migrate, and says so.
  if [ "$ROUNDS" != 1 ] || has_hap; then
    check "migrate.$be.hap" "$(has_hap && echo 0 || echo 1)" \
      "xl info virt_caps: ${VIRT_CAPS:-none} (a PVH guest and its log-dirty mode need hap; QEMU -cpu with svm and npt)"
  else
    say "no HAP (xl info virt_caps: ${VIRT_CAPS:-none}): no PVH guest, no live migration in this run (XENLAB_CPU=qemu64,+svm,+npt has them)"
  fi
  if has_hap && xl_create "life.$be.pvh" /tmp/p1.cfg labp 10.99.0.6; then
    if STREAM=1 migrate_once "migrate.$be.1" labp 10.99.0.6; then
      for n in $(seq 2 "$nmig"); do migrate_once "migrate.$be.$n" labp 10.99.0.6 || break; done
      iperf "migrate.$be" 10.99.0.6 guest_rx
    fi
    destroy_checked "life.$be.pvh" labp
  fi
  xl destroy labp >/dev/null 2>&1
  if [ "$be" = kernel ]; then
    wait_for 20 rmmod xen-netback
    check "life.kernel.rmmod" $? "xen-netback unloaded"
  else
    stop_unetbackd
  fi
  integrity "life.$be"
}
# lifecycle_mq BACKEND (full run): the 2-vCPU PV domU saved and restored, the 2-vCPU PVH domU
# migrated; xen-netfront negotiates its 2 queues again on every resume.
lifecycle_mq() {
  local be=$1
  say "=== guest lifecycle on $be: 2-vCPU domUs, save/restore (PV) and migrate (PVH)"
  if [ "$be" = kernel ]; then kernel_netback_load; else start_unetbackd || return; fi
  if xl_create "life.$be.mq" /tmp/mq.cfg labmq 10.99.0.3; then
    saverestore_once "saverestore.$be.mq" labmq 10.99.0.3 2
    iperf "life.$be.mq" 10.99.0.3 guest_rx -P 2
  fi
  xl destroy labmq >/dev/null 2>&1
  if has_hap && xl_create "life.$be.pvhmq" /tmp/pmq.cfg labpmq 10.99.0.7; then
    migrate_once "migrate.$be.mq" labpmq 10.99.0.7 2 &&
      iperf "migrate.$be.mq" 10.99.0.7 guest_rx -P 2
  fi
  xl destroy labpmq >/dev/null 2>&1
  if [ "$be" = kernel ]; then wait_for 20 rmmod xen-netback; else stop_unetbackd; fi
  integrity "life.$be.mq"
}

# The daemon's lines in the journal, with a priority per level: an info line ("new vif") is in
# journalctl -u, a warning (a bad tunable written into xenstore, rejected) is in -p warning and
# the info line is not.
journal_checks() {
  local t0 all warn
  say "=== journal: journalctl -u $UNIT"
  t0=$(now)
  xenstore-write /local/domain/0/unetback/max-queues bogus
  wait_for 15 sh -c "journalctl -b -u $UNIT -p warning -o cat | grep -q 'max-queues: rejected'"
  all=$(journalctl -b -u $UNIT -o cat 2>&1)
  warn=$(journalctl -b -u $UNIT -p warning -o cat 2>&1)
  fig systemd.journal_lines "$(echo "$all" | wc -l)"
  check systemd.journal_has_daemon_lines "$(echo "$all" | grep -q 'new vif ' && echo 0 || echo 1)" \
    "journalctl -u $UNIT: $(echo "$all" | wc -l) lines, $(echo "$all" | grep -c 'new vif ') 'new vif' (info)"
  check systemd.journal_priorities "$(echo "$warn" | grep -q 'max-queues: rejected' && ! echo "$warn" | grep -q 'new vif ' && echo 0 || echo 1)" \
    "-p warning: $(echo "$warn" | grep -c .) lines, $(echo "$warn" | grep -c 'new vif ') 'new vif'; $(echo "$warn" | grep 'max-queues' | tail -1 | cut -c1-120)"
  fig systemd.journal_checks_s "$(since "$t0")"
}

# libvirt: a PV domain created through libvirtd's libxl driver (virsh -c xen:///), its
# <interface type='bridge'> on xenbr0 served by unetbackd; then virsh destroy with the same
# checks as after xl destroy.
# Every virsh call has a time limit: a libvirtd that does not answer fails the scenario, not the
# whole boot.
VIRSH="timeout 300 virsh -c xen:///"
libvirt_round() {
  local tag=libvirt d t0 rc fe script
  say "=== libvirt: virsh -c xen:/// create, bridge interface on xenbr0"
  # libxl's debug lines (the teardown's "wanted state 6 ok") in libvirt's libxl log.
  sed -i 's/^#* *log_level *=.*/log_level = 1/' /etc/libvirt/libxl.conf 2>/dev/null
  cat >/tmp/virt.xml <<'XML'
<domain type='xen'>
  <name>labvirt</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='xenpv'>linux</type>
    <kernel>/tmp/img/vmlinuz</kernel>
    <initrd>/tmp/img/domU-initrd.cpio.gz</initrd>
    <cmdline>console=hvc0 rdinit=/init lab_ip=10.99.0.6/24 quiet loglevel=4</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <interface type='bridge'>
      <source bridge='xenbr0'/>
      <mac address='00:16:3e:00:00:06'/>
    </interface>
    <console type='pty'><target type='xen' port='0'/></console>
  </devices>
</domain>
XML
  t0=$(now)
  $VIRSH version >"$OUT/virsh-version.txt" 2>&1
  rc=$?
  fig "$tag.libvirtd_first_answer_s" "$(since "$t0")"
  check "$tag.virsh_connect" $rc "virsh -c xen:/// version: $(grep -i 'running hypervisor' "$OUT/virsh-version.txt" | tr -s ' ')"
  if [ $rc != 0 ]; then
    tail -5 "$OUT/virsh-version.txt" | sed 's/^/XENLAB   virsh: /'
    journalctl -b -u libvirtd -o short-monotonic --no-pager 2>&1 | tail -15 | sed 's/^/XENLAB   libvirtd: /'
    cp /var/log/libvirt/libxl/libxl-driver.log "$OUT/libvirt-libxl-driver.log" 2>/dev/null
    return
  fi
  t0=$(now)
  $VIRSH create /tmp/virt.xml >"$OUT/virsh-create.log" 2>&1
  rc=$?
  fig "$tag.create_s" "$(since "$t0")"
  check "$tag.virsh_create" $rc "virsh create rc=$rc: $(grep . "$OUT/virsh-create.log" | tail -1)"
  if [ $rc != 0 ]; then
    tail -20 /var/log/libvirt/libxl/libxl-driver.log 2>/dev/null | sed 's/^/XENLAB   libxl: /'
    cp /var/log/libvirt/libxl/libxl-driver.log "$OUT/libvirt-libxl-driver.log" 2>/dev/null
    return
  fi
  d=$(xl domid labvirt)
  t0=$(now)
  wait_for 90 ping -c1 -W1 10.99.0.6
  rc=$?
  fig "$tag.ping_ready_s" "$(since "$t0")"
  check "$tag.ping" $rc "10.99.0.6 answers ping"
  fe=$(xenstore-read "/local/domain/$d/device/vif/0/backend" 2>/dev/null)
  script=$(xenstore-read "$BE/$d/0/script" 2>/dev/null)
  fig "$tag.vif_script" "${script:-none}"
  check "$tag.backend_in_dom0" "$([ "$fe" = "$BE/$d/0" ] && [ "$(xenstore-read "$BE/$d/0/state" 2>/dev/null)" = 4 ] && echo 0 || echo 1)" \
    "frontend's backend $fe, state $(xenstore-read "$BE/$d/0/state" 2>/dev/null), hotplug-status $(xenstore-read "$BE/$d/0/hotplug-status" 2>/dev/null), script $script"
  "$CTL" list >"$OUT/ctl-list-$tag.txt" 2>&1
  check "$tag.served_by_unetbackd" "$(grep -q "vif$d\.0\|$d/0" "$OUT/ctl-list-$tag.txt" && ip link show master xenbr0 2>/dev/null | grep -q "vif$d\.0" && echo 0 || echo 1)" \
    "unetback-ctl list: $(grep "vif$d\.0\|$d/0" "$OUT/ctl-list-$tag.txt" | head -1 | tr -s ' '); vif$d.0 on xenbr0: $(ip link show master xenbr0 2>/dev/null | grep -c "vif$d\.0")"
  check "$tag.netback_not_loaded" "$(lsmod | grep -q '^xen_netback' && echo 1 || echo 0)" \
    "xen-netback not loaded though libvirt's libxl wrote backend/vif"
  if [ $rc = 0 ]; then
    ping_rtt "$tag" 10.99.0.6
    iperf "$tag" 10.99.0.6 guest_rx
    iperf "$tag" 10.99.0.6 guest_tx
  fi
  DESTROY_WITH="$VIRSH destroy" DESTROY_LOG=/var/log/libvirt/libxl/libxl-driver.log
  destroy_checked "$tag" labvirt
  DESTROY_WITH="xl -vvv destroy" DESTROY_LOG=
  wait_for 15 sh -c "! xenstore-read $BE/$d/0/state"
  check "$tag.backend_removed" $? "backend directory $BE/$d/0 removed"
  cp /var/log/libvirt/libxl/libxl-driver.log "$OUT/libvirt-libxl-driver.log" 2>/dev/null
  cp /var/log/libvirt/libxl/labvirt.log "$OUT/libvirt-labvirt.log" 2>/dev/null
  integrity "$tag"
}

# apt-get remove: the service is stopped (by the package's prerm), the daemon gone, the
# programs removed, the conffiles kept until a purge.
remove_checks() {
  local t0 rc pid st
  say "=== apt-get remove unetback"
  [ "$(systemctl is-active $UNIT)" = active ] || start_unetbackd
  pid=$(unit_prop MainPID)
  t0=$(now)
  apt-get remove -y unetback >"$OUT/apt-remove.log" 2>&1
  rc=$?
  fig pkg.remove_s "$(since "$t0")"
  check pkg.apt_remove $rc "apt-get remove -y unetback rc=$rc"
  [ $rc = 0 ] || tail -10 "$OUT/apt-remove.log" | sed 's/^/XENLAB   apt: /'
  st=$(systemctl is-active $UNIT)
  check systemd.remove_stops_service "$([ "$st" != active ] && ! kill -0 "$pid" 2>/dev/null && [ ! -e /usr/sbin/unetbackd ] && echo 0 || echo 1)" \
    "after apt-get remove: $UNIT $st, pid $pid $(kill -0 "$pid" 2>/dev/null && echo alive || echo gone), /usr/sbin/unetbackd $([ -e /usr/sbin/unetbackd ] && echo present || echo removed), dpkg: $(dpkg-query -W -f='${db:Status-Abbrev}' unetback 2>&1)"
  UNETBACKD_PID=
}

# ---------------------------------------------------------------------------------------------
# Driver domains (issue 18). labdd is a PV domU with driver_domain=1 (tools/xenlab/dd-init): it
# runs the backend (unetbackd started by hand, as unetbackd-driver-domain.service would; or the
# kernel's xen-netback, the baseline) and `xl devd`, which runs the vif hotplug script there.
# Its own vif (eth0, 10.99.0.10 on xenbr0, served by dom0's unetbackd.service) carries lab-cmd:
# dom0 runs the checks inside it through that. The client labc has
# vif = ['backend=labdd,bridge=br0,...']: its backend directory is the driver domain's
# /local/domain/<dd>/backend/vif/<client>/0, its TAP/vif goes on the driver domain's br0
# (10.0.3.1), and iperf3 runs in the driver domain (guest_rx: labdd -> labc, guest_tx: -R).
DD_IP=10.99.0.10 DD_BR_IP=10.0.3.1 DDC_IP=10.0.3.2
mkcfg_dd() { # FILE BACKEND(unetbackd|kernel)
  cat >"$1" <<EOF
name = "labdd"
type = "pv"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/domU-dd-initrd.cpio.gz"
extra = "console=hvc0 rdinit=/init lab_ip=$DD_IP/24 lab_br=$DD_BR_IP/24 lab_backend=$2 quiet loglevel=4"
memory = 320
vcpus = 1
driver_domain = 1
vif = [ 'bridge=xenbr0,mac=00:16:3e:00:00:10' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
}
cat >/tmp/ddc.cfg <<EOF
name = "labc"
type = "pv"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/domU-initrd.cpio.gz"
extra = "console=hvc0 rdinit=/init lab_ip=$DDC_IP/24 quiet loglevel=4"
memory = 256
vcpus = 1
vif = [ 'backend=labdd,bridge=br0,ip=$DDC_IP,mac=00:16:3e:00:03:02' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
# in_dd [-t SECONDS] COMMAND-LINE: runs it in labdd (lab-cmd, port 5397) and prints its output,
# which ends with "lab-cmd: rc=N". dd_ok COMMAND-LINE: status 0 if it ran there with status 0.
in_dd() {
  local t=20
  [ "$1" = -t ] && { t=$2; shift 2; }
  timeout "$t" bash -c 'exec 3<>"/dev/tcp/$0/5397" || exit 1; echo "$1" >&3; cat <&3' "$DD_IP" "$*"
}
dd_ok() { in_dd "$@" | tail -1 | grep -qx 'lab-cmd: rc=0'; }
# dd_wait SECONDS COMMAND-LINE: dd_ok until it succeeds, for at most SECONDS in all (wait_for
# counts tries, and one in_dd may take its whole time limit).
dd_wait() {
  local end=$(($(cut -d. -f1 /proc/uptime) + $1))
  shift
  until dd_ok "$@"; do
    [ "$(cut -d. -f1 /proc/uptime)" -ge $end ] && return 1
    sleep 0.5
  done
}
# Xen's grant-table report ('g' debug key) into xl dmesg, saved as $OUT/xl-dmesg-gnttab-TAG.txt;
# gnttab_of FILE DOMID prints domain DOMID's "FRAMES MAX MAPTRACK_FRAMES MAX" from it.
gnttab_report() { # TAG
  xl dmesg -c >/dev/null 2>&1
  xl debug-keys g
  sleep 1
  xl dmesg >"$OUT/xl-dmesg-gnttab-$1.txt" 2>&1
}
gnttab_of() {
  awk -v d="d$2" '/grant-table for remote/ {hit = ($0 ~ ("remote " d " ")); next}
    hit && /maptrack frames/ {print; exit}' "$1" |
    sed -n 's/.* \([0-9]*\) frames (\([0-9]*\) max), \([0-9]*\) maptrack frames (\([0-9]*\) max).*/\1 \2 \3 \4/p'
}
# dd_grants TAG DD CLIENT: the maptrack frames the driver domain uses while it serves the client,
# the grant frames the client uses, and the limits Xen gave each (xl.cfg max_maptrack_frames,
# max_grant_frames; not set here: the defaults).
dd_grants() {
  local tag=$1 f=$OUT/xl-dmesg-gnttab-$1.txt u v
  gnttab_report "$tag"
  u=$(gnttab_of "$f" "$2")
  v=$(gnttab_of "$f" "$3")
  check "$tag.gnttab_usage_read" "$([ -n "$u" ] && [ -n "$v" ] && echo 0 || echo 1)" \
    "Xen's grant tables: driver domain d$2: ${u:-no line}; client d$3: ${v:-no line} (frames max maptrack max)"
  # shellcheck disable=SC2086 # four numbers
  [ -n "$u" ] && set -- $u && fig "$tag.dd_maptrack_frames" "$3" && fig "$tag.dd_maptrack_frames_max" "$4" &&
    fig "$tag.dd_grant_frames_max" "$2"
  # shellcheck disable=SC2086
  [ -n "$v" ] && set -- $v && fig "$tag.client_grant_frames" "$1" && fig "$tag.client_grant_frames_max" "$2" &&
    fig "$tag.client_maptrack_frames_max" "$4"
}

# dd_create BACKEND: labdd up, its backend serving, xl devd running. Status 0 when ready.
dd_create() {
  local be=$1 tag=driverdomain.$1 t0 rc
  mkcfg_dd /tmp/dd.cfg "$be"
  xl_create "$tag.dd" /tmp/dd.cfg labdd "$DD_IP" || return 1
  DD=$(xl domid labdd)
  t0=$(now)
  if [ "$be" = unetbackd ]; then
    dd_wait 60 'unetback-ctl list && pidof xl'
  else
    dd_wait 60 'lsmod | grep -q "^xen_netback" && pidof xl'
  fi
  rc=$?
  fig "$tag.dd_backend_ready_s" "$(since "$t0")"
  check "$tag.dd_backend_ready" $rc "$(in_dd "xenstore-read domid; cat /proc/xen/capabilities; ps | grep -E 'unetbackd|xl -vvv devd' | grep -v grep; lsmod | grep -E '^xen_netback'; true" | grep -v '^lab-cmd' | tr '\n' ' ' | tr -s ' ')"
  if [ "$be" = unetbackd ]; then
    # --backend-domid left out: the daemon took its own domid from xenstore.
    check "$tag.dd_own_domid" "$(dd_ok "grep -q 'serving .* as domain $DD,' /tmp/unetbackd.log && ! grep -q 'assuming dom0' /tmp/unetbackd.log" && echo 0 || echo 1)" \
      "labdd is d$DD; unetbackd's log: $(in_dd 'grep -m1 "serving " /tmp/unetbackd.log' | head -1 | cut -c1-200)"
  fi
  return $rc
}

# dd_client TAG: creates labc with its vif in labdd and checks it got there: Connected (both
# ends 4) under the driver domain's backend path, the hotplug script run there (the vif on br0,
# hotplug-status connected), ping from labc to labdd. Sets C (labc's domid). Status 0 when pingable.
dd_client() {
  local tag=$1 t0 rc bep fe st
  t0=$(now)
  xl_create_logged "$tag" /tmp/ddc.cfg || return 1
  C=$(xl domid labc)
  bep=/local/domain/$DD/backend/vif/$C/0
  fe=/local/domain/$C/device/vif/0
  wait_for 90 sh -c "[ \"\$(xenstore-read $fe/state)\" = 4 ] && [ \"\$(xenstore-read $bep/state)\" = 4 ]"
  rc=$?
  fig "$tag.connected_s" "$(since "$t0")"
  check "$tag.connected" $rc "frontend $fe state $(xenstore-read "$fe/state" 2>&1), backend $(xenstore-read "$fe/backend" 2>&1) (want $bep) state $(xenstore-read "$bep/state" 2>&1)"
  check "$tag.backend_in_dd" "$([ "$(xenstore-read "$fe/backend" 2>/dev/null)" = "$bep" ] && [ "$(xenstore-read "$fe/backend-id" 2>/dev/null)" = "$DD" ] && echo 0 || echo 1)" \
    "frontend's backend $(xenstore-read "$fe/backend" 2>&1), backend-id $(xenstore-read "$fe/backend-id" 2>&1); nothing under dom0's backend/vif/$C: $(xenstore-read "$BE/$C/0/state" >/dev/null 2>&1 && echo NO || echo yes)"
  st=$(xenstore-read "$bep/hotplug-status" 2>/dev/null)
  dd_ok "[ -e /sys/class/net/br0/brif/vif$C.0 ]"
  rc=$?
  check "$tag.hotplug_in_dd" "$([ $rc = 0 ] && [ "$st" = connected ] && echo 0 || echo 1)" \
    "script $(xenstore-read "$bep/script" 2>&1), hotplug-status ${st:-unset}; on labdd's br0: $(in_dd 'ls /sys/class/net/br0/brif' | grep -v '^lab-cmd' | tr '\n' ' ')"
  t0=$(now)
  dd_wait 60 "echo $DD_BR_IP | nc $DDC_IP 5396 | grep -q 'lab-ping: rc=0'"
  rc=$?
  fig "$tag.ping_ready_s" "$(since "$t0")"
  check "$tag.ping" $rc "labc ($DDC_IP) pings labdd's br0 ($DD_BR_IP): $(in_dd "echo $DD_BR_IP | nc $DDC_IP 5396" | grep -E 'round-trip|packets' | tr '\n' ' ')"
  if [ $rc != 0 ]; then
    xenstore-ls -f "$bep" 2>&1 | sed 's/^/XENLAB   be: /' | head -30
    in_dd 'tail -20 /tmp/xl-devd.log; tail -10 /tmp/unetbackd.log; ip -o link' | sed 's/^/XENLAB   dd: /'
    tail -20 /var/log/xen/console/guest-labc.log 2>/dev/null | sed 's/^/XENLAB   console: /'
  fi
  return $rc
}

# dd_iperf TAG: iperf3 in labdd against labc's server, both directions.
dd_iperf() {
  UNETBACKD_PID='' iperf_once "$1" guest_rx -- in_dd -t $((SECS + 40)) iperf3 -c "$DDC_IP" -f m -t "$SECS"
  UNETBACKD_PID='' iperf_once "$1" guest_tx -- in_dd -t $((SECS + 40)) iperf3 -c "$DDC_IP" -f m -t "$SECS" -R
}

# dd_client_gone TAG PORTS: after labc's xl destroy, nothing of it is left in labdd: the backend
# directory gone (or Closed), no vif/TAP, no event channel to it, no grant mapped by unetbackd.
dd_client_gone() {
  local tag=$1 ports=$2 bep=/local/domain/$DD/backend/vif/$C/0 left
  wait_for 15 sh -c "! xenstore-read $bep/state >/dev/null 2>&1 || [ \"\$(xenstore-read $bep/state)\" = 6 ]"
  check "$tag.backend_released" $? "$bep: $(xenstore-read "$bep/state" 2>/dev/null || echo removed)"
  dd_wait 10 "! ip link show vif$C.0"
  check "$tag.no_tap" $? "vif$C.0 in labdd: $(in_dd "ip -o link show vif$C.0 2>&1" | head -1 | cut -c1-80)"
  wait_for 10 sh -c "[ -z \"\$(lsevtchn $DD 2>/dev/null | grep -E 'Remote Domain $C([^0-9]|$)')\" ]"
  left=$(domain_evtchn_lines "$DD" "$C")
  check "$tag.no_bound_port" "$([ -z "$left" ] && echo 0 || echo 1)" "${left:-labdd (d$DD) has no event channel left to d$C} (labc's ports were: $ports)"
  if [ "$DD_BACKEND" = unetbackd ]; then
    # shellcheck disable=SC2016 # expanded in labdd
    dd_wait 10 '[ "$(grep -c gntdev /proc/$(pidof unetbackd)/maps)" = 0 ]'
    check "$tag.no_mapped_grant" $? "gntdev mappings in labdd's unetbackd: $(in_dd 'grep -c gntdev /proc/$(pidof unetbackd)/maps' | head -1)"
    dd_ok "! unetback-ctl list | grep -q '$C/0'"
    check "$tag.no_vif_in_daemon" $? "unetback-ctl list in labdd: $(in_dd 'unetback-ctl list' | head -3 | tr '\n' ' ')"
  fi
}

# The client's console answers: a command written to its console pty (xenconsoled's) runs in
# its shell, and the output is in the console log.
console_answers() { # NAME
  local d tty tok
  d=$(xl domid "$1" 2>/dev/null) || return 1
  tty=$(xenstore-read "/local/domain/$d/console/tty" 2>/dev/null)
  [ -n "$tty" ] && [ -c "$tty" ] || return 1
  tok=$RANDOM
  printf 'echo alive-$((40+2))-%s\r' "$tok" >"$tty"
  wait_for 15 grep -aq "alive-42-$tok" "/var/log/xen/console/guest-$1.log"
}

# dd_destroy_under_client TAG: xl destroy of labdd while labc runs: labc stays alive (xl list, its
# console), its vif loses its backend, and labc's xl destroy afterwards finishes in time.
dd_destroy_under_client() {
  local tag=$1 t0 rc fe=/local/domain/$C/device/vif/0 st fst
  t0=$(now)
  xl -vvv destroy labdd >"$OUT/xl-destroy-$tag.dd.log" 2>&1
  rc=$?
  fig "$tag.dd_destroy_s" "$(since "$t0")"
  check "$tag.dd_xl_destroy" $rc "xl destroy labdd (serving labc) rc=$rc"
  wait_for 15 sh -c "! xenstore-read /local/domain/$DD/backend/vif/$C/0/state"
  check "$tag.backend_gone" $? "labdd's backend directory for labc: $(xenstore-read "/local/domain/$DD/backend/vif/$C/0/state" 2>/dev/null || echo removed)"
  # What the frontend makes of its vanished backend (Linux netfront: see the report).
  wait_for 10 sh -c "[ \"\$(xenstore-read $fe/state 2>/dev/null)\" != 4 ]"
  fst=$(xenstore-read "$fe/state" 2>/dev/null || echo removed)
  fig "$tag.client_frontend_state" "$fst"
  sleep 2
  st=$(xl list labc 2>/dev/null | awk 'NR == 2 {print $5}')
  console_answers labc
  rc=$?
  check "$tag.client_alive" "$([ -n "$st" ] && ! echo "$st" | grep -q '[csd]' && [ $rc = 0 ] && echo 0 || echo 1)" \
    "labc after labdd's destroy: xl list state ${st:-gone}, console $([ $rc = 0 ] && echo answers || echo silent), vif frontend state $fst"
  t0=$(now)
  timeout 60 xl -vvv destroy labc >"$OUT/xl-destroy-$tag.client.log" 2>&1
  rc=$?
  fig "$tag.client_destroy_s" "$(since "$t0")"
  check "$tag.client_destroy" "$([ $rc = 0 ] && ! xl domid labc >/dev/null 2>&1 && echo 0 || echo 1)" \
    "xl destroy labc after its driver domain's: rc=$rc in $(since "$t0") s (limit 60 s), $(xl domid labc >/dev/null 2>&1 && echo 'labc still there' || echo 'labc gone')"
}

dd_round() { # BACKEND: unetbackd (every check) or kernel (the throughput baseline)
  local be=$1 tag=driverdomain.$1 ports t0
  DD_BACKEND=$be
  say "=== driver domain: $be in labdd"
  if ! dd_create "$be"; then
    in_dd 'tail -15 /tmp/xl-devd.log; tail -15 /tmp/unetbackd.log' | sed 's/^/XENLAB   dd: /'
    tail -30 /var/log/xen/console/guest-labdd.log 2>/dev/null | sed 's/^/XENLAB   console: /'
    xl destroy labdd >/dev/null 2>&1
    return
  fi
  if dd_client "$tag"; then
    dd_iperf "$tag"
    dd_grants "$tag" "$DD" "$C"
    [ "$be" = unetbackd ] && fig "$tag.mapped_grant_pages" \
      "$(in_dd 'unetback-ctl --json stats' | grep -o '"mapped_grant_pages": *[0-9]*' | grep -o '[0-9]*$' | head -1)"
  fi
  in_dd 'cat /tmp/xl-devd.log' >"$OUT/dd-xl-devd-$be.log" 2>&1
  if [ "$be" = unetbackd ]; then
    in_dd 'cat /tmp/unetbackd.log' >"$OUT/dd-unetbackd.log" 2>&1
    ports=$(fe_ports "/local/domain/$C/device/vif")
    t0=$(now)
    xl -vvv destroy labc >"$OUT/xl-destroy-$tag.log" 2>&1
    check "$tag.client.xl_destroy" $? "xl destroy labc rc=$?"
    fig "$tag.client.destroy_s" "$(since "$t0")"
    dd_client_gone "$tag.client" "$ports"
    # A client again, then the driver domain goes away under it.
    dd_client "$tag.again" && dd_destroy_under_client "$tag.again"
  fi
  xl destroy labc >/dev/null 2>&1
  xl destroy labdd >/dev/null 2>&1
  cp /var/log/xen/console/guest-labdd.log "$OUT/console-dd-$be.log" 2>/dev/null
  integrity "$tag"
}

dd_part() {
  # labdd's own vif is served by dom0's unetbackd.service.
  lsmod | grep -q '^xen_netback' && wait_for 20 rmmod xen-netback
  [ "$(systemctl is-active "$UNIT")" = active ] || start_unetbackd || return
  [ -n "$UNETBACKD_PID" ] || UNETBACKD_PID=$(unit_prop MainPID)
  dd_round unetbackd
  full && dd_round kernel
}

# ---------------------------------------------------------------------------------------------
# Order: the alternating rounds, the shim, and last the 2-vCPU domU. Last because in this
# emulated machine a 2-vCPU PV domU makes dom0 processes die of memory corruption now and then,
# with the kernel netback alone as well (docs/testing.md, "The real-Xen lab"): whatever happens there cannot
# spoil the rounds' figures.
# --skip: parts left out whatever else asks for them (a comma list).
skipped() { case ",$SKIP," in *",$1,"*) return 0 ;; esac; return 1; }
want() { ! skipped "$1" && { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }; }
# runs PART [ALSO...]: PART runs unless skipped, when it is wanted or any ALSO is (e.g. the
# lifecycle comes with --only unetbackd).
runs() {
  local part=$1 o
  shift
  skipped "$part" && return 1
  want "$part" && return 0
  for o; do want "$o" && return 0; done
  return 1
}
# The smoke test (xenlab.sh --smoke, CI): the package's service as dpkg -i left it, one Linux-
# netfront domU created with xl on xenbr0 (stock vif-bridge), ping and an iperf3 run each way, a
# SIGKILL of the daemon (systemd restarts it, the new process adopts the vif and the guest
# answers ping again), then xl destroy: backend state 6, no TAP, no mapped grant and no bound
# event channel left. Everything else is in the quick and full runs.
smoke_part() {
  say "=== smoke: unetbackd.service, one domU"
  UNETBACKD_PID=$(unit_prop MainPID)
  [ "$UNETBACKD_PID" = 0 ] && UNETBACKD_PID=
  [ -n "$UNETBACKD_PID" ] || start_unetbackd || return
  if xl_create smoke /tmp/u1.cfg labu 10.99.0.2; then
    ping_rtt smoke 10.99.0.2
    iperf smoke 10.99.0.2 guest_rx
    iperf smoke 10.99.0.2 guest_tx
    sigkill_restart smoke 10.99.0.2
    "$CTL" list >"$OUT/ctl-list-smoke.txt" 2>&1
    destroy_checked smoke labu
  else
    xl destroy labu >/dev/null 2>&1
  fi
  integrity smoke
}

# Every part of the quick and full runs, in order (--only and --skip choose among them).
lab_parts() {
  [ -n "$SKIP" ] && say "parts skipped (--skip): $SKIP"
  for r in $(seq 1 "$ROUNDS"); do
    want kernel && kernel_round "$r"
    want unetbackd && unetbackd_round "$r"
    # unetbackd's internal switch between two domUs: full run (e2e-switch runs it on xensim).
    runs switch unetbackd && { full || [ "$ONLY" = switch ]; } && switch_d2d_round "$r"
    want unetbackd && [ -n "$B_ARGS$B_ENV" ] && unetbackd_round "$r" b
  done
  if [ "$SHIM" = 1 ] && want shim; then
    shim_round kernel
    shim_round unetbackd
  fi
  # Guest lifecycle: save/restore and migration, the kernel netback first (the baseline; in the
  # full run only, so that CI's quick run keeps to its time).
  if runs life unetbackd; then
    full && lifecycle kernel
    lifecycle unetbackd
  fi
  # A daemon restart the guest does not notice (issue 20): in every run, the quick one too.
  runs adopt unetbackd && adopt_part
  # libvirt (and the journal's lines from everything unetbackd served so far).
  if runs libvirt unetbackd; then
    start_unetbackd && {
      libvirt_round
      journal_checks
      stop_unetbackd
    }
  fi
  # The driver domain (issue 18): in every run, the quick one too.
  want dd && dd_part
  if [ "$ONLY" = kmq ]; then # the kernel netback's 2-vCPU scenario, three times (debugging)
    kernel_mq long
    kernel_mq long
    kernel_mq long
  else
    runs mq kernel && full && kernel_mq
    runs mq unetbackd umq && start_unetbackd && {
      unetbackd_extras
      stop_unetbackd
    }
    # The 2-vCPU domU's save/restore and migration (full run only): last, with the other
    # 2-vCPU scenarios.
    if [ "$ROUNDS" != 1 ] && runs life mq; then
      lifecycle_mq kernel
      lifecycle_mq unetbackd
    fi
  fi
}
if [ "$SMOKE" = 1 ]; then
  smoke_part
else
  lab_parts
fi
for f in /var/log/xen/console/guest-*.log; do [ -f "$f" ] && cp "$f" "$OUT/console-$(basename "$f")"; done
cp /var/log/xen/xl-*.log "$OUT/" 2>/dev/null
dmesg >"$OUT/dmesg.txt" 2>/dev/null
journalctl -b -u $UNIT -o short-monotonic >"$OUT/unetbackd.log" 2>&1
dpkg --verify unetback >/dev/null 2>&1
check dom0.programs_intact $? "the package's files in dom0 still match its md5sums (dpkg --verify unetback)"
remove_checks
echo 3 >/proc/sys/vm/drop_caches
(cd "$H/debs" && sha256sum -c --quiet SHA256SUMS >/dev/null 2>&1)
check dom0.share_intact $? "the package files read again over 9p match their checksums taken on the host"
kill "$WATCHDOG_PID" 2>/dev/null
# systemd's boot (finished once xenlab.service ran, Type=exec): when it finished, counted from
# the kernel's start, and its slowest units (the whole list: out/systemd-analyze.txt).
FIN_US=$(systemctl show -p FinishTimestampMonotonic --value 2>/dev/null)
[ "${FIN_US:-0}" -gt 0 ] && fig dom0.systemd_boot_finished_s "$(awk -v u="$FIN_US" 'BEGIN{printf "%.1f", u / 1e6}')"
systemd-analyze blame --no-pager 2>&1 | head -12 | sed 's/^/XENLAB   blame: /'
fig dom0_uptime_end_s "$(up)"
say "DONE"
