# shellcheck shell=bash
# shellcheck disable=SC2034 # its globals are read by the other files of lib/ and parts/
# The lab library's core (tools/xenlab/lib/common.sh), sourced by dom0-run.sh after it has read
# /host/lab.conf (FROM_SHARE and ROUNDS are used here) and before the rest of lib/ and parts/.
#   say MSG                  a console line "XENLAB <uptime> MSG" (the watchdog's last-said time)
#   fig NAME VALUE           a figure: "FIG NAME VALUE" in results.txt, and said
#   check NAME 0|1 DETAIL... a check: "CHECK NAME PASS|FAIL DETAIL" in results.txt, and said
#   wait_for SECONDS CMD...  polls CMD every 0.5 s; status 0 as soon as it succeeds
#   full                     status 0 in a full run (ROUNDS is not 1)
#   up, now, since T0, mono_us  uptime (s), date +%s.%N, seconds since T0, CLOCK_MONOTONIC (us)
#   unit_prop NAME           a property of unetbackd.service (systemctl show)
#   integrity TAG            check TAG.dom0_memory_intact (the canary of lib/dom0.sh)
#   has_hap                  status 0 when Xen has HAP (VIRT_CAPS of lib/dom0.sh)
# Globals set here: BE (dom0's backend/vif directory in xenstore), UNETBACKD_PID (the daemon's
# pid, empty while it is not running), BIN and CTL (unetbackd's directory and unetback-ctl: the
# package's, or /host/bin's with --programs-from-share), UNIT. Read: H, RES (dom0-run.sh),
# FROM_SHARE, ROUNDS (lab.conf), CANARY_SUM, VIRT_CAPS (lib/dom0.sh).

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

# mono_us: CLOCK_MONOTONIC in microseconds (/proc/uptime is CLOCK_BOOTTIME: the same here, no
# suspend), for comparison with systemd's *TimestampMonotonic.
mono_us() { awk '{printf "%d", $1 * 1000000}' /proc/uptime; }
unit_prop() { systemctl show -p "$1" --value "$UNIT"; }

# integrity TAG: the canary (/tmp/canary, written by canary_start in lib/dom0.sh) still has its
# checksum: a stray write into dom0 memory (a grant copy landing on the wrong frame, say) shows
# up here, or as processes dying of heap corruption (counted from the console on the host).
integrity() { # integrity TAG
  local s
  s=$(sha256sum </tmp/canary)
  check "$1.dom0_memory_intact" "$([ "$s" = "$CANARY_SUM" ] && echo 0 || echo 1)" \
    "128 MiB tmpfs canary checksum $([ "$s" = "$CANARY_SUM" ] && echo unchanged || echo CHANGED)"
}

# has_hap: Xen has HAP (xl info's virt_caps, read by xen_caps in lib/dom0.sh), which PVH guests
# and their live migration need (log-dirty on HAP; this Xen has no shadow paging).
has_hap() { echo " $VIRT_CAPS " | grep -q ' hap '; }
