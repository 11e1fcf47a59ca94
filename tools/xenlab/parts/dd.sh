# shellcheck shell=bash
# Lab part "dd" (--only/--skip dd): a driver domain. labdd, a PV domU with driver_domain=1
# (tools/xenlab/dd-init), runs unetbackd (or, in the full run, the kernel's xen-netback as the
# baseline) and xl devd; a client domU labc with backend=labdd: Connected under labdd's backend
# path, the hotplug script run in labdd, ping, iperf3 both ways, the grant and maptrack frames
# Xen reports; with unetbackd also xl destroy of labc (everything released in labdd) and xl
# destroy of labdd under a running client (driverdomain.*).
# Entry point: dd_part (dom0-run.sh lab_parts).
# Uses from lib/: say, fig, check, wait_for, now, since, full, unit_prop, integrity
# (common.sh); start_unetbackd (daemon.sh); xl_create, xl_create_logged, fe_ports,
# domain_evtchn_lines (guest.sh); iperf_once (traffic.sh). Globals: reads BE, OUT, SECS, UNIT;
# sets DD_IP, DD_BR_IP, DDC_IP, DD (labdd's domid), C (labc's), DD_BACKEND, UNETBACKD_PID.

# Driver domains (issue 18). labdd is a PV domU with driver_domain=1 (tools/xenlab/dd-init): it
# runs the backend (unetbackd started by hand, as unetbackd-driver-domain.service would; or the
# kernel's xen-netback, the baseline) and `xl devd`, which runs the vif hotplug script there.
# Its own vif (eth0, 10.99.0.10 on xenbr0, served by dom0's unetbackd.service) carries lab-cmd:
# dom0 runs the checks inside it through that. The client labc has
# vif = ['backend=labdd,bridge=br0,...']: its backend directory is the driver domain's
# /local/domain/<dd>/backend/vif/<client>/0, its TAP/vif goes on the driver domain's br0
# (10.0.3.1), and iperf3 runs in the driver domain (guest_rx: labdd -> labc, guest_tx: -R).
DD_IP=10.99.0.10 DD_BR_IP=10.0.3.1 DDC_IP=10.0.3.2
mkcfg_dd() { # FILE BACKEND(unetbackd|kernel)
  cat >"$1" <<EOF
name = "labdd"
type = "pv"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/domU-dd-initrd.cpio.gz"
extra = "console=hvc0 rdinit=/init lab_ip=$DD_IP/24 lab_br=$DD_BR_IP/24 lab_backend=$2 quiet loglevel=4"
memory = 320
vcpus = 1
driver_domain = 1
vif = [ 'bridge=xenbr0,mac=00:16:3e:00:00:10' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
}
# mkcfg_ddc: the client labc's xl config, /tmp/ddc.cfg: its vif served by labdd, on labdd's br0.
mkcfg_ddc() {
  cat >/tmp/ddc.cfg <<EOF
name = "labc"
type = "pv"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/domU-initrd.cpio.gz"
extra = "console=hvc0 rdinit=/init lab_ip=$DDC_IP/24 quiet loglevel=4"
memory = 256
vcpus = 1
vif = [ 'backend=labdd,bridge=br0,ip=$DDC_IP,mac=00:16:3e:00:03:02' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
}
# in_dd [-t SECONDS] COMMAND-LINE: runs it in labdd (lab-cmd, port 5397) and prints its output,
# which ends with "lab-cmd: rc=N". dd_ok COMMAND-LINE: status 0 if it ran there with status 0.
in_dd() {
  local t=20
  [ "$1" = -t ] && { t=$2; shift 2; }
  timeout "$t" bash -c 'exec 3<>"/dev/tcp/$0/5397" || exit 1; echo "$1" >&3; cat <&3' "$DD_IP" "$*"
}
dd_ok() { in_dd "$@" | tail -1 | grep -qx 'lab-cmd: rc=0'; }
# dd_wait SECONDS COMMAND-LINE: dd_ok until it succeeds, for at most SECONDS in all (wait_for
# counts tries, and one in_dd may take its whole time limit).
dd_wait() {
  local end=$(($(cut -d. -f1 /proc/uptime) + $1))
  shift
  until dd_ok "$@"; do
    [ "$(cut -d. -f1 /proc/uptime)" -ge $end ] && return 1
    sleep 0.5
  done
}
# Xen's grant-table report ('g' debug key) into xl dmesg, saved as $OUT/xl-dmesg-gnttab-TAG.txt;
# gnttab_of FILE DOMID prints domain DOMID's "FRAMES MAX MAPTRACK_FRAMES MAX" from it.
gnttab_report() { # TAG
  xl dmesg -c >/dev/null 2>&1
  xl debug-keys g
  sleep 1
  xl dmesg >"$OUT/xl-dmesg-gnttab-$1.txt" 2>&1
}
gnttab_of() {
  awk -v d="d$2" '/grant-table for remote/ {hit = ($0 ~ ("remote " d " ")); next}
    hit && /maptrack frames/ {print; exit}' "$1" |
    sed -n 's/.* \([0-9]*\) frames (\([0-9]*\) max), \([0-9]*\) maptrack frames (\([0-9]*\) max).*/\1 \2 \3 \4/p'
}
# dd_grants TAG DD CLIENT: the maptrack frames the driver domain uses while it serves the client,
# the grant frames the client uses, and the limits Xen gave each (xl.cfg max_maptrack_frames,
# max_grant_frames; not set here: the defaults).
dd_grants() {
  local tag=$1 f=$OUT/xl-dmesg-gnttab-$1.txt u v
  gnttab_report "$tag"
  u=$(gnttab_of "$f" "$2")
  v=$(gnttab_of "$f" "$3")
  check "$tag.gnttab_usage_read" "$([ -n "$u" ] && [ -n "$v" ] && echo 0 || echo 1)" \
    "Xen's grant tables: driver domain d$2: ${u:-no line}; client d$3: ${v:-no line} (frames max maptrack max)"
  # shellcheck disable=SC2086 # four numbers
  [ -n "$u" ] && set -- $u && fig "$tag.dd_maptrack_frames" "$3" && fig "$tag.dd_maptrack_frames_max" "$4" &&
    fig "$tag.dd_grant_frames_max" "$2"
  # shellcheck disable=SC2086
  [ -n "$v" ] && set -- $v && fig "$tag.client_grant_frames" "$1" && fig "$tag.client_grant_frames_max" "$2" &&
    fig "$tag.client_maptrack_frames_max" "$4"
}

# dd_create BACKEND: labdd up, its backend serving, xl devd running. Status 0 when ready.
dd_create() {
  local be=$1 tag=driverdomain.$1 t0 rc
  mkcfg_dd /tmp/dd.cfg "$be"
  xl_create "$tag.dd" /tmp/dd.cfg labdd "$DD_IP" || return 1
  DD=$(xl domid labdd)
  t0=$(now)
  if [ "$be" = unetbackd ]; then
    dd_wait 60 'unetback-ctl list && pidof xl'
  else
    dd_wait 60 'lsmod | grep -q "^xen_netback" && pidof xl'
  fi
  rc=$?
  fig "$tag.dd_backend_ready_s" "$(since "$t0")"
  check "$tag.dd_backend_ready" $rc "$(in_dd "xenstore-read domid; cat /proc/xen/capabilities; ps | grep -E 'unetbackd|xl -vvv devd' | grep -v grep; lsmod | grep -E '^xen_netback'; true" | grep -v '^lab-cmd' | tr '\n' ' ' | tr -s ' ')"
  if [ "$be" = unetbackd ]; then
    # --backend-domid left out: the daemon took its own domid from xenstore.
    check "$tag.dd_own_domid" "$(dd_ok "grep -q 'serving .* as domain $DD,' /tmp/unetbackd.log && ! grep -q 'assuming dom0' /tmp/unetbackd.log" && echo 0 || echo 1)" \
      "labdd is d$DD; unetbackd's log: $(in_dd 'grep -m1 "serving " /tmp/unetbackd.log' | head -1 | cut -c1-200)"
  fi
  return $rc
}

# dd_client TAG: creates labc with its vif in labdd and checks it got there: Connected (both
# ends 4) under the driver domain's backend path, the hotplug script run there (the vif on br0,
# hotplug-status connected), ping from labc to labdd. Sets C (labc's domid). Status 0 when pingable.
dd_client() {
  local tag=$1 t0 rc bep fe st
  t0=$(now)
  xl_create_logged "$tag" /tmp/ddc.cfg || return 1
  C=$(xl domid labc)
  bep=/local/domain/$DD/backend/vif/$C/0
  fe=/local/domain/$C/device/vif/0
  wait_for 90 sh -c "[ \"\$(xenstore-read $fe/state)\" = 4 ] && [ \"\$(xenstore-read $bep/state)\" = 4 ]"
  rc=$?
  fig "$tag.connected_s" "$(since "$t0")"
  check "$tag.connected" $rc "frontend $fe state $(xenstore-read "$fe/state" 2>&1), backend $(xenstore-read "$fe/backend" 2>&1) (want $bep) state $(xenstore-read "$bep/state" 2>&1)"
  check "$tag.backend_in_dd" "$([ "$(xenstore-read "$fe/backend" 2>/dev/null)" = "$bep" ] && [ "$(xenstore-read "$fe/backend-id" 2>/dev/null)" = "$DD" ] && echo 0 || echo 1)" \
    "frontend's backend $(xenstore-read "$fe/backend" 2>&1), backend-id $(xenstore-read "$fe/backend-id" 2>&1); nothing under dom0's backend/vif/$C: $(xenstore-read "$BE/$C/0/state" >/dev/null 2>&1 && echo NO || echo yes)"
  st=$(xenstore-read "$bep/hotplug-status" 2>/dev/null)
  dd_ok "[ -e /sys/class/net/br0/brif/vif$C.0 ]"
  rc=$?
  check "$tag.hotplug_in_dd" "$([ $rc = 0 ] && [ "$st" = connected ] && echo 0 || echo 1)" \
    "script $(xenstore-read "$bep/script" 2>&1), hotplug-status ${st:-unset}; on labdd's br0: $(in_dd 'ls /sys/class/net/br0/brif' | grep -v '^lab-cmd' | tr '\n' ' ')"
  t0=$(now)
  dd_wait 60 "echo $DD_BR_IP | nc $DDC_IP 5396 | grep -q 'lab-ping: rc=0'"
  rc=$?
  fig "$tag.ping_ready_s" "$(since "$t0")"
  check "$tag.ping" $rc "labc ($DDC_IP) pings labdd's br0 ($DD_BR_IP): $(in_dd "echo $DD_BR_IP | nc $DDC_IP 5396" | grep -E 'round-trip|packets' | tr '\n' ' ')"
  if [ $rc != 0 ]; then
    xenstore-ls -f "$bep" 2>&1 | sed 's/^/XENLAB   be: /' | head -30
    in_dd 'tail -20 /tmp/xl-devd.log; tail -10 /tmp/unetbackd.log; ip -o link' | sed 's/^/XENLAB   dd: /'
    tail -20 /var/log/xen/console/guest-labc.log 2>/dev/null | sed 's/^/XENLAB   console: /'
  fi
  return $rc
}

# dd_iperf TAG: iperf3 in labdd against labc's server, both directions.
dd_iperf() {
  UNETBACKD_PID='' iperf_once "$1" guest_rx -- in_dd -t $((SECS + 40)) iperf3 -c "$DDC_IP" -f m -t "$SECS"
  UNETBACKD_PID='' iperf_once "$1" guest_tx -- in_dd -t $((SECS + 40)) iperf3 -c "$DDC_IP" -f m -t "$SECS" -R
}

# dd_client_gone TAG PORTS: after labc's xl destroy, nothing of it is left in labdd: the backend
# directory gone (or Closed), no vif/TAP, no event channel to it, no grant mapped by unetbackd.
dd_client_gone() {
  local tag=$1 ports=$2 bep=/local/domain/$DD/backend/vif/$C/0 left
  wait_for 15 sh -c "! xenstore-read $bep/state >/dev/null 2>&1 || [ \"\$(xenstore-read $bep/state)\" = 6 ]"
  check "$tag.backend_released" $? "$bep: $(xenstore-read "$bep/state" 2>/dev/null || echo removed)"
  dd_wait 10 "! ip link show vif$C.0"
  check "$tag.no_tap" $? "vif$C.0 in labdd: $(in_dd "ip -o link show vif$C.0 2>&1" | head -1 | cut -c1-80)"
  wait_for 10 sh -c "[ -z \"\$(lsevtchn $DD 2>/dev/null | grep -E 'Remote Domain $C([^0-9]|$)')\" ]"
  left=$(domain_evtchn_lines "$DD" "$C")
  check "$tag.no_bound_port" "$([ -z "$left" ] && echo 0 || echo 1)" "${left:-labdd (d$DD) has no event channel left to d$C} (labc's ports were: $ports)"
  if [ "$DD_BACKEND" = unetbackd ]; then
    # shellcheck disable=SC2016 # expanded in labdd
    dd_wait 10 '[ "$(grep -c gntdev /proc/$(pidof unetbackd)/maps)" = 0 ]'
    check "$tag.no_mapped_grant" $? "gntdev mappings in labdd's unetbackd: $(in_dd 'grep -c gntdev /proc/$(pidof unetbackd)/maps' | head -1)"
    dd_ok "! unetback-ctl list | grep -q '$C/0'"
    check "$tag.no_vif_in_daemon" $? "unetback-ctl list in labdd: $(in_dd 'unetback-ctl list' | head -3 | tr '\n' ' ')"
  fi
}

# The client's console answers: a command written to its console pty (xenconsoled's) runs in
# its shell, and the output is in the console log.
console_answers() { # NAME
  local d tty tok
  d=$(xl domid "$1" 2>/dev/null) || return 1
  tty=$(xenstore-read "/local/domain/$d/console/tty" 2>/dev/null)
  [ -n "$tty" ] && [ -c "$tty" ] || return 1
  tok=$RANDOM
  printf 'echo alive-$((40+2))-%s\r' "$tok" >"$tty"
  wait_for 15 grep -aq "alive-42-$tok" "/var/log/xen/console/guest-$1.log"
}

# dd_destroy_under_client TAG: xl destroy of labdd while labc runs: labc stays alive (xl list, its
# console), its vif loses its backend, and labc's xl destroy afterwards finishes in time.
dd_destroy_under_client() {
  local tag=$1 t0 rc fe=/local/domain/$C/device/vif/0 st fst
  t0=$(now)
  xl -vvv destroy labdd >"$OUT/xl-destroy-$tag.dd.log" 2>&1
  rc=$?
  fig "$tag.dd_destroy_s" "$(since "$t0")"
  check "$tag.dd_xl_destroy" $rc "xl destroy labdd (serving labc) rc=$rc"
  wait_for 15 sh -c "! xenstore-read /local/domain/$DD/backend/vif/$C/0/state"
  check "$tag.backend_gone" $? "labdd's backend directory for labc: $(xenstore-read "/local/domain/$DD/backend/vif/$C/0/state" 2>/dev/null || echo removed)"
  # What the frontend makes of its vanished backend (Linux netfront: see the report).
  wait_for 10 sh -c "[ \"\$(xenstore-read $fe/state 2>/dev/null)\" != 4 ]"
  fst=$(xenstore-read "$fe/state" 2>/dev/null || echo removed)
  fig "$tag.client_frontend_state" "$fst"
  sleep 2
  st=$(xl list labc 2>/dev/null | awk 'NR == 2 {print $5}')
  console_answers labc
  rc=$?
  check "$tag.client_alive" "$([ -n "$st" ] && ! echo "$st" | grep -q '[csd]' && [ $rc = 0 ] && echo 0 || echo 1)" \
    "labc after labdd's destroy: xl list state ${st:-gone}, console $([ $rc = 0 ] && echo answers || echo silent), vif frontend state $fst"
  t0=$(now)
  timeout 60 xl -vvv destroy labc >"$OUT/xl-destroy-$tag.client.log" 2>&1
  rc=$?
  fig "$tag.client_destroy_s" "$(since "$t0")"
  check "$tag.client_destroy" "$([ $rc = 0 ] && ! xl domid labc >/dev/null 2>&1 && echo 0 || echo 1)" \
    "xl destroy labc after its driver domain's: rc=$rc in $(since "$t0") s (limit 60 s), $(xl domid labc >/dev/null 2>&1 && echo 'labc still there' || echo 'labc gone')"
}

dd_round() { # BACKEND: unetbackd (every check) or kernel (the throughput baseline)
  local be=$1 tag=driverdomain.$1 ports t0
  DD_BACKEND=$be
  say "=== driver domain: $be in labdd"
  if ! dd_create "$be"; then
    in_dd 'tail -15 /tmp/xl-devd.log; tail -15 /tmp/unetbackd.log' | sed 's/^/XENLAB   dd: /'
    tail -30 /var/log/xen/console/guest-labdd.log 2>/dev/null | sed 's/^/XENLAB   console: /'
    xl destroy labdd >/dev/null 2>&1
    return
  fi
  if dd_client "$tag"; then
    dd_iperf "$tag"
    dd_grants "$tag" "$DD" "$C"
    [ "$be" = unetbackd ] && fig "$tag.mapped_grant_pages" \
      "$(in_dd 'unetback-ctl --json stats' | grep -o '"mapped_grant_pages": *[0-9]*' | grep -o '[0-9]*$' | head -1)"
  fi
  in_dd 'cat /tmp/xl-devd.log' >"$OUT/dd-xl-devd-$be.log" 2>&1
  if [ "$be" = unetbackd ]; then
    in_dd 'cat /tmp/unetbackd.log' >"$OUT/dd-unetbackd.log" 2>&1
    ports=$(fe_ports "/local/domain/$C/device/vif")
    t0=$(now)
    xl -vvv destroy labc >"$OUT/xl-destroy-$tag.log" 2>&1
    check "$tag.client.xl_destroy" $? "xl destroy labc rc=$?"
    fig "$tag.client.destroy_s" "$(since "$t0")"
    dd_client_gone "$tag.client" "$ports"
    # A client again, then the driver domain goes away under it.
    dd_client "$tag.again" && dd_destroy_under_client "$tag.again"
  fi
  xl destroy labc >/dev/null 2>&1
  xl destroy labdd >/dev/null 2>&1
  cp /var/log/xen/console/guest-labdd.log "$OUT/console-dd-$be.log" 2>/dev/null
  integrity "$tag"
}

dd_part() {
  mkcfg_ddc
  # labdd's own vif is served by dom0's unetbackd.service.
  lsmod | grep -q '^xen_netback' && wait_for 20 rmmod xen-netback
  [ "$(systemctl is-active "$UNIT")" = active ] || start_unetbackd || return
  [ -n "$UNETBACKD_PID" ] || UNETBACKD_PID=$(unit_prop MainPID)
  dd_round unetbackd
  full && dd_round kernel
}
