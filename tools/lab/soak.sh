#!/usr/bin/env bash
# Soak test (run by `tools/lab.sh soak`, which builds first): a xensim world with unetbackd in
# network namespace ubs-dom0 (bridge ubsbr0, 10.98.0.1/24) and three guests running iperf3
# for the whole run — guest1 -> host, host -> guest2 (-R), guest3 both ways (--bidir) —
# while a fourth guest is created and destroyed (unetback-xl create/destroy) over and over.
#
# It samples unetbackd every interval: RSS, open fds (/proc/PID/fd), the grant pages it has
# mapped as it counts them (`unetback-ctl stats`: mapped_grant_pages) and the guests'
# whole-memory views it holds (/proc/PID/maps: xensim's "-memory" memfds). The baseline is
# taken once the three guests are up, idle, before the traffic and the churn; the final sample
# after the churn stopped and the traffic ended. Fails if the fds or the mapped grant pages did
# not return to the
# baseline, if RSS grew by more than the bound, if any iperf3 interval carried no traffic,
# or if a create/destroy failed. Needs root. Namespaces are prefixed ubs-; it kills only the
# processes it started.
#
#   tools/lab/soak.sh BUILD_DIR [--minutes N] [--interval S] [--rss-bound-mb M] [--churn-pause S]
#
# --minutes N        traffic + churn duration (default 1; fractions such as 0.5 work)
# --interval S       report interval in seconds (default 10)
# --rss-bound-mb M   allowed RSS growth from the baseline to the end (default 48)
# --churn-pause S    seconds the 4th guest stays up, and down, in each cycle (default 1)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:?usage: soak.sh BUILD_DIR [--minutes N] [--interval S] [--rss-bound-mb M]}" && pwd)
shift
MINUTES=1
INTERVAL=10
RSS_BOUND_MB=48
CHURN_PAUSE=1
while (($#)); do
  case $1 in
    --minutes) MINUTES=${2:?}; shift 2 ;;
    --interval) INTERVAL=${2:?}; shift 2 ;;
    --rss-bound-mb) RSS_BOUND_MB=${2:?}; shift 2 ;;
    --churn-pause) CHURN_PAUSE=${2:?}; shift 2 ;;
    *) echo "soak: unknown option $1" >&2; exit 2 ;;
  esac
done
DURATION=$(python3 -c "import sys; print(max(10, int(round(float(sys.argv[1]) * 60))))" "$MINUTES")

XENSIM=$BUILD/tools/xensim/xensim
UNETBACKD=$BUILD/backend/daemon/unetbackd
XL=$BUILD/tools/xl/unetback-xl
CTL=$BUILD/tools/ctl/unetback-ctl
SHIM=$BUILD/frontend-shim/netfront-shim
SCRIPT=$ROOT/tools/hotplug/vif-unetback
NS0=ubs-dom0
BR=ubsbr0
HOST=10.98.0.1

