# shellcheck shell=bash
# Lab part "unetbackd" (--only/--skip unetbackd): one round of unetbackd.service. labu created
# (xen-netback not auto-loaded by udev, ping, RTT, iperf3 both ways; in round 1 XDP in the domU:
# xdp_round), labu2 beside it (domU -> domU both ways, in the full run with the syscall counts;
# labu2's destroy checked while labu keeps its grants mapped), guest RX and TX again with the
# daemon's syscalls counted (and profiled with --profile), labu's destroy checked, the canary.
# With B_ARGS or B_ENV (xenlab.sh --b-arg, --b-env) each round runs a second time as
# unetbackd_b: the daemon with B_ARGS on its command line and B_ENV in its environment.
# Entry point: unetbackd_round ROUND [b] (dom0-run.sh lab_parts, in every round).
# Uses from lib/: say, fig, check, wait_for, now, since, full, integrity (common.sh);
# start_unetbackd, stop_unetbackd (daemon.sh); xl_create, destroy_checked, gntdev_maps,
# vif_connected (guest.sh); ping_rtt, iperf, iperf_once, iperf_d2d, in_domu, syscall_window,
# profile_window, profile_d2d (traffic.sh). Globals: reads BE, CTL, OUT, RES, SECS, UNIT,
# B_ARGS, B_ENV; START_ENV is unetbackd_round's local, which set_dropin reads.

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
  mark=$(journalctl -u "$UNIT" -n 1 --show-cursor 2>/dev/null | sed -n 's/^-- cursor: //p')
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
    seen=$(journalctl -u "$UNIT" ${mark:+--after-cursor="$mark"} -o cat 2>/dev/null |
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
    # shellcheck disable=SC2034 # read by set_dropin (lib/daemon.sh)
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
