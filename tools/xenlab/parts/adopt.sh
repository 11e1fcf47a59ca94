# shellcheck shell=bash
# Lab part "adopt" (--only/--skip adopt; also with --only unetbackd): a daemon restart the guest
# does not notice (issue 20). labu's Linux netfront on unetbackd.service across a SIGKILL of the
# daemon (in every run), a planned takeover (systemctl restart) and an upgrade in place (dpkg -i
# again: the postinst's unetback-ctl upgrade) in the full run or with --only adopt: both states
# stay 4, a TCP stream survives, the ping outage split by the daemons' milestones, the same TAP
# on xenbr0 (adopt.unetbackd.{crash,takeover,upgrade}.*). First, in the full run, the baseline:
# the kernel netback reloaded under the same guest (adopt.kernel.reload.*).
# Entry point: adopt_part (dom0-run.sh lab_parts).
# Uses from lib/: say, fig, check, wait_for, now, since, full, unit_prop, integrity (common.sh);
# kernel_netback_load, start_unetbackd, stop_unetbackd (daemon.sh); xl_create,
# destroy_checked, outage_start, outage_stop, stream_start, stream_stop (guest.sh); iperf
# (traffic.sh). Globals: reads BE, CTL, FROM_SHARE, H, ONLY, OUT, OUTAGE_LOG, OUTAGE_PID, UNIT;
# sets UNETBACKD_PID, ADOPT_STATES_PID, ADOPT_JOURNAL, ADOPT_KERNEL_WINDOW.

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
