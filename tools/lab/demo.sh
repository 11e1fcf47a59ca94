#!/usr/bin/env bash
# The unetback demo (run by `tools/lab.sh demo`, which builds first): a xensim world, unetbackd
# in network namespace ub-dom0 with Linux bridge xenbr0 (10.99.0.1/24), and guests created by
# unetback-xl (libxl's role) whose netfront-shim TAPs live in namespaces ub-guest1/ub-guest2.
# iperf3 guest->host, host->guest and guest->guest, then unetback-ctl's figures. Everything
# is torn down on exit, failure or Ctrl-C. Needs root.
#
#   tools/lab/demo.sh BUILD_DIR [--time SECONDS] [--one-guest]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:?usage: demo.sh BUILD_DIR [--time S] [--one-guest]}" && pwd)
shift
SECS=5
GUESTS=2
while (($#)); do
  case $1 in
    --time) SECS=${2:?}; shift 2 ;;
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

# iperf3 -J output -> Gbit/s (the receiver's figure).
gbits() {
  python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))'
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

run_iperf() { # server-netns server-addr client-netns [extra client args]
  local sns=$1 saddr=$2 cns=$3
  shift 3
  ip netns exec "$sns" iperf3 -s -1 -B "$saddr" >"$WORLD/iperf-server.log" 2>&1 &
  IPERF_PID=$!
  sleep 0.3
  ip netns exec "$cns" iperf3 -c "$saddr" -t "$SECS" -J "$@" >"$WORLD/iperf.json" ||
    die "iperf3 $cns -> $saddr $* failed: $(tail -c 400 "$WORLD/iperf.json")"
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=
  gbits <"$WORLD/iperf.json"
}

say "iperf3 guest1 -> host (${SECS} s)"
G2H=$(run_iperf "$NS0" 10.99.0.1 ub-guest1)
say "iperf3 host -> guest1 (${SECS} s)"
H2G=$(run_iperf "$NS0" 10.99.0.1 ub-guest1 -R)
G2G=-
if ((GUESTS > 1)); then
  say "iperf3 guest1 -> guest2 through $BR (${SECS} s)"
  G2G=$(run_iperf ub-guest2 10.99.0.3 ub-guest1)
fi

"$CTL" --world "$WORLD" stats >"$WORLD/stats.txt" 2>&1 || true
"$CTL" --world "$WORLD" --json stats >"$WORLD/stats.json" 2>/dev/null || true
cat "$WORLD/stats.txt" >&2

# Ratios over every vif's queues from the daemon's counters: ring slots per packet in each
# direction and grant-copy segments per copy call (the batching the copy path achieves).
FIGS=$(python3 - "$WORLD/stats.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("stats|unavailable (%s)" % e); sys.exit(0)
t = {}
for vif in d.get("vifs", []):
    for q in vif.get("queues", []):
        for k, v in q.get("counters", {}).items():
            t[k] = t.get(k, 0) + v
def ratio(a, b):
    return "%.2f" % (t[a] / t[b]) if t.get(a) and t.get(b) else "-"
print("guest-TX slots/packet|%s  (%d packets)" % (ratio("tx_slots", "tx_packets"), t.get("tx_packets", 0)))
print("guest-RX slots/packet|%s  (%d packets)" % (ratio("rx_slots", "rx_packets"), t.get("rx_packets", 0)))
print("guest-TX copy segments/call|%s" % ratio("tx_copy_segments", "tx_copy_calls"))
print("guest-RX copy segments/call|%s" % ratio("rx_copy_segments", "rx_copy_calls"))
print("guest-TX zerocopy / copied|%d / %d" % (t.get("tx_zerocopy", 0), t.get("tx_copied", 0)))
print("guest-RX dropped (queue full)|%d" % t.get("rx_dropped_queue_full", 0))
PY
)

printf '\n%-34s %s\n' "unetback demo (xensim, ${SECS} s runs)" "result"
printf '%-34s %s\n' "guest1 -> host  (iperf3)" "$G2H Gbit/s"
printf '%-34s %s\n' "host -> guest1  (iperf3 -R)" "$H2G Gbit/s"
printf '%-34s %s\n' "guest1 -> guest2 via $BR" "$G2G Gbit/s"
printf '%-34s %s\n' "ping guest1 -> host (avg)" "${PING:-?} ms"
while IFS='|' read -r k v; do printf '%-34s %s\n' "$k" "$v"; done <<<"$FIGS"
echo