say() { printf '[soak] %s\n' "$*" >&2; }
die() { printf '[soak] error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, TAPs, a bridge)"
for b in "$XENSIM" "$UNETBACKD" "$XL" "$CTL" "$SHIM"; do
  [[ -x $b ]] || die "$b is missing: build first (tools/lab.sh build)"
done
for t in iperf3 ip python3; do command -v "$t" >/dev/null || die "$t is missing (tools/lab.sh deps)"; done

WORLD=$(mktemp -d /tmp/unetback-soak.XXXXXX)
XENSIM_PID=
DAEMON_PID=
CHURN_PID=
PIDS=()     # iperf3 servers and clients
CLIENT_PIDS=()
CREATED=()  # guests to destroy at the end
NETNS=()

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  say "tearing down"
  [[ -n $CHURN_PID ]] && kill "$CHURN_PID" 2>/dev/null && wait "$CHURN_PID" 2>/dev/null
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  for g in "${CREATED[@]}" churn; do
    ip netns exec "$NS0" "$XL" --world "$WORLD" destroy "$g" >/dev/null 2>&1
  done
  # A guest whose destroy could not run (xensim already gone): its pid file names it.
  for pf in "$WORLD"/guest-*.pid; do
    [[ -f $pf ]] || continue
    local gpid
    gpid=$(<"$pf")
    if [[ $(tr '\0' ' ' <"/proc/$gpid/cmdline" 2>/dev/null) == *netfront-shim*"$WORLD"* ]]; then
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
    for f in "$WORLD"/unetbackd.log "$WORLD"/churn.log "$WORLD"/xensim.log; do
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

wait_for_line() { # file seconds pattern
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

# "rss_kib fds grant_pages view_pages" of unetbackd: RSS and fds from /proc; grant pages mapped
# (rings, in-flight zerocopy TX) as the daemon counts them (`stats`: mapped_grant_pages; xensim
# hands out mapped grants inside its whole-memory views, so /proc/PID/maps cannot show them);
# view pages = the whole-memory views of the guests (xensim's "xensim-dom<N>-memory" memfds).
sample() {
  "$CTL" --world "$WORLD" --json stats >"$WORLD/sample.json" 2>/dev/null || echo '{}' >"$WORLD/sample.json"
  python3 - "$DAEMON_PID" "$WORLD/sample.json" <<'PY'
import json, os, re, sys
pid = sys.argv[1]
rss = next(int(l.split()[1]) for l in open("/proc/%s/status" % pid) if l.startswith("VmRSS:"))
fds = len(os.listdir("/proc/%s/fd" % pid))
try:
    grants = int(json.load(open(sys.argv[2])).get("mapped_grant_pages", -1))
except Exception:
    grants = -1
views = 0
for line in open("/proc/%s/maps" % pid):
    if re.search(r"memfd:xensim-dom\d+-memory", line):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        views += (hi - lo) // 4096
print(rss, fds, grants, views)
PY
}

vif_count() {
  "$CTL" --world "$WORLD" --json stats 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("vifs", [])))' 2>/dev/null || echo "?"
}

create_guest() { # name netns address mac
  ip netns exec "$NS0" "$XL" --world "$WORLD" create "$1" \
    --vif "mac=$4,bridge=$BR,script=$SCRIPT" --guest-netns "$2" --address "$3" --shim "$SHIM" \
    >"$WORLD/xl-$1.out" 2>"$WORLD/xl-$1.err"
}

say "world $WORLD; ${DURATION} s of traffic and churn"
add_netns "$NS0"
"$XENSIM" --dir "$WORLD" >"$WORLD/xensim.log" 2>&1 &
XENSIM_PID=$!
wait_for_line "$WORLD/xensim.log" 10 "xensim ready" || die "xensim did not start"
ip -n "$NS0" link add "$BR" type bridge
ip -n "$NS0" addr add "$HOST/24" dev "$BR"
ip -n "$NS0" link set "$BR" up
ip netns exec "$NS0" "$UNETBACKD" --hypervisor "sim:$WORLD" >"$WORLD/unetbackd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 50); do [[ -S $WORLD/unetbackd.sock ]] && break; sleep 0.1; done
[[ -S $WORLD/unetbackd.sock ]] || die "unetbackd did not start"
say "unetbackd pid $DAEMON_PID; before any guest: $(sample)"

for i in 1 2 3; do
  add_netns "ubs-g$i"
  create_guest "guest$i" "ubs-g$i" "10.98.0.1$i/24" "00:16:3e:00:98:0$i" ||
    die "create guest$i failed: $(cat "$WORLD/xl-guest$i.err")"
  CREATED+=("guest$i")
  ip netns exec "ubs-g$i" ping -c 2 -i 0.2 -W 2 "$HOST" >/dev/null || die "guest$i cannot ping the host"
