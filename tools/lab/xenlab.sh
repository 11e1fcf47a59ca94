#!/usr/bin/env bash
# tools/lab.sh xenlab [--smoke|--quick] [--json FILE] [--no-shim] [--host-hog N]
# Real Xen 4.17 in QEMU (TCG; no KVM needed): a Debian bookworm PV dom0 and PV domUs running
# Linux xen-netfront. Builds the images from Debian packages (cached in $XENLAB_CACHE, default
# $ROOT/.xenlab-cache), builds this checkout's Debian package (tools/lab.sh package; --debs DIR
# takes unetback_*.deb from DIR instead), shares it with dom0 over 9p and puts netfront-shim
# into a domU initramfs, boots once (dom0: systemd as PID 1, Debian's xen.service) and runs
# tools/xenlab/dom0-run.sh there (xenlab.service; the driver, which sources tools/xenlab/lib/ and
# one file per lab part, tools/xenlab/parts/). dom0 installs the package with dpkg -i, so
# unetbackd runs as unetbackd.service (systemctl is-active, Type=notify readiness, the modprobe
# file, Before=libvirtd.service checked), then, in this order:
#   1. kernel xen-netback (unetbackd.service stopped, modprobe -i) and unetbackd.service
#      (systemctl start; READY=1 before the first xl create; stock vif-bridge) rounds,
#      alternating: xl create, ping, iperf3 dom0->domU (guest_rx) and domU->dom0 (guest_tx);
#      then a second domU on the bridge and iperf3 domU->domU both ways (domu_to_domu); after
#      each unetbackd round the same two domUs on unetbackd's internal switch (bridge=unetback:lab,
#      vif-unetback, its uplink TAP on xenbr0), iperf3 domU->domU both ways (unetbackd_sw,
#      ratio domu_to_domu_switch against the kernel's domU->domU over xenbr0); with
#      unetbackd, its wake-ups per packet in every run and, in two more runs apart from the
#      throughput runs, its syscalls per packet (perf stat, or strace -c); after each unetbackd
#      destroy: backend state 6, no TAP, no mapped grant, no bound event channel. The quick run
#      leaves out the internal switch and the domU->domU syscall counts.
#   2. netfront-shim in a domU (no kernel netfront) against the kernel netback and unetbackd;
#      with unetbackd also a SIGKILL of the daemon: systemd restarts it, the shim is served again
#   adopt (issue 20): labu's Linux netfront across a SIGKILL of unetbackd (systemd restarts it,
#      the new process adopts the vif from its state record), and in the full run a planned
#      takeover (systemctl restart) and an upgrade in place (unetback-ctl upgrade: the same pid executes the program
#      again; adopt.unetbackd.upgrade.*): both states stay 4 (sampled every 20 ms), a TCP stream survives, the outage of a
#      50 ms pinger (adopt.unetbackd.{crash,takeover,upgrade}.outage_ms) split by the daemons' milestones
#      (kill_to_exec_ms, exec_to_setup_ms, setup_to_adopted_ms, handover_ms, gap_after_start_ms...),
#      the same TAP on xenbr0; first (full run only) the baseline, the kernel netback reloaded
#      under the same guest (vif unbound, rmmod, modprobe: adopt.kernel.reload.{guest_lost,states_seen,...})
#   libvirt: virsh -c xen:/// create of a PV domain with <interface type='bridge'> on xenbr0,
#      served by unetbackd (ping, iperf3 both ways), virsh destroy with the checks of 1; then
#      journalctl -u unetbackd (the daemon's lines; -p warning shows a rejected tunable only)
#   3. a 2-vCPU domU (2 queues) on the kernel netback (full run only), then on unetbackd with a tunable written
#      with xenstore-write and network-detach/attach (the same checks after each)
#   lifecycle (issue 18), on the kernel netback (full run only) and on unetbackd.service: xl save + xl
#      restore of a PV domU (quick: once, full: twice), an xl save -c checkpoint of it with a
#      stream across (same domid, same TAP, still Connected), xl migrate of a PVH domU to this host
#      (quick: once, full: ten times; the first with an iperf3 TCP stream across it), each with
#      its outage (the longest gap between 50 ms pings, saverestore.*/migrate.*.outage_ms), the
#      old domid's vif gone completely, the new one Connected; full run: a PV migration, which
#      this Xen refuses (migrate.*.pv), and the 2-vCPU domUs too (queues after the resume)
#   driver domain: a PV domU with driver_domain=1 (tools/xenlab/dd-init) runs unetbackd and
#      `xl devd`; a client domU with backend=labdd: Connected, the hotplug script run in the
#      driver domain, ping, iperf3 both ways, xl destroy of the client releases everything there,
#      then xl destroy of the driver domain under a running client; the same driver domain with
#      xen-netback as the baseline (full run only) (iperf3 both ways); the grant/maptrack frames Xen reports
#   last: apt-get remove unetback stops the service.
# --smoke (CI): instead of all that, one boot with the package installed by dpkg -i and
#   unetbackd.service under systemd, one Linux-netfront domU created with xl, ping and a 3 s
#   iperf3 run each way, a SIGKILL of the daemon (systemd restarts it, the guest answers ping
#   again), xl destroy with no TAP, mapped grant or bound event channel left, and apt-get remove
#   (about 5 minutes; XENLAB_TIMEOUT default 900).
# Directions are the project's: guest_tx = domU -> dom0 (the guest transmits), guest_rx =
# dom0 -> domU.
# Prints a table, writes --json (every figure, and unetbackd/kernel ratios per direction), and
# exits 1 when a check fails, 3 when a dom0 process died of memory corruption (an environment
# fault of this emulated machine: boot again). --quick: one round of 3 s iperf3 runs (CI); a
# full run is 3 rounds of 10 s. --no-shim leaves out 2. --b-arg ARG (repeatable) adds a third
# backend to every round of 1: unetbackd with ARG on its command line ("unetbackd_b" in the
# figures and ratios; an A/B of a tunable in one boot); --b-env NAME=VALUE (repeatable) sets
# an environment variable for that third backend (e.g. UNETBACK_NO_IO_URING=1), alone or with
# --b-arg. --profile: in each unetbackd round one more iperf3 run per direction under perf record,
# also for domU->domU and the 2-queue domU (out/profile-TAG.DIRECTION.txt: where unetbackd's
# time goes in dom0). --host-hog N runs N busy loops on this
# host (not in dom0) for the whole boot, each ended by its PID afterwards: the figures under
# host load.
# Debugging: --only kernel|unetbackd|switch|adopt|shim|libvirt|life|mq|umq|kmq|dd runs one part (mq: 3 on both
# backends; umq: 3 on unetbackd; kmq: 3 on the kernel netback, three times, with detach/attach;
# dd: the driver domain); --skip PARTS (comma list) leaves those parts out of a run, e.g. a full
# run of the datapath's parts alone: --skip life,adopt,libvirt,shim,dd;
# --daemon-arg ARG adds ARG (a word) to unetbackd's command line (repeat it); --daemon-wrap CMD
# runs unetbackd under CMD (words, e.g. "strace -f -o /host/out/strace.txt"); both through a
# runtime drop-in for unetbackd.service; --programs-from-share runs the build dir's unetbackd
# and unetback-ctl from the 9p share instead of the package's.
# Env: XENLAB_CACHE; XENLAB_TIMEOUT (seconds for the whole boot; default 1800 quick, 3600
# full); XENLAB_TCG_THREAD (multi, the default: one host thread per emulated CPU; single);
# XENLAB_CPU (QEMU's -cpu model; default for a full run qemu64,+svm,+npt: qemu64 with AMD SVM
# and nested paging, which QEMU's TCG emulates, so that Xen has HVM with HAP: PVH guests, and
# their live migration (log-dirty on HAP; this Xen has no shadow paging, so PV guests cannot
# migrate); default for --quick (CI) plain qemu64: a PVH guest under the emulated SVM
# triple-faulted in 4 of 23 migrations (docs/testing.md), and each such boot would be booted
# again, so CI's quick run keeps the PV guest's refused migration instead;
# with "max" dom0 processes die of memory corruption now and then (docs/testing.md); libvirt's
# libxl driver knows qemu64 only through the cpu_map model build-images.sh adds, xenlab-qemu64).
#
# Called by tools/lab.sh as: tools/lab/xenlab.sh BUILD_DIR ARGS...   (as root, after the build)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:?usage: xenlab.sh BUILD_DIR [--quick] [--json FILE] [--no-shim]}" && pwd)
shift
SMOKE=0 QUICK=0 JSON='' SHIM=1 ONLY='' SKIP='' DAEMON_ARGS='' DAEMON_WRAP='' FROM_SHARE=0 B_ARGS='' B_ENV='' HOST_HOG=0 PROFILE=0 DEBS=
while (($#)); do
  case $1 in
    --host-hog)
      HOST_HOG=${2:?--host-hog needs a number of busy loops}
      [[ $HOST_HOG =~ ^[0-9]+$ && $HOST_HOG -le 64 ]] || { echo "xenlab: --host-hog takes 0..64" >&2; exit 2; }
      shift ;;
    --daemon-arg) DAEMON_ARGS+=" ${2:?--daemon-arg needs a value}"; shift ;;
    --daemon-wrap) DAEMON_WRAP=${2:?--daemon-wrap needs a command}; shift ;;
    --programs-from-share) FROM_SHARE=1 ;;
    --debs) DEBS=${2:?--debs needs a directory with unetback_*.deb}; shift ;;
    --b-arg) B_ARGS+=" ${2:?--b-arg needs a value}"; shift ;;
    --b-env)
      [[ ${2:-} =~ ^[A-Z_][A-Z0-9_]*=[A-Za-z0-9_.,:/-]*$ ]] || { echo "xenlab: --b-env takes NAME=VALUE (no spaces)" >&2; exit 2; }
      B_ENV+="$2 "; shift ;;
    --quick) QUICK=1 ;;
    --smoke) SMOKE=1 QUICK=1 SHIM=0 ;;
    --only) ONLY=${2:?--only needs kernel, unetbackd, switch, adopt, shim, libvirt, life, mq, umq, kmq or dd}; shift ;;
    --skip)
      SKIP=${2:?--skip needs parts, e.g. life,adopt}
      [[ $SKIP =~ ^(kernel|unetbackd|switch|adopt|shim|libvirt|life|mq|dd)(,(kernel|unetbackd|switch|adopt|shim|libvirt|life|mq|dd))*$ ]] ||
        { echo "xenlab: --skip takes a comma list of kernel, unetbackd, switch, adopt, shim, libvirt, life, mq, dd" >&2; exit 2; }
      shift ;;
    --json) JSON=${2:?--json needs a file}; shift ;;
    --no-shim) SHIM=0 ;;
    --profile) PROFILE=1 ;;
    *) echo "xenlab: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -z $JSON || $JSON == /* ]] || JSON=$PWD/$JSON
