# shellcheck shell=bash
# Guests: xl create and destroy with their checks, what a vif leaves behind, and the probes
# run across a step (a save/restore, a migration, a daemon restart).
#   xl_create_logged TAG CFG        xl create, timed and checked, its log in out/
#   xl_create TAG CFG NAME IP       the same, then waits for IP to answer ping
#   destroy_checked TAG NAME [MAPS_LEFT]  xl destroy (DESTROY_WITH) and the checks after it:
#                                   backend state 6, then check_vif_gone
#   check_vif_gone TAG DOMID TAP FE_PORTS [MAPS_LEFT]  no TAP, mapped grant or bound port left
#   fe_ports DIR, evtchn_lines REMOTE, domain_evtchn_lines DOMAIN REMOTE, gntdev_maps,
#   no_gntdev_maps                  what a vif holds (event channels, gntdev mappings)
#   vif_connected DOMID             frontend and backend of vif 0 both Connected (4)
#   outage_start TAG IP, outage_stop TAG [FIGURE]  a 50 ms pinger: TAG.outage_ms
#   stream_start TAG IP, stream_stop TAG [FIGURE]  an iperf3 stream across: TAG.stall_ms
# Uses from lib/common.sh: check, fig, wait_for, now, since, mono_us. Globals read: BE, OUT,
# UNETBACKD_PID, READY_US, READY_CHECK_PENDING; set: DESTROY_WITH and DESTROY_LOG (the libvirt
# part sets them around its virsh destroy), MAPS_LEFT, OUTAGE_PID, OUTAGE_LOG, RESUMED_AT (the
# lifecycle steps set it before outage_stop), STREAM_PID, STREAM_LOG, READY_CHECK_PENDING.

# xl_create_logged TAG CFG: xl create, timed and checked, its log in out/. Status: xl's.
xl_create_logged() {
  local t0 rc
  t0=$(now)
  xl -vvv create "$2" >"$OUT/xl-create-$1.log" 2>&1
  rc=$?
  fig "$1.create_s" "$(since "$t0")"
  check "$1.xl_create" $rc "xl create rc=$rc"
  [ $rc = 0 ] && return 0
  grep -E "error|ERROR|unable|timed out|hotplug" "$OUT/xl-create-$1.log" | tail -8 | sed 's/^/XENLAB   xl: /'
  xl dmesg 2>&1 | tail -8 | sed 's/^/XENLAB   xen: /' # the hypervisor's side of a refusal
  return 1
}

# xl_create TAG CFG NAME IP: creates, times it, waits for ping. Status 0 when pingable.
xl_create() {
  local tag=$1 cfg=$2 name=$3 ip=$4 t0 rc
  if [ "$READY_CHECK_PENDING" = 1 ] && [ -n "$UNETBACKD_PID" ]; then
    # The first xl create served by unetbackd.service: its READY=1 came before it.
    local c_us
    c_us=$(mono_us)
    check systemd.ready_before_xl_create "$([ "${READY_US:-0}" -gt 0 ] && [ "$READY_US" -lt "$c_us" ] && echo 0 || echo 1)" \
      "READY=1 at monotonic ${READY_US:-0} us, xl create at $c_us us"
    fig systemd.ready_to_xl_create_s "$(awk -v a="${READY_US:-0}" -v b="$c_us" 'BEGIN{printf "%.3f", (b - a) / 1e6}')"
    READY_CHECK_PENDING=2
  fi
  xl_create_logged "$tag" "$cfg" || return 1
  t0=$(now)
  wait_for 90 ping -c1 -W1 "$ip"
  rc=$?
  fig "$tag.ping_ready_s" "$(since "$t0")"
  check "$tag.ping" $rc "$ip answers ping"
  if [ $rc != 0 ]; then
    local d
    d=$(xl domid "$name")
    xenstore-ls -f "$BE/$d" 2>&1 | sed 's/^/XENLAB   be: /' | head -40
    xenstore-ls -f "/local/domain/$d/device/vif" 2>&1 | sed 's/^/XENLAB   fe: /' | head -40
    tail -20 "/var/log/xen/console/guest-$name.log" 2>/dev/null | sed 's/^/XENLAB   console: /'
  fi
  return $rc
}

# domain_evtchn_lines DOMAIN REMOTE: the event channels DOMAIN holds to domain REMOTE
# (lsevtchn: "Remote Domain N"; dom0's lsevtchn sees every domain's, a driver domain's too);
# evtchn_lines REMOTE: dom0's.
domain_evtchn_lines() { lsevtchn "$1" 2>/dev/null | grep -E "Remote Domain $2([^0-9]|$)"; }
evtchn_lines() { domain_evtchn_lines 0 "$1"; }
gntdev_maps() { # gntdev mappings (mapped grants) in unetbackd's address space
  local n=0
  [ -n "$UNETBACKD_PID" ] && n=$(grep -c gntdev "/proc/$UNETBACKD_PID/maps")
  echo "${n:-0}"
}
# MAPS_LEFT: the mappings other vifs still hold (the domU -> domU scenario's first domU).
MAPS_LEFT=0
no_gntdev_maps() { [ "$(gntdev_maps)" -le "$MAPS_LEFT" ]; }