done
add_netns ubs-g4
say "3 guests up, vifs: $(vif_count)"
sleep 1
read -r B_RSS B_FDS B_PAGES B_VIEWS <<<"$(sample)"
[[ ${B_VIEWS:-} =~ ^[0-9]+$ ]] || die "cannot sample unetbackd's /proc entries"
say "baseline (3 guests, idle): RSS ${B_RSS} KiB, ${B_FDS} fds, ${B_PAGES} grant pages mapped, ${B_VIEWS} view pages"

# Traffic: one iperf3 server per guest in dom0 (ports 5201..5203), clients in the guests.
MODES=("" "-R" "--bidir")
for i in 1 2 3; do
  ip netns exec "$NS0" iperf3 -s -1 -B "$HOST" -p "520$i" >"$WORLD/iperf-server-$i.log" 2>&1 &
  PIDS+=($!)
done
sleep 0.5
for i in 1 2 3; do
  # shellcheck disable=SC2086  # the mode is one option or none
  ip netns exec "ubs-g$i" iperf3 -c "$HOST" -p "520$i" -t "$DURATION" -i "$INTERVAL" -J \
    ${MODES[$((i - 1))]} >"$WORLD/iperf-$i.json" 2>"$WORLD/iperf-$i.err" &
  PIDS+=($!)
  CLIENT_PIDS[i]=$!
done

# The churn: a 4th guest created and destroyed until the traffic ends.
churn() {
  local n=0 fail=0 end=$((SECONDS + DURATION - 5))
  while ((SECONDS < end)); do
    if create_guest churn ubs-g4 10.98.0.50/24 00:16:3e:00:98:50; then
      ip netns exec ubs-g4 ping -c 1 -W 2 "$HOST" >/dev/null 2>&1 || { echo "cycle $n: no ping"; fail=$((fail + 1)); }
      sleep "$CHURN_PAUSE"
      ip netns exec "$NS0" "$XL" --world "$WORLD" destroy churn >/dev/null 2>&1 ||
        { echo "cycle $n: destroy failed"; fail=$((fail + 1)); }
    else
      echo "cycle $n: create failed: $(tr '\n' ' ' <"$WORLD/xl-churn.err")"
      fail=$((fail + 1))
    fi
    n=$((n + 1))
    sleep "$CHURN_PAUSE"
  done
  echo "cycles $n failures $fail"
}
churn >"$WORLD/churn.log" 2>&1 &
CHURN_PID=$!

printf '%6s %10s %6s %11s %11s %6s\n' "t (s)" "RSS KiB" "fds" "grant pages" "view pages" "vifs" >&2
T0=$SECONDS
NEXT=$((T0 + INTERVAL))
while kill -0 "$CHURN_PID" 2>/dev/null; do
  # Sample on a fixed grid (sampling itself takes a moment under load).
  while ((SECONDS < NEXT)) && kill -0 "$CHURN_PID" 2>/dev/null; do sleep 0.5; done
  NEXT=$((NEXT + INTERVAL))
  kill -0 "$DAEMON_PID" 2>/dev/null || die "unetbackd died"
  read -r rss fds pages views <<<"$(sample)"
  printf '%6d %10d %6d %11d %11d %6s\n' $((SECONDS - T0)) "$rss" "$fds" "$pages" "$views" "$(vif_count)" >&2
done
wait "$CHURN_PID" || true
CHURN_PID=
CHURN=$(tail -n 1 "$WORLD/churn.log")
say "churn done: $CHURN"
grep -v '^cycles' "$WORLD/churn.log" | head -5 >&2 || true

rc=0
for i in 1 2 3; do
  wait "${CLIENT_PIDS[i]}" || { say "iperf3 client $i failed: $(tail -c 300 "$WORLD/iperf-$i.err")"; rc=1; }
done
sleep 2 # the servers exit after their one test; the daemon settles
read -r E_RSS E_FDS E_PAGES E_VIEWS <<<"$(sample)"
[[ ${E_VIEWS:-} =~ ^[0-9]+$ ]] || die "cannot sample unetbackd's /proc entries at the end"
VIFS=$(vif_count)