[[ -z $DEBS ]] || DEBS=$(cd "$DEBS" && pwd)
log() { printf '[xenlab] %s\n' "$*" >&2; }

"$ROOT/tools/lab.sh" deps qemu-system-x86 busybox-static debootstrap e2fsprogs cpio kmod

CACHE=${XENLAB_CACHE:-$ROOT/.xenlab-cache}
X=$ROOT/tools/xenlab
"$X/build-images.sh" "$CACHE"

BIN_DAEMON=$BUILD/backend/daemon/unetbackd
BIN_CTL=$BUILD/tools/ctl/unetback-ctl
BIN_SHIM=$BUILD/frontend-shim/netfront-shim
# The smoke test runs the package's programs only (BUILD may be a sanitizer build then).
((SMOKE)) || for b in "$BIN_DAEMON" "$BIN_CTL" "$BIN_SHIM"; do
  [[ -x $b ]] || { log "missing $b (build first)"; exit 1; }
done

# The Debian package dom0 installs: built now (tools/lab.sh package) unless --debs names a
# directory that has it.
if [[ -z $DEBS ]]; then
  log "building the Debian package (tools/lab.sh package)"
  T0=$(date +%s)
  "$ROOT/tools/lab.sh" package >&2
  DEBS=${PACKAGE_DIR:-$ROOT/build-package}
  log "package built in $(($(date +%s) - T0)) s"
