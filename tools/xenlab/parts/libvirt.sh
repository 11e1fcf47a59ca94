# shellcheck shell=bash
# Lab part "libvirt" (--only/--skip libvirt; also with --only unetbackd): a PV domain created
# through libvirtd's libxl driver (virsh -c xen:///) with <interface type='bridge'> on xenbr0,
# served by unetbackd (ping, RTT, iperf3 both ways), virsh destroy with the checks of an xl
# destroy; then the daemon's lines in the journal, with their priorities (journal_checks).
# Entry points: libvirt_round, journal_checks (dom0-run.sh lab_parts, with unetbackd started
# and stopped around them).
# Uses from lib/: say, fig, check, wait_for, now, since, integrity (common.sh); destroy_checked
# (guest.sh); ping_rtt, iperf (traffic.sh). Globals: reads BE, CTL, OUT, UNIT; sets VIRSH, and
# DESTROY_WITH, DESTROY_LOG (lib/guest.sh) around its destroy.

# The daemon's lines in the journal, with a priority per level: an info line ("new vif") is in
# journalctl -u, a warning (a bad tunable written into xenstore, rejected) is in -p warning and
# the info line is not.
journal_checks() {
  local t0 all warn
  say "=== journal: journalctl -u $UNIT"
  t0=$(now)
  xenstore-write /local/domain/0/unetback/max-queues bogus
  wait_for 15 sh -c "journalctl -b -u $UNIT -p warning -o cat | grep -q 'max-queues: rejected'"
  all=$(journalctl -b -u "$UNIT" -o cat 2>&1)
  warn=$(journalctl -b -u "$UNIT" -p warning -o cat 2>&1)
  fig systemd.journal_lines "$(echo "$all" | wc -l)"
  check systemd.journal_has_daemon_lines "$(echo "$all" | grep -q 'new vif ' && echo 0 || echo 1)" \
    "journalctl -u $UNIT: $(echo "$all" | wc -l) lines, $(echo "$all" | grep -c 'new vif ') 'new vif' (info)"
  check systemd.journal_priorities "$(echo "$warn" | grep -q 'max-queues: rejected' && ! echo "$warn" | grep -q 'new vif ' && echo 0 || echo 1)" \
    "-p warning: $(echo "$warn" | grep -c .) lines, $(echo "$warn" | grep -c 'new vif ') 'new vif'; $(echo "$warn" | grep 'max-queues' | tail -1 | cut -c1-120)"
  fig systemd.journal_checks_s "$(since "$t0")"
}

