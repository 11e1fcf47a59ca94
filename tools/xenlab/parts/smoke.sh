# shellcheck shell=bash
# Lab part "smoke" (xenlab.sh --smoke, CI; SMOKE=1 in lab.conf: the only part then): the
# package's unetbackd.service as dpkg -i left it, one Linux-netfront domU (labu) created with xl
# on xenbr0, ping, RTT and an iperf3 run each way, a SIGKILL of the daemon (systemd restarts it,
# the guest answers ping again), xl destroy with its checks (backend state 6, no TAP, no mapped
# grant, no bound event channel), the canary.
# Entry point: smoke_part (dom0-run.sh, when SMOKE=1).
# Uses from lib/: say, unit_prop, integrity (common.sh); start_unetbackd, sigkill_restart
# (daemon.sh); xl_create, destroy_checked (guest.sh); ping_rtt, iperf (traffic.sh).
# Globals: reads CTL, OUT; sets UNETBACKD_PID.

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
