# shellcheck shell=bash
# Lab part "life" (--only/--skip life; also with --only unetbackd): the guest lifecycle (issue
# 18), on the kernel netback (full run) and on unetbackd.service: xl save + xl restore of a PV
# domU (quick: once, full: twice, the first with a TCP stream across it), an xl save -c
# checkpoint with a stream across (same domid, same TAP, still Connected), xl migrate of a PVH
# domU to this host (quick: once, full: ten times, the first with a stream across), each with
# its outage (saverestore.*, checkpoint.*, migrate.*); the PV domU's migration, which this Xen
# refuses (full run, or no HAP); in the full run the 2-vCPU domUs too (lifecycle_mq, with "mq").
# Entry points: lifecycle kernel|unetbackd, lifecycle_mq kernel|unetbackd (dom0-run.sh lab_parts).
# Uses from lib/: say, fig, check, wait_for, now, since, has_hap, integrity (common.sh);
# kernel_netback_load, start_unetbackd, stop_unetbackd (daemon.sh); xl_create, destroy_checked,
# check_vif_gone, fe_ports, gntdev_maps, evtchn_lines, vif_connected, outage_start,
# outage_stop, stream_start, stream_stop (guest.sh); iperf (traffic.sh). Globals: reads BE, H,
# OUT, ROUNDS, VIRT_CAPS, STREAM (1 for the steps lifecycle runs with a stream across); sets
# RESUMED_AT (read by outage_stop).

