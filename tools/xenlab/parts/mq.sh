# shellcheck shell=bash
# Lab part "mq" (--only mq: both backends, umq: unetbackd only, kmq: the kernel netback three
# times with detach/attach; --skip mq): a 2-vCPU domU (labmq, 2 queues).
#   kernel_mq [long]   on the kernel netback (full run): two queues, iperf3 with 2 streams each
#                      way; with long also xl network-detach/attach; xen-netback unloaded
#   unetbackd_extras   on unetbackd (started and stopped by the caller): two queues, iperf3
#                      (and --profile), the max-queues tunable written with xenstore-write and
#                      seen by the daemon, xl network-detach (the vif gone completely) and
#                      network-attach (pings again, the tunable applied: one queue), destroy
# Entry points: kernel_mq [long], unetbackd_extras (dom0-run.sh lab_parts, near the end).
# Uses from lib/: say, fig, check, wait_for, now, since, integrity (common.sh);
# kernel_netback_load (daemon.sh); xl_create, destroy_checked, check_vif_gone, fe_ports
# (guest.sh); iperf, profile_window (traffic.sh). Globals: reads BE, CTL, OUT.

# The 2-vCPU domU on the kernel netback: the baseline of unetbackd's multi-queue scenario.
kernel_mq() { # [long]: also network-detach/attach, as unetbackd's scenario does
  local tag=kernel.mq d q
  say "=== kernel xen-netback: 2-vCPU domU"
  kernel_netback_load
  if xl_create "$tag" /tmp/mq.cfg labmq 10.99.0.3; then
    d=$(xl domid labmq)
    q=$(xenstore-read "/local/domain/$d/device/vif/0/multi-queue-num-queues" 2>/dev/null)
    fig "$tag.queues" "${q:-1}"
    check "$tag.two_queues" "$([ "${q:-1}" = 2 ] && echo 0 || echo 1)" "frontend multi-queue-num-queues=${q:-unset}"
    iperf "$tag" 10.99.0.3 guest_rx -P 2
    iperf "$tag" 10.99.0.3 guest_tx -P 2
  fi
  if [ "${1:-}" = long ] && xl domid labmq >/dev/null 2>&1; then
    # The same detach/attach as unetbackd's scenario (and so the same time with the domU).
    xl network-detach labmq 0 >"$OUT/xl-detach-kernel.log" 2>&1
    check "$tag.detach.rc" $? "xl network-detach rc=$?"
    xl network-attach labmq bridge=xenbr0 mac=00:16:3e:00:00:03 >"$OUT/xl-attach-kernel.log" 2>&1
    check "$tag.attach.rc" $? "xl network-attach rc=$?"
    wait_for 60 ping -c1 -W1 10.99.0.3
    check "$tag.attach.ping" $? "10.99.0.3 answers again on the re-attached vif"
    iperf "$tag.attach" 10.99.0.3 guest_rx
  fi
  xl destroy labmq >/dev/null 2>&1
  wait_for 20 rmmod xen-netback
  check "$tag.rmmod" $? "xen-netback unloaded"
  integrity "$tag"
}

# Multi-queue, a tunable changed through xenstore, network-detach/attach on a running domain.
unetbackd_extras() {
  local tag=unetbackd.mq d fe q ports
  say "=== unetbackd: 2-vCPU domU, tunable, detach/attach"
  xl_create "$tag" /tmp/mq.cfg labmq 10.99.0.3 || { xl destroy labmq >/dev/null 2>&1; return; }
  d=$(xl domid labmq)
  fe=/local/domain/$d/device/vif/0
  q=$(xenstore-read "$fe/multi-queue-num-queues" 2>/dev/null)
  fig "$tag.queues" "${q:-1}"
  check "$tag.two_queues" "$([ "${q:-1}" = 2 ] && echo 0 || echo 1)" "frontend multi-queue-num-queues=${q:-unset} (backend offers $(xenstore-read "$BE/$d/0/multi-queue-max-queues"))"
  iperf "$tag" 10.99.0.3 guest_rx -P 2
  iperf "$tag" 10.99.0.3 guest_tx -P 2
  profile_window "$tag" 10.99.0.3 guest_rx -P 2
  profile_window "$tag" 10.99.0.3 guest_tx -P 2
  integrity "$tag"

  # The tunable: max-queues 1, written straight into xenstore as an operator would.
  xenstore-write /local/domain/0/unetback/max-queues 1
  wait_for 10 sh -c "'$CTL' get max-queues | grep -qw 1"
  check "unetbackd.tunable.seen" $? "unetback-ctl get max-queues: $("$CTL" get max-queues 2>&1 | tr '\n' ' ')"

  # Detach while running: the vif must go away completely, and the domain keeps running.
  ports=$(fe_ports "$fe")
  local t0
  t0=$(now)
  xl network-detach labmq 0 >"$OUT/xl-detach.log" 2>&1
  local rc=$?
  fig "unetbackd.detach_s" "$(since "$t0")"
  check "unetbackd.detach.rc" $rc "xl network-detach rc=$rc"
  wait_for 15 sh -c "! xenstore-read $BE/$d/0/state"
  check "unetbackd.detach.backend_removed" $? "backend directory removed"
  check_vif_gone unetbackd.detach "$d" "vif$d.0" "$ports"

  t0=$(now)
  xl network-attach labmq bridge=xenbr0 mac=00:16:3e:00:00:03 >"$OUT/xl-attach.log" 2>&1
  rc=$?
  fig "unetbackd.attach_s" "$(since "$t0")"
  check "unetbackd.attach.rc" $rc "xl network-attach rc=$rc"
  local dev
  dev=$(xenstore-list "/local/domain/$d/device/vif" 2>/dev/null | tail -1)
  t0=$(now)
  wait_for 60 ping -c1 -W1 10.99.0.3
  check "unetbackd.attach.ping" $? "10.99.0.3 answers again on the re-attached vif $dev"
  fig "unetbackd.attach.ping_ready_s" "$(since "$t0")"
  local mq nq
  mq=$(xenstore-read "$BE/$d/$dev/multi-queue-max-queues" 2>/dev/null)
  nq=$(xenstore-read "/local/domain/$d/device/vif/$dev/multi-queue-num-queues" 2>/dev/null)
  check "unetbackd.tunable.applied" "$([ "$mq" = 1 ] && [ "${nq:-1}" = 1 ] && echo 0 || echo 1)" \
    "after xenstore-write max-queues 1: backend offers ${mq:-unset}, frontend uses ${nq:-1}"
  iperf unetbackd.attach 10.99.0.3 guest_rx
  xenstore-write /local/domain/0/unetback/max-queues 4
  destroy_checked "$tag" labmq
  integrity unetbackd.extras
}
