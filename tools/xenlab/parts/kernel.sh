# shellcheck shell=bash
# Lab part "kernel" (--only/--skip kernel): one round of the kernel's xen-netback, the baseline
# of unetbackd's rounds. unetbackd.service stopped, xen-netback loaded with modprobe -i, labu
# created (ping, RTT, iperf3 guest_rx and guest_tx), labu2 beside it (iperf3 domU -> domU both
# ways), both destroyed, xen-netback unloaded (kernel.rN.rmmod), the canary.
# Entry point: kernel_round ROUND (dom0-run.sh lab_parts, in every round).
# Uses from lib/: say, check, wait_for, integrity (common.sh); kernel_netback_load (daemon.sh);
# xl_create (guest.sh); ping_rtt, iperf, iperf_d2d (traffic.sh). Globals: none of its own.

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
