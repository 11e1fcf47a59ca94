#!/usr/bin/env bash
# The unetback demo (run by `tools/lab.sh demo`, which builds first): a xensim world, unetbackd
# in network namespace ub-dom0 with Linux bridge xenbr0 (10.99.0.1/24), and guests created by
# unetback-xl (libxl's role) whose netfront-shim TAPs live in namespaces ub-guest1/ub-guest2.
# iperf3 guest->host, host->guest and guest->guest, then unetback-ctl's figures. Everything
# is torn down on exit, failure or Ctrl-C. Needs root.
#
#   tools/lab/demo.sh BUILD_DIR [--seconds N] [--json FILE] [--one-guest]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:?usage: demo.sh BUILD_DIR [--seconds N] [--json FILE] [--one-guest]}" && pwd)
shift
SECS=10
GUESTS=2
JSON_OUT=
while (($#)); do
  case $1 in
    --seconds | --time) SECS=${2:?}; shift 2 ;;
    --json) JSON_OUT=${2:?}; shift 2 ;;
    --one-guest) GUESTS=1; shift ;;
    *) echo "demo: unknown option $1" >&2; exit 2 ;;
  esac
done

XENSIM=$BUILD/tools/xensim/xensim
UNETBACKD=$BUILD/backend/daemon/unetbackd
XL=$BUILD/tools/xl/unetback-xl
CTL=$BUILD/tools/ctl/unetback-ctl
SHIM=$BUILD/frontend-shim/netfront-shim
SCRIPT=$ROOT/tools/hotplug/vif-unetback
NS0=ub-dom0
BR=xenbr0