# After a vif of domain $2 went away (detach or destroy): no TAP, no mapped grant, no event
# channel of ours left to it. Frontend ports are passed in $4 (the ones the vif had bound); $5:
# how many gntdev mappings other, still connected vifs hold (default 0).
check_vif_gone() { # TAG DOMID TAP FE_PORTS [MAPS_LEFT]
  local tag=$1 d=$2 tap=$3 ports=$4 p left
  MAPS_LEFT=${5:-0}
  ip link show "$tap" >/dev/null 2>&1
  check "$tag.no_tap" "$([ $? != 0 ] && echo 0 || echo 1)" "$tap gone"
  wait_for 10 no_gntdev_maps
  check "$tag.no_mapped_grant" $? "gntdev mappings in unetbackd: $(gntdev_maps) (other vifs hold $MAPS_LEFT)"
  MAPS_LEFT=0
  # Ours would show as "Waiting connection" (the frontend closed its end) or still
  # "Connected" to one of the vif's frontend ports.
  left=
  for i in $(seq 1 20); do
    left=$(evtchn_lines "$d" | grep -E "Waiting")
    for p in $ports; do left+=$(evtchn_lines "$d" | grep -E "Connected.*Port $p\$"); done
    [ -z "$left" ] && break
    sleep 0.5
  done
  check "$tag.no_bound_port" "$([ -z "$left" ] && echo 0 || echo 1)" "${left:-no event channel left to dom$d}"
}

fe_ports() { # all event-channel* values under a frontend vif dir
  xenstore-ls -f "$1" 2>/dev/null | awk -F' = ' '/event-channel/{gsub(/"/,"",$2); print $2}' | tr '\n' ' '
}