# Throughput per interval (Gbit/s, receiver side per stream direction) and the verdict.
python3 - "$WORLD" "$INTERVAL" <<'PY' || rc=1
import json, os, sys
world, interval = sys.argv[1], float(sys.argv[2])
names = {1: "g1->host", 2: "host->g2", 3: "g3 bidir"}
series, ok = {}, True
for i, name in names.items():
    try:
        d = json.load(open(os.path.join(world, "iperf-%d.json" % i)))
    except Exception as e:
        print("[soak] %s: no iperf3 result (%s)" % (name, e), file=sys.stderr); ok = False; continue
    if "error" in d:
        print("[soak] %s: iperf3 error: %s" % (name, d["error"]), file=sys.stderr); ok = False
    rows = []
    for iv in d.get("intervals", []):
        s = iv["sum"]
        bidir = iv.get("sum_bidir_reverse")
        rate = s["bits_per_second"] + (bidir["bits_per_second"] if bidir else 0)
        rows.append((s["end"], rate / 1e9))
    series[name] = rows
    # A short last interval (< 1 s) is iperf3's tail, not a stall.
    stalled = [t for t, g in rows if g == 0.0]
    if not rows or stalled:
        print("[soak] %s: traffic stopped (intervals ending at %s)" % (name, stalled), file=sys.stderr)
        ok = False
hdr = "%8s" % "t (s)" + "".join("%12s" % n for n in series)
print(hdr)
n = max((len(r) for r in series.values()), default=0)
for k in range(n):
    t = next((r[k][0] for r in series.values() if k < len(r)), 0)
    print("%8.0f" % t + "".join("%12s" % ("%.2f" % r[k][1] if k < len(r) else "-") for r in series.values()))
for name, rows in series.items():
    if rows:
        print("%-10s mean %.2f Gbit/s, min %.2f" % (name, sum(g for _, g in rows) / len(rows), min(g for _, g in rows)))
sys.exit(0 if ok else 1)
PY

printf '\n%-28s %12s %12s\n' "unetbackd" "baseline" "end" 
printf '%-28s %12s %12s\n' "RSS (KiB)" "$B_RSS" "$E_RSS"
printf '%-28s %12s %12s\n' "open fds" "$B_FDS" "$E_FDS"
printf '%-28s %12s %12s\n' "grant pages mapped" "$B_PAGES" "$E_PAGES"
printf '%-28s %12s %12s\n' "guest memory view pages" "$B_VIEWS" "$E_VIEWS"
printf '%-28s %12s\n' "vifs at the end" "$VIFS"
printf '%-28s %s\n' "churn" "$CHURN"

[[ $E_FDS -eq $B_FDS ]] || { say "fds did not return to the baseline ($B_FDS -> $E_FDS)"; rc=1; }
[[ $E_PAGES -eq $B_PAGES ]] || { say "mapped grant pages did not return to the baseline ($B_PAGES -> $E_PAGES)"; rc=1; }
[[ $E_VIEWS -eq $B_VIEWS ]] || { say "guest memory views did not return to the baseline ($B_VIEWS -> $E_VIEWS)"; rc=1; }
((E_RSS - B_RSS <= RSS_BOUND_MB * 1024)) || { say "RSS grew by $(((E_RSS - B_RSS) / 1024)) MiB (bound ${RSS_BOUND_MB} MiB)"; rc=1; }
[[ $VIFS == 3 ]] || { say "expected 3 vifs at the end, found $VIFS"; rc=1; }
[[ $CHURN =~ cycles\ ([0-9]+)\ failures\ 0$ ]] && ((BASH_REMATCH[1] > 0)) ||
  { say "churn had failures or no cycles: $CHURN"; rc=1; }
((rc == 0)) && say "soak passed (${DURATION} s)"
exit $rc