say() { printf '[demo] %s\n' "$*" >&2; }
die() { printf '[demo] error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, TAPs, a bridge)"
for b in "$XENSIM" "$UNETBACKD" "$XL" "$CTL" "$SHIM"; do
  [[ -x $b ]] || die "$b is missing: build first (tools/lab.sh build)"
done
for t in iperf3 ip python3; do command -v "$t" >/dev/null || die "$t is missing (tools/lab.sh deps)"; done

WORLD=$(mktemp -d /tmp/unetback-demo.XXXXXX)
XENSIM_PID=
DAEMON_PID=
IPERF_PID=
CREATED=()
NETNS=()

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  say "tearing down"
  [[ -n $IPERF_PID ]] && kill "$IPERF_PID" 2>/dev/null && wait "$IPERF_PID" 2>/dev/null
  for g in "${CREATED[@]}"; do
    ip netns exec "$NS0" "$XL" --world "$WORLD" destroy "$g" || say "destroy $g failed"
  done
  # A guest whose destroy could not run (xensim already gone): its pid file names it.
  for pf in "$WORLD"/guest-*.pid; do
    [[ -f $pf ]] || continue
    local gpid
    gpid=$(<"$pf")
    if [[ $(tr '\0' ' ' <"/proc/$gpid/cmdline" 2>/dev/null) == *netfront-shim* ]]; then
      kill -TERM "$gpid" 2>/dev/null
    fi
  done
  if [[ -n $DAEMON_PID ]]; then
    kill -TERM "$DAEMON_PID" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$DAEMON_PID" 2>/dev/null
    wait "$DAEMON_PID" 2>/dev/null
  fi
  if [[ -n $XENSIM_PID ]]; then
    kill -TERM "$XENSIM_PID" 2>/dev/null
    wait "$XENSIM_PID" 2>/dev/null
  fi
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if ((rc != 0)); then
    say "failed (exit $rc); logs kept in $WORLD"
    for f in "$WORLD"/*.log; do
      [[ -f $f ]] && { echo "---- $f (tail)" >&2; tail -n 15 "$f" >&2; }
    done
  else
    rm -rf "$WORLD"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits up to $2 seconds for file $1 to contain $3.
wait_for_line() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    grep -q -- "$3" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

add_netns() {
  ip netns del "$1" 2>/dev/null || true
  ip netns add "$1"
  NETNS+=("$1")
  ip -n "$1" link set lo up
}

# iperf3 -J output -> "Gbit/s retransmits" (the receiver's rate, the sender's retransmits).
gbits() {
  python3 -c 'import json,sys; d=json.load(sys.stdin); e=d["end"]; print("%.2f %d" % (e["sum_received"]["bits_per_second"]/1e9, e["sum_sent"].get("retransmits", 0)))'
}

say "world $WORLD"
add_netns "$NS0"
"$XENSIM" --dir "$WORLD" >"$WORLD/xensim.log" 2>&1 &
XENSIM_PID=$!
wait_for_line "$WORLD/xensim.log" 10 "xensim ready" || die "xensim did not start"
say "xensim ready (pid $XENSIM_PID)"

ip -n "$NS0" link add "$BR" type bridge
ip -n "$NS0" addr add 10.99.0.1/24 dev "$BR"
ip -n "$NS0" link set "$BR" up

ip netns exec "$NS0" "$UNETBACKD" --hypervisor "sim:$WORLD" >"$WORLD/unetbackd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 50); do [[ -S $WORLD/unetbackd.sock ]] && break; sleep 0.1; done
[[ -S $WORLD/unetbackd.sock ]] || die "unetbackd did not start"
say "unetbackd running in $NS0 (pid $DAEMON_PID)"

create_guest() { # name netns address mac
  add_netns "$2"
  local t0=$SECONDS
  ip netns exec "$NS0" "$XL" --world "$WORLD" create "$1" \
    --vif "mac=$4,bridge=$BR,script=$SCRIPT" --guest-netns "$2" --address "$3" --shim "$SHIM" \
    >"$WORLD/xl-$1.out" || die "unetback-xl create $1 failed"
  CREATED+=("$1")
  say "$1 created: $(cat "$WORLD/xl-$1.out") in $((SECONDS - t0)) s"
}

create_guest guest1 ub-guest1 10.99.0.2/24 00:16:3e:00:00:01
if ((GUESTS > 1)); then create_guest guest2 ub-guest2 10.99.0.3/24 00:16:3e:00:00:02; fi
ip netns exec "$NS0" "$XL" --world "$WORLD" list >&2

ip netns exec ub-guest1 ping -c 3 -i 0.2 -W 2 10.99.0.1 >"$WORLD/ping.log" 2>&1 ||
  die "guest1 cannot ping the host (see $WORLD/ping.log)"
PING=$(sed -n 's/.*= [0-9.]*\/\([0-9.]*\)\/.*/\1/p' "$WORLD/ping.log")
say "guest1 -> host ping ok (avg ${PING} ms)"

run_iperf() { # name server-netns server-addr client-netns [extra client args]
  local name=$1 sns=$2 saddr=$3 cns=$4
  shift 4
  ip netns exec "$sns" iperf3 -s -1 -B "$saddr" >"$WORLD/iperf-server.log" 2>&1 &
  IPERF_PID=$!
  sleep 0.3
  ip netns exec "$cns" iperf3 -c "$saddr" -t "$SECS" -J "$@" >"$WORLD/iperf-$name.json" ||
    die "iperf3 $cns -> $saddr $* failed: $(tail -c 400 "$WORLD/iperf-$name.json")"
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=
  gbits <"$WORLD/iperf-$name.json"
}

say "iperf3 guest1 -> host (${SECS} s)"
OUT=$(run_iperf guest-to-host "$NS0" 10.99.0.1 ub-guest1)
read -r G2H G2H_RETR <<<"$OUT"
say "iperf3 host -> guest1 (${SECS} s)"
OUT=$(run_iperf host-to-guest "$NS0" 10.99.0.1 ub-guest1 -R)
read -r H2G H2G_RETR <<<"$OUT"
G2G=- G2G_RETR=-
if ((GUESTS > 1)); then
  say "iperf3 guest1 -> guest2 through $BR (${SECS} s)"
  OUT=$(run_iperf guest-to-guest ub-guest2 10.99.0.3 ub-guest1)
  read -r G2G G2G_RETR <<<"$OUT"
fi

"$CTL" --world "$WORLD" stats >"$WORLD/stats.txt" 2>&1 || true
"$CTL" --world "$WORLD" --json stats >"$WORLD/stats.json" 2>/dev/null || true
cat "$WORLD/stats.txt" >&2

# Ratios over every vif's queues from the daemon's counters: ring slots per packet in each
# direction and grant-copy segments per copy call (the batching the copy path achieves).
FIGS=$(python3 - "$WORLD" "$JSON_OUT" <<'PY'
import json, os, sys
world, json_out = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(os.path.join(world, "stats.json")))
except Exception as e:
    print("stats|unavailable (%s)" % e); sys.exit(0)
t = {}
for vif in d.get("vifs", []):
    for q in vif.get("queues", []):
        for k, v in q.get("counters", {}).items():
            t[k] = t.get(k, 0) + v
def ratio(a, b):
    return t[a] / t[b] if t.get(a) and t.get(b) else None
def fmt(x):
    return "-" if x is None else "%.2f" % x
print("guest-TX slots/packet|%s  (%d packets)" % (fmt(ratio("tx_slots", "tx_packets")), t.get("tx_packets", 0)))
print("guest-RX slots/packet (minimum)|%s  (%s)  (%d packets)" % (fmt(ratio("rx_slots", "rx_packets")), fmt(ratio("rx_min_slots", "rx_packets")), t.get("rx_packets", 0)))
print("guest-TX copy segments/call|%s" % fmt(ratio("tx_copy_segments", "tx_copy_calls")))
print("guest-RX copy segments/call|%s" % fmt(ratio("rx_copy_segments", "rx_copy_calls")))
print("guest-TX zerocopy / copied|%d / %d" % (t.get("tx_zerocopy", 0), t.get("tx_copied", 0)))
print("guest-RX dropped (queue full)|%d" % t.get("rx_dropped_queue_full", 0))
if json_out:
    runs = []
    for name in ("guest-to-host", "host-to-guest", "guest-to-guest"):
        path = os.path.join(world, "iperf-%s.json" % name)
        if not os.path.exists(path):
            continue
        e = json.load(open(path))["end"]
        runs.append({"name": name, "gbit_s": e["sum_received"]["bits_per_second"] / 1e9,
                     "retransmits": e["sum_sent"].get("retransmits", 0)})
    segs = t.get("tx_copy_segments", 0) + t.get("rx_copy_segments", 0)
    calls = t.get("tx_copy_calls", 0) + t.get("rx_copy_calls", 0)
    out = {"runs": runs,
           "rx_slots_per_packet": ratio("rx_slots", "rx_packets"),
           "rx_min_slots_per_packet": ratio("rx_min_slots", "rx_packets"),
           "tx_slots_per_packet": ratio("tx_slots", "tx_packets"),
           "copy_segments_per_call": segs / calls if calls else None,
           "rx_copy_segments_per_call": ratio("rx_copy_segments", "rx_copy_calls"),
           "tx_copy_segments_per_call": ratio("tx_copy_segments", "tx_copy_calls"),
           "zerocopy_packets": t.get("tx_zerocopy", 0), "copied_packets": t.get("tx_copied", 0),
           "rx_dropped_queue_full": t.get("rx_dropped_queue_full", 0),
           "counters": t}
    with open(json_out, "w") as f:
        json.dump(out, f, indent=2)
PY
)

printf '\n%-34s %s\n' "unetback demo (xensim, ${SECS} s runs)" "result"
printf '%-34s %s\n' "guest1 -> host  (iperf3)" "$G2H Gbit/s, $G2H_RETR retransmits"
printf '%-34s %s\n' "host -> guest1  (iperf3 -R)" "$H2G Gbit/s, $H2G_RETR retransmits"
printf '%-34s %s\n' "guest1 -> guest2 via $BR" "$G2G Gbit/s, $G2G_RETR retransmits"
printf '%-34s %s\n' "ping guest1 -> host (avg)" "${PING:-?} ms"
while IFS='|' read -r k v; do printf '%-34s %s\n' "$k" "$v"; done <<<"$FIGS"
echo