# xl destroy + the checks of the issue: backend reached 6 (libxl saw it, no timeout), no TAP,
# no mapped grant, no bound port.
# DESTROY_WITH: the command that destroys the domain (virsh's for the libvirt domain); its log
# (and libvirt's libxl log, DESTROY_LOG) is searched for libxl's "wanted state 6 ok".
DESTROY_WITH="xl -vvv destroy" DESTROY_LOG=
destroy_checked() { # TAG NAME [MAPS_LEFT]
  local tag=$1 name=$2 d ports t0 rc
  d=$(xl domid "$name")
  ports=$(fe_ports "/local/domain/$d/device/vif")
  # Record every backend state written during the teardown (libxl deletes the directory as
  # soon as it has seen 6).
  (
    # shellcheck disable=SC2034 # i: counts the reads only
    for i in $(seq 1 400); do
      s=$(xenstore-read "$BE/$d/0/state" 2>/dev/null) || break
      echo "$s"
      sleep 0.05
    done | uniq | tr '\n' ' ' >"/tmp/states-$tag"
  ) &
  local watcher=$!
  t0=$(now)
  local lines0=0
  [ -n "$DESTROY_LOG" ] && lines0=$(wc -l <"$DESTROY_LOG" 2>/dev/null || echo 0)
  $DESTROY_WITH "$name" >"$OUT/xl-destroy-$tag.log" 2>&1
  rc=$?
  fig "$tag.destroy_s" "$(since "$t0")"
  wait $watcher
  [ -n "$DESTROY_LOG" ] && tail -n +$((lines0 + 1)) "$DESTROY_LOG" >>"$OUT/xl-destroy-$tag.log" 2>/dev/null
  local tool=${DESTROY_WITH#timeout [0-9]* } # xl, or virsh (under its time limit)
  check "$tag.xl_destroy" $rc "${tool%% *} destroy rc=$rc"
  local seen6=1
  grep -q "wanted state 6 ok" "$OUT/xl-destroy-$tag.log" && seen6=0
  grep -qw 6 "/tmp/states-$tag" && seen6=0
  check "$tag.backend_state6" $seen6 "states seen: $(cat "/tmp/states-$tag"); libxl: $(grep -o 'wanted state 6 [a-z ]*[0-9]*' "$OUT/xl-destroy-$tag.log" | tail -1)"
  check_vif_gone "$tag" "$d" "vif$d.0" "$ports" "${3:-0}"
}

# The outage of a step is measured by a ping every 50 ms from dom0 (ping -D: a timestamp per
# reply): the longest gap between two replies, from the last one before to the first one after.
OUTAGE_PID= OUTAGE_LOG=
outage_start() { # TAG IP
  OUTAGE_LOG=$OUT/ping-$1.log
  ping -D -n -i 0.05 -W 1 "$2" >"$OUTAGE_LOG" 2>&1 &
  OUTAGE_PID=$!
  wait_for 10 grep -q 'bytes from' "$OUTAGE_LOG"
}
# outage_stop TAG: stops the pinger, records TAG.outage_ms and checks that it saw replies on
# both sides of the step. RESUMED_AT (date +%s.%N, the clock of ping -D) is when xl had
# finished (the domain runs again): TAG.first_ping_after_ms is the part of the outage after it,
# the time the guest's vif took to be served again.
RESUMED_AT=
outage_stop() { # TAG [FIGURE: default outage_ms]
  local tag=$1 what=${2:-outage_ms} ms first
  sleep 1 # replies after the first one that answered again
  kill -INT "$OUTAGE_PID" 2>/dev/null
  wait "$OUTAGE_PID" 2>/dev/null
  ms=$(awk -F'[][]' '/bytes from/ {t = $2 + 0; if (n++) { g = t - p; if (g > m) m = g }; p = t}
    END {if (n >= 2) printf "%d", m * 1000}' "$OUTAGE_LOG")
  if [ -n "$RESUMED_AT" ]; then
    first=$(awk -F'[][]' -v r="$RESUMED_AT" '/bytes from/ && $2 + 0 >= r {printf "%d", ($2 - r) * 1000; exit}' "$OUTAGE_LOG")
    [ -n "$first" ] && fig "$tag.first_ping_after_ms" "$first"
    RESUMED_AT=
  fi
  if [ -n "$ms" ]; then
    fig "$tag.$what" "$ms"
    check "$tag.outage_measured" 0 "longest gap between ping replies $ms ms ($(grep -c 'bytes from' "$OUTAGE_LOG") replies at 50 ms)"
  else
    check "$tag.outage_measured" 1 "fewer than 2 ping replies: $(tail -2 "$OUTAGE_LOG" | tr '\n' ' ')"
  fi
}
# vif_connected DOMID: the domain's vif 0, frontend and backend both Connected (4), where its
# backend is dom0.
vif_connected() {
  [ "$(xenstore-read "/local/domain/$1/device/vif/0/state" 2>/dev/null)" = 4 ] &&
    [ "$(xenstore-read "$BE/$1/0/state" 2>/dev/null)" = 4 ]
}
# STREAM=1: an iperf3 TCP stream (domU -> dom0: dom0's client reports what it received per
# 100 ms) runs across the step: stream_start before it, stream_stop TAG after it. The same
# connection must carry data again afterwards (no reset: iperf3 neither fails nor ends), and
# TAG.stall_ms is the longest run of 100 ms intervals without a byte.
STREAM_PID= STREAM_LOG=
stream_start() { # TAG IP
  STREAM_LOG=$OUT/iperf3-$1.stream.log
  timeout 300 iperf3 -c "$2" -R -f m -t 240 -i 0.1 >"$STREAM_LOG" 2>&1 &
  STREAM_PID=$!
  wait_for 20 sh -c "grep -c 'Mbits/sec' '$STREAM_LOG' | awk '{exit !(\$1 >= 10)}'"
}
stream_stop() { # TAG [FIGURE: default stall_ms]
  local tag=$1 what=${2:-stall_ms} st stall after rates
  sleep 3 # the stream after the step
  kill -0 "$STREAM_PID" 2>/dev/null
  st=$? # 0: iperf3 still running: the connection survived
  kill -INT "$STREAM_PID" 2>/dev/null
  wait "$STREAM_PID" 2>/dev/null
  # Interval lines: "[  5]  12.30-12.40  sec  1.25 MBytes   105 Mbits/sec"
  rates=$(awk '/ sec .*bits\/sec/ && !/sender|receiver/ {
      for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec$/) r = $(i - 1) + 0
      print r }' "$STREAM_LOG")
  stall=$(echo "$rates" | awk '{ if ($1 == 0) { z++; if (z > m) m = z } else z = 0; n++ } END {if (n) printf "%d", m * 100}')
  after=$(echo "$rates" | tail -20 | awk '$1 > 0 {n++} END {print n + 0}')
  grep -qiE 'reset|error|unable' "$STREAM_LOG" && st=1
  check "$tag.stream_survived" "$([ $st = 0 ] && [ "$after" -ge 5 ] && echo 0 || echo 1)" \
    "iperf3 $([ $st = 0 ] && echo "still running" || echo "ended or failed") after the step, $after of its last 20 intervals (100 ms) carried data; $(grep -iE 'reset|error|unable' "$STREAM_LOG" | head -1)"
  [ -n "$stall" ] && fig "$tag.$what" "$stall"
}
