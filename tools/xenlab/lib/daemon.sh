# shellcheck shell=bash
# unetbackd.service and the kernel netback, for the parts that switch between them.
#   set_dropin [ARG...]       the unit's runtime drop-in: DAEMON_WRAP, DAEMON_ARGS, ARGs and
#                             START_ENV (none of them: no drop-in)
#   start_unetbackd [ARG...]  systemctl start; checks unetbackd.start and
#                             systemd.ready_means_serving, sets UNETBACKD_PID and READY_US
#   stop_unetbackd            systemctl stop; checks unetbackd.stop (a clean exit on SIGTERM)
#   kernel_netback_load       unetbackd.service stopped, xen-netback loaded with modprobe -i
#   sigkill_restart TAG IP    a SIGKILL of the daemon: systemd restarts it, the guest at IP pings
#   unit_diagnosis            the unit's status and journal on the console (a start that failed)
# Uses from lib/common.sh: say, fig, check, wait_for, now, since, unit_prop; from
# lib/traffic.sh: iperf. Globals read: UNIT, BIN, CTL, DAEMON_ARGS, DAEMON_WRAP, FROM_SHARE,
# START_ENV (the caller's, may be unset); set: UNETBACKD_PID, READY_US, READY_CHECK_PENDING (the
# first xl create after READY=1 is checked against it: xl_create in lib/guest.sh), DROPIN.

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

# Why the unit is not running, into the console: its status (a skipped condition, an exit
# status, a namespace setup that failed) and the journal's last lines about it.
unit_diagnosis() {
  systemctl status --no-pager --lines=0 "$UNIT" 2>&1 | sed 's/^/XENLAB   unit: /'
  journalctl --no-pager -b -n 30 -u "$UNIT" 2>&1 | sed 's/^/XENLAB   journal: /'
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
  # shellcheck disable=SC2034 # READY_US: read by xl_create (lib/guest.sh)
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
  [ $st = 0 ] || unit_diagnosis
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

# The kernel netback's turn: unetbackd.service stopped (it would race the kernel netback for
# every vif), then xen-netback loaded by name with -i (--ignore-install: skips the package's
# "install xen-netback /bin/false", which is there to stop exactly this load).
kernel_netback_load() {
  stop_unetbackd
  modprobe -i xen-netback
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
  check systemd.restart_after_sigkill $rc "NRestarts $n0 -> $n1, pid $old -> $new, $(systemctl is-active "$UNIT")"
  [ "$new" != 0 ] && UNETBACKD_PID=$new
  wait_for 60 ping -c1 -W1 "$ip"
  rc=$?
  fig systemd.served_after_restart_s "$(since "$t0")"
  check systemd.served_after_restart $rc "$ip answers ping again after the restart ($(since "$t0") s after the SIGKILL)"
  [ $rc = 0 ] && iperf "$tag.restarted" "$ip" guest_rx
}
