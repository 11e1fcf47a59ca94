# shellcheck shell=bash
# Lab part "shim" (SHIM=1, i.e. not xenlab.sh --no-shim; --only/--skip shim): netfront-shim in
# a domU (labshim, no kernel netfront there) against the kernel netback and against unetbackd:
# ping, RTT, iperf3 both ways; with unetbackd also a SIGKILL of the daemon (systemd restarts it,
# the shim is served again). The guest's console is kept in out/, the canary checked.
# Entry point: shim_round kernel|unetbackd (dom0-run.sh lab_parts, kernel first).
# Uses from lib/: say, wait_for, integrity (common.sh); kernel_netback_load, start_unetbackd,
# stop_unetbackd, sigkill_restart (daemon.sh); xl_create (guest.sh); ping_rtt, iperf
# (traffic.sh). Globals: reads OUT.

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
