# shellcheck shell=bash
# Lab part "switch" (full run, or --only switch; --skip switch): labu and labu2 on unetbackd's
# internal switch "lab" (bridge=unetback:lab, vif-unetback) with its uplink TAP ubup0 on
# xenbr0; iperf3 domU -> domU both ways, checked to have gone through the switch (tx_switched),
# both destroys checked, the canary.
# Entry point: switch_d2d_round ROUND (dom0-run.sh lab_parts, in every round).
# Uses from lib/: say, fig, check, integrity (common.sh); start_unetbackd, stop_unetbackd
# (daemon.sh); xl_create, destroy_checked, gntdev_maps (guest.sh); iperf_d2d, ub_counter
# (traffic.sh). Globals: reads CTL, OUT.

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