# libvirt: a PV domain created through libvirtd's libxl driver (virsh -c xen:///), its
# <interface type='bridge'> on xenbr0 served by unetbackd; then virsh destroy with the same
# checks as after xl destroy.
# Every virsh call has a time limit: a libvirtd that does not answer fails the scenario, not the
# whole boot.
VIRSH="timeout 300 virsh -c xen:///"
libvirt_round() {
  local tag=libvirt d t0 rc fe script
  say "=== libvirt: virsh -c xen:/// create, bridge interface on xenbr0"
  # libxl's debug lines (the teardown's "wanted state 6 ok") in libvirt's libxl log.
  sed -i 's/^#* *log_level *=.*/log_level = 1/' /etc/libvirt/libxl.conf 2>/dev/null
  cat >/tmp/virt.xml <<'XML'
<domain type='xen'>
  <name>labvirt</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='xenpv'>linux</type>
    <kernel>/tmp/img/vmlinuz</kernel>
    <initrd>/tmp/img/domU-initrd.cpio.gz</initrd>
    <cmdline>console=hvc0 rdinit=/init lab_ip=10.99.0.6/24 quiet loglevel=4</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <interface type='bridge'>
      <source bridge='xenbr0'/>
      <mac address='00:16:3e:00:00:06'/>
    </interface>
    <console type='pty'><target type='xen' port='0'/></console>
  </devices>
</domain>
XML
  t0=$(now)
  $VIRSH version >"$OUT/virsh-version.txt" 2>&1
  rc=$?
  fig "$tag.libvirtd_first_answer_s" "$(since "$t0")"
  check "$tag.virsh_connect" $rc "virsh -c xen:/// version: $(grep -i 'running hypervisor' "$OUT/virsh-version.txt" | tr -s ' ')"
  if [ $rc != 0 ]; then
    tail -5 "$OUT/virsh-version.txt" | sed 's/^/XENLAB   virsh: /'
    journalctl -b -u libvirtd -o short-monotonic --no-pager 2>&1 | tail -15 | sed 's/^/XENLAB   libvirtd: /'
    cp /var/log/libvirt/libxl/libxl-driver.log "$OUT/libvirt-libxl-driver.log" 2>/dev/null
    return
  fi
  t0=$(now)
  $VIRSH create /tmp/virt.xml >"$OUT/virsh-create.log" 2>&1
  rc=$?
  fig "$tag.create_s" "$(since "$t0")"
  check "$tag.virsh_create" $rc "virsh create rc=$rc: $(grep . "$OUT/virsh-create.log" | tail -1)"
  if [ $rc != 0 ]; then
    tail -20 /var/log/libvirt/libxl/libxl-driver.log 2>/dev/null | sed 's/^/XENLAB   libxl: /'
    cp /var/log/libvirt/libxl/libxl-driver.log "$OUT/libvirt-libxl-driver.log" 2>/dev/null
    return
  fi
  d=$(xl domid labvirt)
  t0=$(now)
  wait_for 90 ping -c1 -W1 10.99.0.6
  rc=$?
  fig "$tag.ping_ready_s" "$(since "$t0")"
  check "$tag.ping" $rc "10.99.0.6 answers ping"
  fe=$(xenstore-read "/local/domain/$d/device/vif/0/backend" 2>/dev/null)
  script=$(xenstore-read "$BE/$d/0/script" 2>/dev/null)
  fig "$tag.vif_script" "${script:-none}"
  check "$tag.backend_in_dom0" "$([ "$fe" = "$BE/$d/0" ] && [ "$(xenstore-read "$BE/$d/0/state" 2>/dev/null)" = 4 ] && echo 0 || echo 1)" \
    "frontend's backend $fe, state $(xenstore-read "$BE/$d/0/state" 2>/dev/null), hotplug-status $(xenstore-read "$BE/$d/0/hotplug-status" 2>/dev/null), script $script"
  "$CTL" list >"$OUT/ctl-list-$tag.txt" 2>&1
  check "$tag.served_by_unetbackd" "$(grep -q "vif$d\.0\|$d/0" "$OUT/ctl-list-$tag.txt" && ip link show master xenbr0 2>/dev/null | grep -q "vif$d\.0" && echo 0 || echo 1)" \
    "unetback-ctl list: $(grep "vif$d\.0\|$d/0" "$OUT/ctl-list-$tag.txt" | head -1 | tr -s ' '); vif$d.0 on xenbr0: $(ip link show master xenbr0 2>/dev/null | grep -c "vif$d\.0")"
  check "$tag.netback_not_loaded" "$(lsmod | grep -q '^xen_netback' && echo 1 || echo 0)" \
    "xen-netback not loaded though libvirt's libxl wrote backend/vif"
  if [ $rc = 0 ]; then
    ping_rtt "$tag" 10.99.0.6
    iperf "$tag" 10.99.0.6 guest_rx
    iperf "$tag" 10.99.0.6 guest_tx
  fi
  DESTROY_WITH="$VIRSH destroy" DESTROY_LOG=/var/log/libvirt/libxl/libxl-driver.log
  destroy_checked "$tag" labvirt
  # shellcheck disable=SC2034 # read by destroy_checked (lib/guest.sh)
  DESTROY_WITH="xl -vvv destroy" DESTROY_LOG=
  wait_for 15 sh -c "! xenstore-read $BE/$d/0/state"
  check "$tag.backend_removed" $? "backend directory $BE/$d/0 removed"
  cp /var/log/libvirt/libxl/libxl-driver.log "$OUT/libvirt-libxl-driver.log" 2>/dev/null
  cp /var/log/libvirt/libxl/labvirt.log "$OUT/libvirt-labvirt.log" 2>/dev/null
  integrity "$tag"
}
