#!/bin/bash
# shellcheck source-path=SCRIPTDIR
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
#
# This file is the driver: it reads lab.conf, sources the library and the lab parts, prepares
# dom0 (dom0_setup), runs the parts lab.conf chooses (ONLY, SKIP; SMOKE: the smoke part alone)
# and ends with the package's removal and the closing checks. Beside it (tools/xenlab/ in the
# repository; tools/lab/xenlab.sh copies the same tree into the share, /host):
#   lib/common.sh   say, fig, check, wait_for, clocks, unit_prop, integrity, has_hap
#   lib/dom0.sh     dom0_setup (boot checks, dpkg -i, canary, Xen's caps, watchdog, domU
#                   configs), mkcfg, remove_checks
#   lib/daemon.sh   unetbackd.service (start, stop, drop-in, SIGKILL restart), the kernel netback
#   lib/guest.sh    xl create/destroy with their checks, vif leftovers, outage and stream probes
#   lib/traffic.sh  ping, iperf3 runs and unetbackd's counters, syscall counts, profiles
#   parts/NAME.sh   one lab part each, its entry points named in its header:
#                   kernel (kernel_round), unetbackd (unetbackd_round), switch
#                   (switch_d2d_round), shim (shim_round), life (lifecycle, lifecycle_mq), adopt
#                   (adopt_part), libvirt (libvirt_round, journal_checks), dd (dd_part), mq
#                   (kernel_mq, unetbackd_extras), smoke (smoke_part)

set -u
export PATH=/usr/lib/xen-4.17/bin:/usr/sbin:/usr/bin:/sbin:/bin
H=/host
OUT=$H/out
mkdir -p "$OUT"
RES=$OUT/results.txt
: >"$RES"
ROUNDS=1 SECS=3 SHIM=1 ONLY= SKIP= DAEMON_ARGS= DAEMON_WRAP= FROM_SHARE=0 B_ARGS= B_ENV= PROFILE=0 SMOKE=0
. "$H/lab.conf"

# The library and the lab parts: beside this file. Sourcing them only defines functions and
# constants; nothing runs before dom0_setup below.
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/common.sh
. "$LAB_DIR/lib/common.sh" || exit 1
# shellcheck source=lib/dom0.sh
. "$LAB_DIR/lib/dom0.sh" || exit 1
# shellcheck source=lib/daemon.sh
. "$LAB_DIR/lib/daemon.sh" || exit 1
# shellcheck source=lib/guest.sh
. "$LAB_DIR/lib/guest.sh" || exit 1
# shellcheck source=lib/traffic.sh
. "$LAB_DIR/lib/traffic.sh" || exit 1
# shellcheck source=parts/smoke.sh
. "$LAB_DIR/parts/smoke.sh" || exit 1
# shellcheck source=parts/kernel.sh
. "$LAB_DIR/parts/kernel.sh" || exit 1
# shellcheck source=parts/unetbackd.sh
. "$LAB_DIR/parts/unetbackd.sh" || exit 1
# shellcheck source=parts/switch.sh
. "$LAB_DIR/parts/switch.sh" || exit 1
# shellcheck source=parts/shim.sh
. "$LAB_DIR/parts/shim.sh" || exit 1
# shellcheck source=parts/life.sh
. "$LAB_DIR/parts/life.sh" || exit 1
# shellcheck source=parts/adopt.sh
. "$LAB_DIR/parts/adopt.sh" || exit 1
# shellcheck source=parts/libvirt.sh
. "$LAB_DIR/parts/libvirt.sh" || exit 1
# shellcheck source=parts/dd.sh
. "$LAB_DIR/parts/dd.sh" || exit 1
# shellcheck source=parts/mq.sh
. "$LAB_DIR/parts/mq.sh" || exit 1

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

dom0_setup
if [ "$SMOKE" = 1 ]; then
  smoke_part
else
  lab_parts
fi
for f in /var/log/xen/console/guest-*.log; do [ -f "$f" ] && cp "$f" "$OUT/console-$(basename "$f")"; done
cp /var/log/xen/xl-*.log "$OUT/" 2>/dev/null
dmesg >"$OUT/dmesg.txt" 2>/dev/null
journalctl -b -u "$UNIT" -o short-monotonic >"$OUT/unetbackd.log" 2>&1
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