# served_again TAG NAME IP OLD_DOMID [QUEUES]: after a save/restore or a migration, the domain
# runs under a new domid, its vif is Connected (with QUEUES queues) and it pings.
served_again() {
  local tag=$1 name=$2 ip=$3 d0=$4 want_q=${5:-} d1 q
  d1=$(xl domid "$name" 2>/dev/null)
  check "$tag.new_domid" "$([ -n "$d1" ] && [ "$d1" != "$d0" ] && echo 0 || echo 1)" "domid $d0 -> ${d1:-none}"
  [ -n "$d1" ] || return 1
  wait_for 60 ping -c1 -W1 "$ip"
  check "$tag.ping" $? "$ip answers ping under domid $d1"
  wait_for 30 vif_connected "$d1"
  check "$tag.connected" $? "vif $d1/0: frontend state $(xenstore-read "/local/domain/$d1/device/vif/0/state" 2>&1), backend state $(xenstore-read "$BE/$d1/0/state" 2>&1)"
  if [ -n "$want_q" ]; then
    q=$(xenstore-read "/local/domain/$d1/device/vif/0/multi-queue-num-queues" 2>/dev/null)
    check "$tag.queues" "$([ "${q:-1}" = "$want_q" ] && echo 0 || echo 1)" "frontend multi-queue-num-queues=${q:-unset} after the resume (want $want_q)"
  fi
}
# saverestore_once TAG NAME IP [QUEUES]: xl save to a file (the domain is gone after it: its vif
# must be gone completely), xl restore from it.
saverestore_once() {
  local tag=$1 name=$2 ip=$3 d0 ports t0 rc file=/var/tmp/$2.save
  d0=$(xl domid "$name")
  ports=$(fe_ports "/local/domain/$d0/device/vif")
  outage_start "$tag" "$ip"
  [ "${STREAM:-0}" = 1 ] && stream_start "$tag" "$ip"
  t0=$(now)
  xl -vvv save "$name" "$file" >"$OUT/xl-save-$tag.log" 2>&1
  rc=$?
  fig "$tag.save_s" "$(since "$t0")"
  check "$tag.xl_save" $rc "xl save rc=$rc ($(du -m "$file" 2>/dev/null | cut -f1) MiB)"
  check_vif_gone "$tag.saved" "$d0" "vif$d0.0" "$ports"
  t0=$(now)
  xl -vvv restore "$file" >"$OUT/xl-restore-$tag.log" 2>&1
  rc=$?
  fig "$tag.restore_s" "$(since "$t0")"
  RESUMED_AT=$(now)
  check "$tag.xl_restore" $rc "xl restore rc=$rc"
  rm -f "$file"
  [ $rc = 0 ] || grep -E "error|ERROR|unable" "$OUT/xl-restore-$tag.log" | tail -5 | sed 's/^/XENLAB   xl: /'
  served_again "$tag" "$name" "$ip" "$d0" "${4:-}"
  [ "${STREAM:-0}" = 1 ] && stream_stop "$tag"
  outage_stop "$tag"
}
# checkpoint_once TAG NAME IP: xl save -c, a checkpoint: the domain suspends, its memory is
# written to a file and it resumes where it stopped (the way a failed migration or Remus/COLO
# resume it), under the same domid, with its frontends still connected. Its vif must stay
# served: the same TAP (ifindex), both states at 4 throughout, pings answered after it. A
# suspend is a shutdown to the hypervisor (xenstored fires @releaseDomain), not a domain gone.
checkpoint_once() {
  local tag=$1 name=$2 ip=$3 d0 d1 idx0 idx1 t0 rc file=/var/tmp/$2.checkpoint
  d0=$(xl domid "$name")
  idx0=$(cat "/sys/class/net/vif$d0.0/ifindex" 2>/dev/null)
  outage_start "$tag" "$ip"
  [ "${STREAM:-0}" = 1 ] && stream_start "$tag" "$ip"
  t0=$(now)
  xl -vvv save -c "$name" "$file" >"$OUT/xl-save-c-$tag.log" 2>&1
  rc=$?
  RESUMED_AT=$(now)
  fig "$tag.checkpoint_s" "$(since "$t0")"
  check "$tag.xl_save_c" $rc "xl save -c rc=$rc ($(du -m "$file" 2>/dev/null | cut -f1) MiB)"
  rm -f "$file"
  [ $rc = 0 ] || grep -E "error|ERROR|unable" "$OUT/xl-save-c-$tag.log" | tail -5 | sed 's/^/XENLAB   xl: /'
  d1=$(xl domid "$name" 2>/dev/null)
  check "$tag.same_domid" "$([ "$d1" = "$d0" ] && echo 0 || echo 1)" "domid $d0 -> ${d1:-none} (a checkpoint resumes the same domain)"
  wait_for 60 ping -c1 -W1 "$ip"
  check "$tag.ping" $? "$ip answers ping after the checkpoint"
  idx1=$(cat "/sys/class/net/vif$d0.0/ifindex" 2>/dev/null)
  check "$tag.same_tap" "$([ -n "$idx0" ] && [ "$idx1" = "$idx0" ] && echo 0 || echo 1)" "vif$d0.0 ifindex ${idx0:-none} -> ${idx1:-none}"
  vif_connected "$d0"
  check "$tag.connected" $? "vif $d0/0: frontend state $(xenstore-read "/local/domain/$d0/device/vif/0/state" 2>&1), backend state $(xenstore-read "$BE/$d0/0/state" 2>&1)"
  [ "${STREAM:-0}" = 1 ] && stream_stop "$tag"
  outage_stop "$tag"
}
# migrate_once TAG NAME IP [QUEUES]: xl migrate to this host. With an empty -s (no ssh command)
# xl runs its "host" argument as the shell command that receives the stream, so
# `xl migrate -s '' NAME 'xl migrate-receive'` is a localhost migration without a network login
# (tools/xl/xl_migrate.c: rune = host when ssh_command is empty). Afterwards the old domid's vif
# is gone completely (no TAP, no event channel to it, no more gntdev mappings than the one vif
# held before) and the new domain is served. Status 2: the hypervisor cannot migrate a PV domain
# live (no log-dirty mode: Debian's Xen 4.17 is built without CONFIG_SHADOW_PAGING, which PV
# log-dirty needs); then the domain must have stayed where it was, still served, and the target
# half-built by xl migrate-receive must have left nothing behind.
migrate_once() {
  local tag=$1 name=$2 ip=$3 d0 ports t0 rc maps0 target cfg
  d0=$(xl domid "$name")
  ports=$(fe_ports "/local/domain/$d0/device/vif")
  maps0=$(gntdev_maps)
  outage_start "$tag" "$ip"
  [ "${STREAM:-0}" = 1 ] && stream_start "$tag" "$ip"
  t0=$(now)
  xl migrate -s '' "$name" 'xl migrate-receive' >"$OUT/xl-migrate-$tag.log" 2>&1
  rc=$?
  fig "$tag.migrate_s" "$(since "$t0")"
  if [ $rc != 0 ] && grep -q "Failed to enable logdirty" "$OUT/xl-migrate-$tag.log"; then
    cfg=$(grep -h 'SHADOW_PAGING' "$H/xen.config" 2>/dev/null | head -1)
    fig migrate.pv_live_migration unsupported
    say "xl migrate: this Xen has no log-dirty mode for PV guests (${cfg:-no xen.config in the share}): $(grep -m1 'logdirty' "$OUT/xl-migrate-$tag.log")"
    target=$(sed -n 's/.*Domain \([0-9]*\):cannot (re-)build domain.*/\1/p' "$OUT/xl-migrate-$tag.log" | head -1)
    check "$tag.refused_cleanly" "$([ "$(xl domid "$name" 2>/dev/null)" = "$d0" ] && ! xl list 2>/dev/null | grep -q -- '--incoming' && echo 0 || echo 1)" \
      "xl migrate rc=$rc: log-dirty refused (${cfg:-?}); $name still domid $(xl domid "$name" 2>/dev/null), no --incoming domain left"
    wait_for 30 vif_connected "$d0"
    check "$tag.still_served" $? "vif $d0/0 after the refused migration: frontend $(xenstore-read "/local/domain/$d0/device/vif/0/state" 2>&1), backend $(xenstore-read "$BE/$d0/0/state" 2>&1)"
    if [ -n "$target" ]; then
      check "$tag.target_gone" "$(! xenstore-read "$BE/$target/0/state" >/dev/null 2>&1 && ! ip link show "vif$target.0" >/dev/null 2>&1 && [ -z "$(evtchn_lines "$target")" ] && echo 0 || echo 1)" \
        "the target domain $target: no backend dir, no TAP vif$target.0, no event channel"
    fi
    # The figures of a refused attempt are not a migration's outage: named apart.
    [ "${STREAM:-0}" = 1 ] && stream_stop "$tag" refused_stall_ms
    outage_stop "$tag" refused_outage_ms
    return 2
  fi
  # shellcheck disable=SC2034 # read by outage_stop (lib/guest.sh)
  RESUMED_AT=$(now)
  check "$tag.xl_migrate" $rc "xl migrate localhost rc=$rc"
  if [ $rc != 0 ]; then
    grep -E "error|ERROR|unable|failed" "$OUT/xl-migrate-$tag.log" | tail -5 | sed 's/^/XENLAB   xl: /'
    xl dmesg >"$OUT/xl-dmesg-$tag.txt" 2>&1
    tail -8 "$OUT/xl-dmesg-$tag.txt" | sed 's/^/XENLAB   xen: /'
  fi
  check_vif_gone "$tag.old_vif" "$d0" "vif$d0.0" "$ports" "$maps0"
  served_again "$tag" "$name" "$ip" "$d0" "${4:-}"
  # A failed migration's gap (e.g. the guest crashed) is not a migration's outage: named apart.
  local sfx=
  [ $rc = 0 ] || sfx=failed_
  [ "${STREAM:-0}" = 1 ] && stream_stop "$tag" "${sfx}stall_ms"
  outage_stop "$tag" "${sfx}outage_ms"
  return $rc
}
# lifecycle BACKEND (kernel|unetbackd): the PV domU saved and restored (quick: once; full:
# twice, the first with a TCP stream across it), then checkpointed (xl save -c) with a stream
# across it; in the full run also one xl migrate of it, which
# this Xen refuses (no PV log-dirty without shadow paging) and which must leave the guest served
# and nothing of the half-built target. Then the PVH domU migrated to this host (quick: once;
# full: ten times in a row), the first migration with a TCP stream across it. Without HAP (the
# emulated CPU has no SVM with nested paging) there is no PVH guest and no migration: a failed
# check says so.
lifecycle() {
  local be=$1 n nsr=2 nmig=10
  [ "$ROUNDS" = 1 ] && nsr=1 nmig=1
  say "=== guest lifecycle on $be: xl save/restore x$nsr (PV), xl migrate localhost x$nmig (PVH)"
  if [ "$be" = kernel ]; then kernel_netback_load; else start_unetbackd || return; fi
  if xl_create "life.$be" /tmp/u1.cfg labu 10.99.0.2; then
    STREAM=1 saverestore_once "saverestore.$be.1" labu 10.99.0.2
    for n in $(seq 2 "$nsr"); do saverestore_once "saverestore.$be.$n" labu 10.99.0.2; done
    iperf "saverestore.$be" 10.99.0.2 guest_rx
    STREAM=1 checkpoint_once "checkpoint.$be" labu 10.99.0.2
    # The PV guest's refused migration: in the full run, and in a run without HAP (CI's quick
    # run, XENLAB_CPU qemu64) in place of the PVH one.
    { [ "$ROUNDS" != 1 ] || ! has_hap; } && migrate_once "migrate.$be.pv" labu 10.99.0.2
    destroy_checked "life.$be" labu
  else
    xl destroy labu >/dev/null 2>&1
  fi
  # A full run must have HAP (its default CPU has SVM with nested paging); a quick run without
  # it has no PVH guest to migrate, and says so.
  if [ "$ROUNDS" != 1 ] || has_hap; then
    check "migrate.$be.hap" "$(has_hap && echo 0 || echo 1)" \
      "xl info virt_caps: ${VIRT_CAPS:-none} (a PVH guest and its log-dirty mode need hap; QEMU -cpu with svm and npt)"
  else
    say "no HAP (xl info virt_caps: ${VIRT_CAPS:-none}): no PVH guest, no live migration in this run (XENLAB_CPU=qemu64,+svm,+npt has them)"
  fi
  if has_hap && xl_create "life.$be.pvh" /tmp/p1.cfg labp 10.99.0.6; then
    if STREAM=1 migrate_once "migrate.$be.1" labp 10.99.0.6; then
      for n in $(seq 2 "$nmig"); do migrate_once "migrate.$be.$n" labp 10.99.0.6 || break; done
      iperf "migrate.$be" 10.99.0.6 guest_rx
    fi
    destroy_checked "life.$be.pvh" labp
  fi
  xl destroy labp >/dev/null 2>&1
  if [ "$be" = kernel ]; then
    wait_for 20 rmmod xen-netback
    check "life.kernel.rmmod" $? "xen-netback unloaded"
  else
    stop_unetbackd
  fi
  integrity "life.$be"
}
# lifecycle_mq BACKEND (full run): the 2-vCPU PV domU saved and restored, the 2-vCPU PVH domU
# migrated; xen-netfront negotiates its 2 queues again on every resume.
lifecycle_mq() {
  local be=$1
  say "=== guest lifecycle on $be: 2-vCPU domUs, save/restore (PV) and migrate (PVH)"
  if [ "$be" = kernel ]; then kernel_netback_load; else start_unetbackd || return; fi
  if xl_create "life.$be.mq" /tmp/mq.cfg labmq 10.99.0.3; then
    saverestore_once "saverestore.$be.mq" labmq 10.99.0.3 2
    iperf "life.$be.mq" 10.99.0.3 guest_rx -P 2
  fi
  xl destroy labmq >/dev/null 2>&1
  if has_hap && xl_create "life.$be.pvhmq" /tmp/pmq.cfg labpmq 10.99.0.7; then
    migrate_once "migrate.$be.mq" labpmq 10.99.0.7 2 &&
      iperf "migrate.$be.mq" 10.99.0.7 guest_rx -P 2
  fi
  xl destroy labpmq >/dev/null 2>&1
  if [ "$be" = kernel ]; then wait_for 20 rmmod xen-netback; else stop_unetbackd; fi
  integrity "life.$be.mq"
}