fi
DEB=$(ls -t "$DEBS"/unetback_*.deb 2>/dev/null | head -1)
[[ -n $DEB ]] || { log "no unetback_*.deb in $DEBS"; exit 1; }

# The 9p share: the scenarios (dom0-run.sh, and beside it, as in tools/xenlab/, the library and
# the lab parts it sources: lib/*.sh, parts/*.sh), the package, the build dir's programs
# (--programs-from-share), domU kernel and initramfs, results.
SHARE=$CACHE/share
rm -rf "$SHARE"
mkdir -p "$SHARE/bin" "$SHARE/debs" "$SHARE/out"
install -m755 "$X/dom0-run.sh" "$SHARE/dom0-run.sh"
install -d "$SHARE/lib" "$SHARE/parts"
install -m644 "$X"/lib/*.sh "$SHARE/lib/"
install -m644 "$X"/parts/*.sh "$SHARE/parts/"
install -m644 "$DEB" "$SHARE/debs/"
(cd "$SHARE/debs" && sha256sum unetback_*.deb >SHA256SUMS)
log "dom0 installs $(basename "$DEB")"
((SMOKE)) || install -m755 "$BIN_DAEMON" "$BIN_CTL" "$SHARE/bin/"
cp "$CACHE/vmlinuz" "$SHARE/vmlinuz"
# The hypervisor's build configuration (what dom0 reports when Xen refuses something it was
# built without, e.g. log-dirty mode for PV guests, which needs CONFIG_SHADOW_PAGING).
cp "$CACHE"/xen/boot/xen-*.config "$SHARE/xen.config" 2>/dev/null || true
# Every shared library the binaries need must be in the dom0 root (same bookworm versions);
# dpkg -i checks the package's dependencies itself.
((SMOKE)) || for b in "$BIN_DAEMON" "$BIN_CTL"; do
  for lib in $(ldd "$b" | grep -o '/[^ ]*'); do
    [[ -e $CACHE/rootfs$lib || -e $CACHE/rootfs/usr$lib ]] || { log "dom0 lacks $lib (needed by $b)"; exit 1; }
  done
done
# xdp-pass: a 2-instruction XDP_PASS program loaded and attached by hand (bpf(2), netlink),
# so the kernel netfront's XDP headroom path (xenbus 7/8) runs without a BPF toolchain.
gcc -static -O2 -Wall -o "$SHARE/xdp-pass" "$X/xdp-pass.c"
"$X/mk-initrd.sh" "$CACHE" "$SHARE/domU-initrd.cpio.gz" "$X/domU-init" /usr/bin/iperf3 \
  "$SHARE/xdp-pass:/usr/local/bin/xdp-pass" -- xen-netfront
# The shim's and the driver domain's initramfs: not in the smoke test, which boots neither.
if ((!SMOKE)); then
  "$X/mk-initrd.sh" "$CACHE" "$SHARE/domU-shim-initrd.cpio.gz" "$X/domU-init" /usr/bin/iperf3 \
    "$BIN_SHIM:/usr/local/bin/netfront-shim" -- xen-evtchn xen-gntalloc tun
  # The driver domain (tools/xenlab/dd-init): the build dir's unetbackd and unetback-ctl (stripped:
  # the initramfs is unpacked at every boot), dom0's xl (for xl devd), xenstore tools, bash, flock
  # and hotplug scripts (/etc/xen/scripts, with vif-unetback), iperf3, and the modules a backend
  # needs; xen-netback is loaded only for the kernel-netback baseline.
  DDBIN=$(mktemp -d /tmp/xenlab-ddbin.XXXXXX)
  strip -o "$DDBIN/unetbackd" "$BIN_DAEMON"
  strip -o "$DDBIN/unetback-ctl" "$BIN_CTL"
  DD_FILES=(/usr/bin/iperf3 "$DDBIN/unetbackd:/usr/sbin/unetbackd" "$DDBIN/unetback-ctl:/usr/bin/unetback-ctl"
    @/usr/lib/xen-4.17/bin/xl:/usr/sbin/xl @/bin/bash @/usr/bin/flock @/etc/xen/scripts
    "$ROOT/tools/hotplug/vif-unetback:/etc/xen/scripts/vif-unetback")
  for t in read write ls list rm exists chmod watch; do DD_FILES+=("@/bin/xenstore-$t:/usr/bin/xenstore-$t"); done
  "$X/mk-initrd.sh" "$CACHE" "$SHARE/domU-dd-initrd.cpio.gz" "$X/dd-init" "${DD_FILES[@]}" -- \
    xen-netfront xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs tun bridge xen-netback
  rm -rf "$DDBIN"
fi
if ((SMOKE)); then
  ROUNDS=1 SECS=3 LIMIT=${XENLAB_TIMEOUT:-900}
elif ((QUICK)); then
  ROUNDS=1 SECS=3 LIMIT=${XENLAB_TIMEOUT:-1800}
else
  ROUNDS=3 SECS=10 LIMIT=${XENLAB_TIMEOUT:-3600}
fi
# dom0's own limit for the scenarios (xenlab-init): it stops them a little before this host
# stops QEMU, so the journal and the logs still reach the share.
DOM0_LIMIT=$((LIMIT > 240 ? LIMIT - 90 : LIMIT))
printf 'SMOKE=%s\nROUNDS=%s\nSECS=%s\nSHIM=%s\nONLY=%s\nSKIP=%s\nDAEMON_ARGS="%s"\nDAEMON_WRAP="%s"\nFROM_SHARE=%s\nB_ARGS="%s"\nB_ENV="%s"\nPROFILE=%s\nDOM0_LIMIT=%s\n' \
  "$SMOKE" "$ROUNDS" "$SECS" "$SHIM" "$ONLY" "$SKIP" "$DAEMON_ARGS" "$DAEMON_WRAP" "$FROM_SHARE" "$B_ARGS" "$B_ENV" "$PROFILE" "$DOM0_LIMIT" >"$SHARE/lab.conf"

# Boot. -nic none: all traffic stays on xenbr0 inside the emulated machine. smap=0: Xen's
# 64-bit PV guests die at their first instruction under QEMU 7.2 TCG's SMAP emulation (-cpu max).
# snapshot=on: the cached root image is never written.
LOG=$CACHE/console.log
log "booting Xen (TCG; about $((ROUNDS * 4 + 5)) minutes), console log $LOG"
START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
# The emulated machine's clock runs with the host threads QEMU gets: a compiler or another
# job on this host slows the guests and dom0 by several times, at moments that differ from one
# backend's round to the next (one boot beside builds: the kernel netback 711 Mbit/s in one
# round, 67 in the next). So QEMU runs in its own session, whose scheduler autogroup gets the
# highest weight (nice -19; with autogroups a process's nice counts only within its session),
# and at nice -15 itself: a figure is the backends' own, not the host's. --host-hog keeps QEMU
# in this script's session at nice 0 beside the busy loops, which is the point of it;
# XENLAB_PRIORITY=0 also turns it off.
PRIORITY=${XENLAB_PRIORITY:-$((HOST_HOG ? 0 : 1))}
QEMU_PREFIX=()
((PRIORITY)) && QEMU_PREFIX=(setsid nice -n -15)
if ((QUICK)); then QEMU_CPU=${XENLAB_CPU:-qemu64}; else QEMU_CPU=${XENLAB_CPU:-qemu64,+svm,+npt}; fi
"${QEMU_PREFIX[@]}" qemu-system-x86_64 -accel "tcg,thread=${XENLAB_TCG_THREAD:-multi},tb-size=512" -cpu "$QEMU_CPU" -m 3072 -smp 2 \
  -display none -serial "file:$LOG" -monitor none -no-reboot -nic none \
  -kernel "$CACHE/xen.elf" \
  -append "dom0_mem=1536M,max:1536M dom0_max_vcpus=2 console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all smap=0" \
  -initrd "$CACHE/vmlinuz console=hvc0 earlyprintk=xen loglevel=4 systemd.show_status=auto${XENLAB_DOM0_ARGS:+ $XENLAB_DOM0_ARGS},$CACHE/dom0-initrd.cpio.gz" \
  -drive "file=$CACHE/rootfs.img,if=virtio,format=raw,snapshot=on" \
  -virtfs "local,path=$SHARE,mount_tag=hostshare,security_model=none,id=hostshare" \
  </dev/null >"$CACHE/qemu.log" 2>&1 &
QPID=$!
if ((PRIORITY)); then
  sleep 0.2 # setsid execs QEMU: the pid is QEMU's, and its autogroup is its own session's
  echo -19 >"/proc/$QPID/autogroup" 2>/dev/null || log "cannot raise QEMU's autogroup weight (no autogroup scheduling?)"
  log "QEMU (pid $QPID) at nice -15 in its own autogroup at nice -19, over other jobs on this host"
fi
# The host load (--host-hog): busy loops beside QEMU for the whole boot.
HOG_PIDS=()
for ((i = 0; i < HOST_HOG; i++)); do
  bash -c 'while :; do :; done' &
  HOG_PIDS+=($!)
done
((HOST_HOG)) && log "host load: $HOST_HOG busy loop(s), pids ${HOG_PIDS[*]}"
stop_hogs() {
  local p
  for p in "${HOG_PIDS[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  HOG_PIDS=()
}
# Only the QEMU and the busy loops started here are ever killed, by their PIDs.
cleanup() {
  kill -0 "$QPID" 2>/dev/null && kill "$QPID" 2>/dev/null
  wait "$QPID" 2>/dev/null || true
  stop_hogs
}
trap cleanup EXIT
: >"$LOG"
tail -n +1 -f --pid="$QPID" "$LOG" 2>/dev/null | grep -a --line-buffered -E "XENLAB|\[domU\]|panic|Panic|BUG:" &
TAILPID=$!
TIMED_OUT=0 STALLED=0 BOOTED=0
# dom0 prints its first XENLAB line 1-2 minutes after QEMU starts (Xen under TCG, then dom0's
# 17-26 s boot). A boot that has printed none after XENLAB_BOOT_LIMIT seconds stalled in the
# emulated machine (seen once beside a host at load 10: dom0's kernel stopped after Xen's "PCI
# add device" lines for 24 minutes): an environment fault like a memory corruption, exit 3.
BOOT_LIMIT=${XENLAB_BOOT_LIMIT:-480}
while kill -0 "$QPID" 2>/dev/null; do
  if (($(date +%s) - START > LIMIT)); then
    log "timeout after ${LIMIT}s: stopping QEMU (pid $QPID)"
    TIMED_OUT=1
    kill "$QPID"
    break
  fi
  if ((!BOOTED)); then # the console is read only until dom0's first line
    if grep -aq "XENLAB" "$LOG"; then
      BOOTED=1
    elif (($(date +%s) - START > BOOT_LIMIT)); then
      log "dom0 printed nothing in ${BOOT_LIMIT}s (last console line: $(tail -1 "$LOG" | cut -c1-100)): stalled boot, stopping QEMU (pid $QPID)"
      STALLED=1
      kill "$QPID"
      break
    fi
  fi
  sleep 2
done
wait "$QPID" 2>/dev/null || true
wait "$TAILPID" 2>/dev/null || true
stop_hogs
ELAPSED=$(($(date +%s) - START))
log "QEMU exited after ${ELAPSED}s"
# A CPU feature TCG cannot emulate is dropped with a warning (e.g. nrip-save): say so.
grep -a "TCG doesn't support" "$CACHE/qemu.log" | sed 's/^/[xenlab] qemu: /' >&2 || true

# The report: table, checks and JSON (tools/lab/unetlab/xenlab_report.py), and the exit status.
PYTHONPATH=$ROOT/tools/lab${PYTHONPATH:+:$PYTHONPATH} python3 -m unetlab xenlab-report \
  "$SHARE/out/results.txt" "$JSON" "$( ((SMOKE)) && echo smoke || echo "$QUICK")" "$ELAPSED" "$TIMED_OUT" "$LOG" "$HOST_HOG" "$LOAD0" "$PRIORITY" "$STALLED"
