#!/usr/bin/env bash
# The unetback benchmark (issue 6), run by `tools/lab.sh bench` after it has built the tree:
# three paths between two network namespaces, measured side by side in one run, in
# alternating rounds, every figure reported as a median and as a ratio against the kernel's
# own paths measured in the same round.
#
#   veth      iperf3 over a veth pair (the kernel's inter-namespace path)
#   user_hop  TAP -> unetback-userhop (vnet_hdr, offloads, poll/read/write) -> TAP: the cost
#             floor of any userspace backend
#   unetback  guest <-> host through netfront-shim, the rings, xensim grant copies,
#             unetbackd and its vif TAP on a bridge (and guest <-> guest over that bridge)
#
# Then: unetback scaling with queues and with guests (aggregate, Jain's fairness index) and
# unetbackd's memory per vif. Per unetback run: unetbackd's CPU, syscalls (perf stat,
# raw_syscalls:sys_enter) and wake-ups (its threads' context switches) per packet moved, and
# its CPU per GB against the user-hop forwarder's. Everything lives in namespaces named ubb-<pid>-*, created here
# and deleted on exit, failure or Ctrl-C; only processes started here are ever killed.
#
#   tools/lab/bench.sh BUILD_DIR [--quick] [--json FILE] [--plot FILE.png] [--seconds N]
#                                [--rounds N] [--profile DIR] [--unetbackd-arg ARG]...
#                                [--no-syscall-count]
#   tools/lab/bench.sh BUILD_DIR --experiments [--quick] [--json FILE] [--seconds N]
#                                [--only pending|coalesce|refill]
#
# --experiments: instead, the three seed experiments on unetbackd's internal switch
# (tools/lab/unetlab/experiments.py): the zerocopy pending limit with and without the copy fallback
# (seed 000), full vs legacy RX coalescing VM->VM (seed 003), the shim's RX refill threshold
# (seed 002); the JSON goes under "experiments".
#
# --unetbackd-arg ARG: one more argument for unetbackd (repeat it), e.g. to compare a tunable:
#   --unetbackd-arg --goodcopy-len --unetbackd-arg 65535
# --profile DIR: in round 1, the unetback runs of tcp1 (both ways) and udp64 guest-to-host
# are recorded with `perf record -g` (unetbackd, netfront-shim, xensim) and their syscalls
# with `perf record -e raw_syscalls:sys_enter`, into DIR/<test>.data and
# DIR/<test>.syscalls.data, with every run's record in DIR/results.jsonl.
# perf's own CPU time lowers those runs' figures.
# --no-syscall-count: no perf stat during the runs (the syscall figures are left out): to see
# what counting them costs the paths.
#
# Exit status: 0 all paths carried traffic (whatever the figures), 1 a path is broken (no
# traffic, a process died, setup failed), 2 usage error. Low figures never fail the run.
set -euo pipefail
# The whole script is one compound command, so bash has read all of it before the first line
# runs: editing this file during a (long) run cannot change what that run executes.
{

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
USAGE="usage: bench.sh BUILD_DIR [--quick] [--json FILE] [--plot FILE.png] [--seconds N] [--rounds N] [--profile DIR] [--unetbackd-arg ARG]... [--no-syscall-count]"
BUILD=$(cd "${1:?$USAGE}" && pwd)
shift
for a in "$@"; do
  if [[ $a == --experiments ]]; then
    args=()
    for b in "$@"; do [[ $b == --experiments ]] || args+=("$b"); done
    PYTHONPATH=$ROOT/tools/lab exec python3 -m unetlab experiments "$BUILD" "${args[@]}"
  fi
done
QUICK=0
JSON_OUT=
PLOT_OUT=
SECS=
ROUNDS=
PROFILE_DIR=
DAEMON_ARGS=()
COUNT_SYSCALLS=1
while (($#)); do
  case $1 in
    --quick) QUICK=1; shift ;;
    --json) JSON_OUT=${2:?}; shift 2 ;;
    --plot) PLOT_OUT=${2:?}; shift 2 ;;
    --seconds) SECS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --profile) PROFILE_DIR=${2:?}; shift 2 ;;
    --unetbackd-arg) DAEMON_ARGS+=("${2:?}"); shift 2 ;;
    --no-syscall-count) COUNT_SYSCALLS=0; shift ;;
    -h | --help) echo "$USAGE"; exit 0 ;;
    *) echo "bench: unknown option $1" >&2; echo "$USAGE" >&2; exit 2 ;;
  esac
done
# --quick (CI, README smoke): one round of short runs and reduced scaling, < 3 minutes.
if ((QUICK)); then
  : "${SECS:=2}" "${ROUNDS:=1}"
  SCALE_QUEUES=(1 2)
  SCALE_GUESTS=(1 4)
  QUEUE_TESTS=(tcp4-guest-to-host udp64-guest-to-host)
else
  QUEUE_TESTS=(tcp4-guest-to-host tcp4-host-to-guest udp64-guest-to-host)
  : "${SECS:=5}" "${ROUNDS:=3}"
  SCALE_QUEUES=(1 2 4)
  SCALE_GUESTS=(1 4 16)
fi
[[ $SECS =~ ^[0-9]+$ && $SECS -ge 1 && $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 ]] ||
  { echo "bench: --seconds and --rounds take positive integers" >&2; exit 2; }
# Full runs are long enough to leave TCP slow start out of the figures.
OMIT=()
((SECS >= 4)) && OMIT=(-O 1)

XENSIM=$BUILD/tools/xensim/xensim
UNETBACKD=$BUILD/backend/daemon/unetbackd
XL=$BUILD/tools/xl/unetback-xl
CTL=$BUILD/tools/ctl/unetback-ctl
SHIM=$BUILD/frontend-shim/netfront-shim
USERHOP=$BUILD/tools/userhop/unetback-userhop
SCRIPT=$ROOT/tools/hotplug/vif-unetback

say() { printf '[bench] %s\n' "$*" >&2; }
die() {
  printf '[bench] error: %s\n' "$*" >&2
  exit 1
}

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, TAPs, a bridge)"
for b in "$XENSIM" "$UNETBACKD" "$XL" "$CTL" "$SHIM" "$USERHOP"; do
  [[ -x $b ]] || die "$b is missing: build first (tools/lab.sh build)"
done
for t in iperf3 ip python3; do command -v "$t" >/dev/null || die "$t is missing (tools/lab.sh deps)"; done
if [[ -n $PROFILE_DIR ]]; then
  command -v perf >/dev/null || "$ROOT/tools/lab.sh" deps linux-perf >&2 || die "cannot install linux-perf"
  mkdir -p "$PROFILE_DIR"
fi
# Syscalls per packet come from perf's raw_syscalls:sys_enter tracepoint (counting only, no
# samples). Without a working perf the run goes on and those figures are left out (a note says so).
((COUNT_SYSCALLS)) && { command -v perf >/dev/null || "$ROOT/tools/lab.sh" deps linux-perf >&2 || true; }
BENCH_PERF=
SYSCALL_NOTE=
if ((!COUNT_SYSCALLS)); then
  SYSCALL_NOTE="--no-syscall-count: syscalls per packet not measured"
elif ! command -v perf >/dev/null; then
  SYSCALL_NOTE="no perf (linux-perf): syscalls per packet not measured"
elif ! perf_out=$(perf stat -x, -e raw_syscalls:sys_enter -- true 2>&1) || [[ $perf_out != *raw_syscalls:sys_enter* ]] ||
  [[ $perf_out == *"not supported"* || $perf_out == *"not counted"* ]]; then
  SYSCALL_NOTE="perf cannot count raw_syscalls:sys_enter here ($(tr '\n' ' ' <<<"$perf_out" | cut -c1-120)): syscalls per packet not measured"
else
  BENCH_PERF=$(command -v perf)
fi
export BENCH_PERF
[[ -n $SYSCALL_NOTE ]] && say "$SYSCALL_NOTE"
if [[ -n $PLOT_OUT ]]; then
  command -v gnuplot >/dev/null || "$ROOT/tools/lab.sh" deps gnuplot-nox >&2 ||
    die "cannot install gnuplot-nox"
fi

T0=$SECONDS
P=ubb-$$ # every namespace of this run starts with this
WORK=$(mktemp -d /tmp/unetback-bench.XXXXXX)
WORLD=$WORK/world
mkdir -p "$WORLD"
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
NETNS=()           # namespaces created here, deleted at exit
PIDS=()            # long-lived processes started here (servers, forwarder, daemons)
declare -A SERVER  # iperf3 server name -> pid
declare -A GUEST_DOMID
GUESTS_UP=()       # guests created with unetback-xl (destroyed at exit)
XENSIM_PID=
DAEMON_PID=
USERHOP_PID=
BROKEN=()          # what failed: a non-empty list makes the exit status 1

# ---------------------------------------------------------------------------------------------
# Teardown: guests first (while the daemon and xensim still answer), then our processes by
# PID, then our namespaces (which takes the veths, the bridge and any TAP left with them).
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  say "tearing down"
  local pid
  for pid in "${SERVER[@]}" "${PIDS[@]}"; do
    [[ -n $pid && $pid != "$DAEMON_PID" && $pid != "$XENSIM_PID" ]] || continue
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${SERVER[@]}" "${PIDS[@]}"; do
    [[ -n $pid && $pid != "$DAEMON_PID" && $pid != "$XENSIM_PID" ]] || continue
    wait "$pid" 2>/dev/null
  done
  local g
  for g in "${GUESTS_UP[@]}"; do
    ip netns exec "$P-d0" "$XL" --world "$WORLD" destroy "$g" >/dev/null 2>&1 || say "destroy $g failed"
  done
  # A guest whose destroy could not run (xensim gone): its pid file names it.
  local pf gpid
  for pf in "$WORLD"/guest-*.pid; do
    [[ -f $pf ]] || continue
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
  local ns
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if ((rc != 0)); then
    say "failed (exit $rc); logs kept in $WORK"
    local f
    for f in "$WORK"/*.log "$WORLD"/*.log; do
      [[ -s $f ]] && { echo "---- $f (tail)" >&2; tail -n 12 "$f" >&2; }
    done
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# The measuring side, in Python: one iperf3 run with the CPU time of every process involved
# and unetbackd's counters before and after; the report (medians, ratios, table, JSON, plot).
cat >"$WORK/bench.py" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, threading, time

CLK_TCK = os.sysconf("SC_CLK_TCK")

def cpu_ticks(pid):
    """utime + stime of one process, in clock ticks (proc(5) fields 14 and 15)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])

def ctxt_switches(pid):
    """{tid: (voluntary, nonvoluntary)} context switches of every thread of one process."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for tid in tids:
        v = n = None
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        n = int(line.split()[1])
        except OSError:
            continue  # the thread ended meanwhile
        if v is not None and n is not None:
            out[tid] = (v, n)
    return out

def ctxt_delta(before, after):
    """(voluntary, nonvoluntary) switches between two snapshots; a thread that appeared in
    between counts from zero, one that ended in between is lost (none do in a steady run)."""
    if before is None or after is None:
        return None
    v = n = 0
    for tid, (av, an) in after.items():
        bv, bn = before.get(tid, (0, 0))
        v += av - bv
        n += an - bn
    return v, n

# Syscalls are counted by perf's raw_syscalls:sys_enter tracepoint, one `perf stat` per process
# of the path (every path's, so that the cost of the enabled tracepoint -- every syscall on the
# machine takes the slow entry path while it is on -- is the same in every path's runs).
SYSCALL_EVENT = "raw_syscalls:sys_enter"
PERF = os.environ.get("BENCH_PERF", "")

def syscall_counters_start(pids, work):
    if not PERF:
        return {}
    out = {}
    for role, pid in pids.items():
        fd, path = tempfile.mkstemp(prefix="perf-%s." % role, dir=work)
        os.close(fd)
        p = subprocess.Popen([PERF, "stat", "-x", ",", "--no-big-num", "-e", SYSCALL_EVENT,
                              "-p", str(pid), "-o", path], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out[role] = (p, path)
    time.sleep(0.2)  # perf has attached before the traffic starts
    return out

def syscall_counters_stop(started):
    """{role: syscalls} over the window (SIGINT makes perf stat print its counts)."""
    counts = {}
    for role, (p, path) in started.items():
        p.send_signal(2)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        try:
            for line in open(path):
                f = line.strip().split(",")
                if len(f) >= 3 and f[2] == SYSCALL_EVENT and f[0].isdigit():
                    counts[role] = int(f[0])
                elif len(f) >= 3 and f[2] == SYSCALL_EVENT and f[0] == "<not counted>":
                    counts[role] = 0  # the process never ran in the window
        except OSError:
            pass
        try:
            os.unlink(path)
        except OSError:
            pass
    return counts

def parse_pids(spec):
    out = {}
    for item in filter(None, spec.split(",")):
        role, pid = item.split("=")
        out[role] = int(pid)
    return out

def ctl_counters(ctl, world):
    """unetbackd's counters summed over every vif and queue."""
    if not ctl:
        return None
    try:
        r = subprocess.run([ctl, "--world", world, "--json", "stats"], capture_output=True,
                           text=True, timeout=10)
        d = json.loads(r.stdout)
    except Exception:
        return None
    t = {}
    for vif in d.get("vifs", []):
        for q in vif.get("queues", []):
            for k, v in q.get("counters", {}).items():
                t[k] = t.get(k, 0) + v
    return t

def per(a, b):
    return a / b if b else None

def unetback_figures(d):
    """Per-packet figures from a counter delta."""
    return {
        "rx_packets": d.get("rx_packets", 0), "tx_packets": d.get("tx_packets", 0),
        "rx_slots_per_packet": per(d.get("rx_slots", 0), d.get("rx_packets", 0)),
        "rx_min_slots_per_packet": per(d.get("rx_min_slots", 0), d.get("rx_packets", 0)),
        "rx_excess_slots": d.get("rx_slots", 0) - d.get("rx_min_slots", 0),
        "tx_slots_per_packet": per(d.get("tx_slots", 0), d.get("tx_packets", 0)),
        "rx_copy_segments_per_call": per(d.get("rx_copy_segments", 0), d.get("rx_copy_calls", 0)),
        "tx_copy_segments_per_call": per(d.get("tx_copy_segments", 0), d.get("tx_copy_calls", 0)),
        "rx_notify_sent_per_packet": per(d.get("rx_notify_sent", 0), d.get("rx_packets", 0)),
        "rx_notify_suppressed_per_packet": per(d.get("rx_notify_suppressed", 0), d.get("rx_packets", 0)),
        "tx_notify_sent_per_packet": per(d.get("tx_notify_sent", 0), d.get("tx_packets", 0)),
        "tx_notify_suppressed_per_packet": per(d.get("tx_notify_suppressed", 0), d.get("tx_packets", 0)),
        "events_per_packet": per(d.get("events", 0), d.get("rx_packets", 0) + d.get("tx_packets", 0)),
        "tx_zerocopy": d.get("tx_zerocopy", 0), "tx_copied": d.get("tx_copied", 0),
        "rx_dropped": sum(v for k, v in d.items() if k.startswith("rx_dropped")),
        "tx_dropped": sum(v for k, v in d.items() if k.startswith("tx_drop")),
        "counters": d,
    }

def iperf_figures(j, udp):
    """The receiver's figures from iperf3 -J (the client prints both ends)."""
    e = j["end"]
    rcv = e["sum_received"]
    f = {"seconds": rcv["seconds"], "bytes": rcv["bytes"],
         "gbit_s": rcv["bits_per_second"] / 1e9,
         "iperf_cpu_percent": e.get("cpu_utilization_percent", {})}
    if udp:
        pk = max(rcv.get("packets", 0) - rcv.get("lost_packets", 0), 0)
        f["packets"] = pk
        f["mpps"] = pk / rcv["seconds"] / 1e6 if rcv["seconds"] else 0.0
        f["loss_percent"] = rcv.get("lost_percent", 0.0)
        f["sent_mpps"] = e["sum_sent"].get("packets", 0) / max(e["sum_sent"]["seconds"], 1e-9) / 1e6
    else:
        f["retransmits"] = e["sum_sent"].get("retransmits", 0)
    return f

def cmd_run(argv):
    """run OUT PATH TEST ROUND NS PIDS CTL WORLD TIMEOUT -- iperf3 client args"""
    out, path, test, rnd, ns, pids, ctl, world, timeout = argv[:9]
    args = argv[argv.index("--") + 1:]
    pids = parse_pids(pids)
    udp = "-u" in args
    before = {r: cpu_ticks(p) for r, p in pids.items()}
    cb = ctl_counters(ctl, world)
    daemon = pids.get("unetbackd")
    sw_before = ctxt_switches(daemon) if daemon else None
    perfs = syscall_counters_start({r: p for r, p in pids.items() if not r.startswith("iperf3-client")},
                                   os.environ["BENCH_WORK"])
    cmd = ["ip", "netns", "exec", ns, "iperf3", "-J", "--connect-timeout", "3000"] + args
    t0 = time.monotonic()
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
    timer = threading.Timer(float(timeout), p.kill)
    timer.start()
    stdout = p.stdout.read()
    # Reap it ourselves: the client is gone once reaped, so its CPU time comes from wait4's
    # rusage (the same utime/stime accounting /proc/<pid>/stat shows while it lives).
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    client_cpu = ru.ru_utime + ru.ru_stime
    err.seek(0)
    stderr = err.read()
    wall = time.monotonic() - t0
    after = {r: cpu_ticks(p_) for r, p_ in pids.items()}
    sw = ctxt_delta(sw_before, ctxt_switches(daemon)) if daemon else None
    syscalls = syscall_counters_stop(perfs)
    ca = ctl_counters(ctl, world)
    rec = {"kind": "run", "path": path, "test": test, "round": int(rnd), "args": args,
           "wall_s": wall, "ok": False}
    died = [r for r, v in after.items() if v is None]
    if died:
        rec["died"] = died
    try:
        j = json.loads(stdout)
    except Exception:
        j = {"error": "no JSON from iperf3: " + stderr.decode(errors="replace")[-300:]}
    if p.returncode != 0 or "error" in j:
        rec["error"] = j.get("error", "iperf3 exit %s" % p.returncode)
    else:
        rec.update(iperf_figures(j, udp))
        rec["ok"] = rec["bytes"] > 0
    cpu = {r: (after[r] - before[r]) / CLK_TCK for r in pids
           if after.get(r) is not None and before.get(r) is not None}
    cpu["iperf3-client"] = client_cpu
    rec["cpu_s"] = cpu
    total = sum(cpu.values())
    rec["cpu_s_total"] = total
    if syscalls:
        rec["syscalls"] = syscalls
    if rec.get("bytes"):
        rec["cpu_s_per_gb"] = total / (rec["bytes"] / 1e9)
        if udp and rec.get("packets"):
            rec["cpu_us_per_packet"] = total * 1e6 / rec["packets"]
    # The path's own processes (not iperf3): what the forwarding itself costs.
    fwd = sum(v for r, v in cpu.items() if not r.startswith("iperf3"))
    rec["path_cpu_s"] = fwd
    if udp and rec.get("packets"):
        rec["path_cpu_us_per_packet"] = fwd * 1e6 / rec["packets"]
    if cb is not None and ca is not None:
        rec["unetback"] = unetback_figures({k: ca.get(k, 0) - cb.get(k, 0) for k in ca})
        # unetbackd's CPU per packet it moved (both directions; one queue is one thread, so
        # 1 / this is the packet rate one queue could reach if nothing else limited it).
        moved = rec["unetback"]["tx_packets"] + rec["unetback"]["rx_packets"]
        if moved and "unetbackd" in cpu:
            rec["unetback"]["unetbackd_us_per_packet"] = cpu["unetbackd"] * 1e6 / moved
        # Wake-ups: every time one of unetbackd's threads left the CPU (voluntary: it blocked,
        # in epoll_wait or a read; nonvoluntary: it was preempted), per packet moved.
        if moved and sw is not None:
            rec["unetback"]["unetbackd_wakeups_per_packet"] = (sw[0] + sw[1]) / moved
            rec["unetback"]["unetbackd_voluntary_switches_per_packet"] = sw[0] / moved
            rec["unetback"]["unetbackd_nonvoluntary_switches_per_packet"] = sw[1] / moved
        if moved and "unetbackd" in syscalls:
            rec["unetback"]["unetbackd_syscalls_per_packet"] = syscalls["unetbackd"] / moved
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    if rec["ok"]:
        main = ("%.3f Mpps, %.1f%% loss" % (rec["mpps"], rec["loss_percent"]) if udp
                else "%.2f Gbit/s, %d retr" % (rec["gbit_s"], rec["retransmits"]))
        print("[bench]   r%s %-24s %-9s %s, %.1f CPU s/GB" % (rnd, test, path, main,
              rec.get("cpu_s_per_gb", 0)), file=sys.stderr)
        return 0
    print("[bench]   r%s %-24s %-9s FAILED: %s" % (rnd, test, path, rec.get("error", "no traffic")),
          file=sys.stderr)
    return 3

def cmd_multi(argv):
    """multi OUT KIND N SECS TIMEOUT NS,ADDR,PORT... : concurrent single-stream TCP, one per guest"""
    out, kind, n, secs, timeout = argv[:5]
    procs = []
    for spec in argv[5:]:
        ns, addr, port = spec.split(",")
        cmd = ["ip", "netns", "exec", ns, "iperf3", "-J", "--connect-timeout", "3000", "-c", addr,
               "-p", port, "-t", secs]
        procs.append((ns, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)))
    rates, errors = [], []
    for ns, p in procs:
        try:
            stdout, _ = p.communicate(timeout=float(timeout))
            e = json.loads(stdout)["end"]
            rates.append(e["sum_received"]["bits_per_second"] / 1e9)
        except Exception as ex:
            p.kill()
            p.communicate()
            rates.append(0.0)
            errors.append("%s: %s" % (ns, ex))
    agg = sum(rates)
    sq = sum(r * r for r in rates)
    rec = {"kind": kind, "n": int(n), "per_guest_gbit_s": rates, "aggregate_gbit_s": agg,
           "jain_index": agg * agg / (len(rates) * sq) if sq else 0.0,
           "min_over_max": min(rates) / max(rates) if max(rates) > 0 else 0.0,
           "errors": errors, "ok": all(r > 0 for r in rates)}
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print("[bench]   %d guest(s): %.2f Gbit/s aggregate, Jain %.3f, min/max %.2f%s" % (
        int(n), agg, rec["jain_index"], rec["min_over_max"],
        "" if rec["ok"] else " FAILED " + "; ".join(errors)), file=sys.stderr)
    return 0 if rec["ok"] else 3

def cmd_note(argv):
    """note OUT JSON : appends a record"""
    with open(argv[0], "a") as f:
        f.write(argv[1] + "\n")
    return 0

PATHS = ["veth", "user_hop", "unetback"]

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def baseline_test(test):
    # The kernel paths have one pair of namespaces: a guest-to-guest test compares with
    # their guest-to-host figure (the same one-way inter-namespace hop).
    return test.replace("guest-to-guest", "guest-to-host")

def primary(test):
    return "mpps" if test.startswith("udp") else "gbit_s"

def own_cpu_per_gb(rec, role):
    """CPU seconds of one process of the path per GB received."""
    v = rec.get("cpu_s", {}).get(role)
    return v / (rec["bytes"] / 1e9) if v is not None and rec.get("bytes") else None

def cmd_report(argv):
    results, json_out, plot_out, meta = argv[0], argv[1], argv[2], json.loads(argv[3])
    recs = [json.loads(l) for l in open(results) if l.strip()]
    runs = [r for r in recs if r["kind"] == "run" and r["path"] in PATHS]
    tests = []
    for r in runs:
        if r["test"] not in tests:
            tests.append(r["test"])
    fields = ["gbit_s", "mpps", "sent_mpps", "retransmits", "loss_percent", "cpu_s_per_gb",
              "cpu_us_per_packet", "path_cpu_us_per_packet"]
    figs = {}
    for t in tests:
        figs[t] = {}
        for p in PATHS:
            rs = [r for r in runs if r["test"] == t and r["path"] == p and r["ok"]]
            if not rs:
                continue
            m = {k: med([r.get(k) for r in rs]) for k in fields}
            m = {k: v for k, v in m.items() if v is not None}
            m["rounds"] = len(rs)
            m["per_round"] = [r.get(primary(t)) for r in rs]
            cpu_roles = {}
            for r in rs:
                for role, v in r.get("cpu_s", {}).items():
                    cpu_roles.setdefault(role, []).append(v)
            m["cpu_s_by_process"] = {k: med(v) for k, v in cpu_roles.items()}
            sys_roles = {}
            for r in rs:
                for role, v in r.get("syscalls", {}).items():
                    sys_roles.setdefault(role, []).append(v)
            if sys_roles:
                m["syscalls_by_process"] = {k: med(v) for k, v in sys_roles.items()}
            if p == "unetback":
                ub = [r["unetback"] for r in rs if "unetback" in r]
                keys = list(dict.fromkeys(k for u in ub for k in u if k != "counters"))
                m["unetback"] = {k: med([u.get(k) for u in ub]) for k in keys}
            figs[t][p] = m
    # Ratios: per round (the paths of one test run back to back), then the median.
    ratios = {}
    for t in tests:
        if "unetback" not in figs[t]:
            continue
        k = primary(t)
        out = {}
        for base, name in (("veth", "unetback_over_veth"), ("user_hop", "unetback_over_user_hop")):
            bt = baseline_test(t)
            per_round = []
            for rnd in sorted({r["round"] for r in runs}):
                u = [r.get(k) for r in runs if r["test"] == t and r["path"] == "unetback" and r["round"] == rnd and r["ok"]]
                b = [r.get(k) for r in runs if r["test"] == bt and r["path"] == base and r["round"] == rnd and r["ok"]]
                if u and b and b[0]:
                    per_round.append(u[0] / b[0])
            out[name] = med(per_round)
        # unetbackd's own CPU per GB against the user-hop forwarder's, per round: the daemon's
        # cost against the floor of any userspace backend (both carry the same bytes).
        per_round = []
        for rnd in sorted({r["round"] for r in runs}):
            u = [own_cpu_per_gb(r, "unetbackd") for r in runs
                 if r["test"] == t and r["path"] == "unetback" and r["round"] == rnd and r["ok"]]
            b = [own_cpu_per_gb(r, "userhop") for r in runs
                 if r["test"] == baseline_test(t) and r["path"] == "user_hop" and r["round"] == rnd and r["ok"]]
            if u and b and u[0] is not None and b[0]:
                per_round.append(u[0] / b[0])
        out["unetbackd_cpu_over_user_hop_cpu"] = med(per_round)
        ratios[t] = out
    scaling_q = [r for r in recs if r["kind"] == "run" and r["path"].startswith("unetback-q")]
    queues = []
    for r in scaling_q:
        if not r["ok"]:
            continue
        q = int(r["path"][len("unetback-q"):])
        e = {"queues": q, "test": r["test"], primary(r["test"]): r.get(primary(r["test"]))}
        if r["test"].startswith("udp"):
            e["mpps_per_queue"] = r["mpps"] / q
        if "unetback" in r:
            for k in ("rx_copy_segments_per_call", "tx_copy_segments_per_call", "unetbackd_us_per_packet",
                      "unetbackd_syscalls_per_packet", "unetbackd_wakeups_per_packet"):
                e[k] = r["unetback"].get(k)
        e["cpu_s_per_gb"] = r.get("cpu_s_per_gb")
        queues.append(e)
    guests = [{k: v for k, v in r.items() if k != "kind"} for r in recs if r["kind"] == "guests"]
    mem = {r["vifs"]: r for r in recs if r["kind"] == "rss"}
    memory = {"rss_kib": {str(k): v["rss_kib"] for k, v in sorted(mem.items())},
              "rss_after_traffic_kib": {str(k): v.get("rss_after_traffic_kib") for k, v in sorted(mem.items())}}
    vifs = sorted(mem)
    if len(vifs) >= 2 and vifs[0] >= 1:
        lo, hi = vifs[0], vifs[-1]
        memory["kib_per_vif_idle"] = (mem[hi]["rss_kib"] - mem[lo]["rss_kib"]) / (hi - lo)
        if mem[hi].get("rss_after_traffic_kib") and mem[lo].get("rss_after_traffic_kib"):
            memory["kib_per_vif_after_traffic"] = (
                mem[hi]["rss_after_traffic_kib"] - mem[lo]["rss_after_traffic_kib"]) / (hi - lo)
        memory["compared"] = [lo, hi]

    # Targets (reported, never enforced).
    targets = []
    def tgt(name, value, goal, met):
        targets.append({"target": name, "value": value, "goal": goal,
                        "met": None if value is None else bool(met)})
    for t in ("tcp1-guest-to-host", "tcp1-host-to-guest"):
        r = ratios.get(t, {})
        v = r.get("unetback_over_user_hop")
        tgt(t + " unetback/user_hop", v, ">= 0.9", v is not None and v >= 0.9)
        v = r.get("unetback_over_veth")
        tgt(t + " unetback/veth", v, ">= 0.75", v is not None and v >= 0.75)
    for t in ("tcp1-guest-to-host", "tcp1-host-to-guest", "udp64-guest-to-host"):
        v = ratios.get(t, {}).get("unetbackd_cpu_over_user_hop_cpu")
        tgt(t + " unetbackd CPU/GB / user hop CPU/GB", v, "<= 1.0", v is not None and v <= 1.0)
    excess = [r["unetback"]["rx_excess_slots"] for r in runs if r["path"] == "unetback" and "unetback" in r]
    rxp = sum(r["unetback"]["rx_packets"] for r in runs if r["path"] == "unetback" and "unetback" in r)
    tgt("RX slots above the minimum (all unetback runs, %d packets)" % rxp,
        sum(excess) if excess else None, "0", excess and sum(excess) == 0)
    segs = []
    for t, key in (("tcp1-host-to-guest", "rx_copy_segments_per_call"),
                   ("tcp4-host-to-guest", "rx_copy_segments_per_call"),
                   ("tcp1-guest-to-host", "tx_copy_segments_per_call"),
                   ("tcp4-guest-to-host", "tx_copy_segments_per_call")):
        v = figs.get(t, {}).get("unetback", {}).get("unetback", {}).get(key)
        tgt("%s %s" % (t, key), v, ">= 48", v is not None and v >= 48)
    v = figs.get("udp64-guest-to-host", {}).get("unetback", {}).get("mpps")
    tgt("udp64-guest-to-host Mpps (1 queue, as iperf3 delivers it)", v, ">= 1.0", v is not None and v >= 1.0)
    us = figs.get("udp64-guest-to-host", {}).get("unetback", {}).get("unetback", {}).get("unetbackd_us_per_packet")
    v = 1.0 / us if us else None
    tgt("udp64-guest-to-host Mpps one queue could carry (1 / unetbackd us per packet)", v, ">= 1.0",
        v is not None and v >= 1.0)

    out = {"mode": meta["mode"], "rounds": meta["rounds"], "seconds_per_run": meta["seconds"],
           "machine": meta["machine"], "paths": PATHS, "tests": figs, "ratios": ratios,
           "scaling": {"queues": queues, "guests": guests, "reduced": meta["mode"] == "quick"},
           "memory": memory, "targets": targets, "notes": meta["notes"],
           "elapsed_s": meta.get("elapsed_s"), "broken": meta.get("broken", [])}
    if json_out:
        with open(json_out, "w") as f:
            json.dump(out, f, indent=2)

    # The table.
    def fmt(x, spec="%.2f"):
        return "-" if x is None else spec % x
    print()
    print("unetback bench (%s: %d round(s) of %d s runs, medians; ratio = unetback / baseline, median over rounds)"
          % (meta["mode"], meta["rounds"], meta["seconds"]))
    print("%-24s %-22s %-22s %-22s %7s %7s %8s" % ("test", "veth", "user hop", "unetback", "/veth", "/hop",
                                                   "cpu/hop"))
    for t in tests:
        cells = []
        for p in PATHS:
            m = figs[t].get(p)
            if not m:
                cells.append("-")
            elif t.startswith("udp"):
                cells.append("%s Mpps %s%%l %s" % (fmt(m.get("mpps"), "%.3f"), fmt(m.get("loss_percent"), "%.0f"),
                                                     fmt(m.get("cpu_s_per_gb"), "%.0fs")))
            else:
                cells.append("%s Gb/s %sr %s" % (fmt(m.get("gbit_s")), fmt(m.get("retransmits"), "%.0f"),
                                                   fmt(m.get("cpu_s_per_gb"), "%.1fs")))
        r = ratios.get(t, {})
        print("%-24s %-22s %-22s %-22s %7s %7s %8s" % (t, cells[0], cells[1], cells[2],
              fmt(r.get("unetback_over_veth")), fmt(r.get("unetback_over_user_hop")),
              fmt(r.get("unetbackd_cpu_over_user_hop_cpu"))))
    print("  (TCP: Gbit/s, retransmits, CPU s/GB; UDP: received Mpps, loss %, CPU s/GB;"
          " udp64 = 64-byte frames, udp1400 = 1400-byte payloads;"
          " cpu/hop: unetbackd's CPU per GB / unetback-userhop's)")
    print()
    print("unetback per packet (medians)  %-8s %-8s %-9s %-9s %-9s %-9s %-8s %-8s %-8s %s" % (
        "rxslot", "(min)", "rxseg/cp", "txseg/cp", "rxntf/p", "txntf/p", "us/pkt", "sys/pkt", "wake/pkt",
        "zerocopy/copied"))
    for t in tests:
        u = figs[t].get("unetback", {}).get("unetback")
        if not u:
            continue
        print("  %-28s %-8s %-8s %-9s %-9s %-9s %-9s %-8s %-8s %-8s %s/%s" % (
            t, fmt(u.get("rx_slots_per_packet")), fmt(u.get("rx_min_slots_per_packet")),
            fmt(u.get("rx_copy_segments_per_call"), "%.1f"), fmt(u.get("tx_copy_segments_per_call"), "%.1f"),
            fmt(u.get("rx_notify_sent_per_packet"), "%.3f"), fmt(u.get("tx_notify_sent_per_packet"), "%.3f"),
            fmt(u.get("unetbackd_us_per_packet"), "%.1f"), fmt(u.get("unetbackd_syscalls_per_packet"), "%.3f"),
            fmt(u.get("unetbackd_wakeups_per_packet"), "%.3f"),
            fmt(u.get("tx_zerocopy"), "%.0f"), fmt(u.get("tx_copied"), "%.0f")))
    print("  (rxslot: RX ring slots per packet, (min) the least possible; seg/cp: grant-copy segments"
          " per call; ntf/p: notifications sent per packet; us/pkt: unetbackd CPU per packet moved;"
          " sys/pkt: unetbackd's syscalls per packet moved (perf, raw_syscalls:sys_enter);"
          " wake/pkt: its threads' context switches, voluntary + nonvoluntary, per packet moved;"
          " packets moved = both directions)")
    if queues:
        print()
        print("queue scaling (one guest, --queues N)%s" % (" [reduced: --quick]" if meta["mode"] == "quick" else ""))
        for e in queues:
            k = primary(e["test"])
            extra = " (%.3f Mpps/queue)" % e["mpps_per_queue"] if "mpps_per_queue" in e else ""
            print("  %d queue(s) %-24s %s %s%s; unetbackd %s us, %s syscalls, %s wake-ups per packet" % (
                e["queues"], e["test"], fmt(e.get(k), "%.3f"), "Mpps" if k == "mpps" else "Gbit/s", extra,
                fmt(e.get("unetbackd_us_per_packet"), "%.2f"), fmt(e.get("unetbackd_syscalls_per_packet"), "%.3f"),
                fmt(e.get("unetbackd_wakeups_per_packet"), "%.3f")))
    if guests:
        print()
        print("guest scaling (tcp1 guest-to-host on every guest at once)%s" % (
            " [reduced: --quick]" if meta["mode"] == "quick" else ""))
        for g in guests:
            print("  %2d guest(s): %6.2f Gbit/s aggregate, Jain %.3f, min/max %.2f" % (
                g["n"], g["aggregate_gbit_s"], g["jain_index"], g["min_over_max"]))
    if mem:
        print()
        print("unetbackd RSS: " + ", ".join("%d vif(s) %d KiB idle / %s KiB after traffic" % (
            k, v["rss_kib"], fmt(v.get("rss_after_traffic_kib"), "%d")) for k, v in sorted(mem.items())))
        if "kib_per_vif_idle" in memory:
            print("  per vif: %.0f KiB idle, %s KiB after traffic" % (
                memory["kib_per_vif_idle"], fmt(memory.get("kib_per_vif_after_traffic"), "%.0f")))
    print()
    print("targets (reported, not enforced):")
    for t in targets:
        state = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        v = t["value"]
        print("  %-62s %-8s goal %-6s %s" % (t["target"], fmt(v, "%.3f") if isinstance(v, float) else v, t["goal"], state))
    for n in meta["notes"]:
        print("note: " + n)

    if plot_out:
        write_plot(figs, tests, plot_out, meta)
    return 0

def write_plot(figs, tests, plot_out, meta):
    d = os.environ["BENCH_WORK"]
    tcp = [t for t in tests if t.startswith("tcp")]
    udp = [t for t in tests if t.startswith("udp")]
    def dat(name, ts, key):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            for t in ts:
                vals = [figs[t].get(p, {}).get(key) for p in PATHS]
                f.write('"%s" %s\n' % (t.replace("-to-", ">").replace("guest", "g").replace("host", "h"),
                                       " ".join("%.4f" % v if v is not None else "0" for v in vals)))
        return path
    tcp_dat = dat("tcp.dat", tcp, "gbit_s")
    udp_dat = dat("udp.dat", udp, "mpps")
    gp = os.path.join(d, "bench.gp")
    with open(gp, "w") as f:
        f.write("""if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,900 noenhanced font ",10"
} else {
  set terminal png size 1200,900 noenhanced
}
set output "%s"
set multiplot layout 2,1 title "unetback bench (%s, %d round(s), medians): veth vs user hop vs unetback"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top right
set xtics rotate by -20
set ylabel "TCP Gbit/s"
plot "%s" using 2:xtic(1) title "veth", "" using 3 title "user hop", "" using 4 title "unetback"
set ylabel "UDP received Mpps"
plot "%s" using 2:xtic(1) title "veth", "" using 3 title "user hop", "" using 4 title "unetback"
unset multiplot
""" % (plot_out, meta["mode"], meta["rounds"], tcp_dat, udp_dat))
    r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
    if r.returncode != 0:
        print("[bench] gnuplot failed: " + r.stderr[-400:], file=sys.stderr)
    else:
        print("[bench] plot written to %s" % plot_out, file=sys.stderr)

if __name__ == "__main__":
    cmd = sys.argv[1]
    sys.exit({"run": cmd_run, "multi": cmd_multi, "note": cmd_note, "report": cmd_report}[cmd](sys.argv[2:]))
PY
export BENCH_WORK=$WORK
bpy() { python3 "$WORK/bench.py" "$@"; }

# ---------------------------------------------------------------------------------------------
# Setup helpers.

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
  ip netns add "$1" || die "cannot create namespace $1"
  NETNS+=("$1")
  ip -n "$1" link set lo up
}

# start_server NAME NETNS ADDR [PORT]: a persistent iperf3 server (one test at a time).
start_server() {
  local name=$1 ns=$2 addr=$3 port=${4:-5201}
  ip netns exec "$ns" iperf3 -s -B "$addr" -p "$port" >"$WORK/server-$name.log" 2>&1 &
  SERVER[$name]=$!
  local i
  for ((i = 0; i < 30; i++)); do
    ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    sleep 0.1
  done
  die "iperf3 server $name did not start (see $WORK/server-$name.log)"
}
declare -A SERVER_SPEC
server() { # NAME NETNS ADDR [PORT]: start, remembering how to restart it
  SERVER_SPEC[$1]="$2 $3 ${4:-5201}"
  start_server "$@"
}
# An iperf3 server can be left wedged by a client that failed mid-test: restart it.
restart_server() {
  local name=$1 pid=${SERVER[$1]}
  kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  # shellcheck disable=SC2086
  start_server "$name" ${SERVER_SPEC[$name]}
}

# ---------------------------------------------------------------------------------------------
# Path 1: veth. "guest" namespace $P-v1 (10.201.0.2), "host" $P-v2 (10.201.0.1).
say "work dir $WORK, namespaces $P-*"
add_netns "$P-v1"
add_netns "$P-v2"
ip -n "$P-v1" link add ubv0 type veth peer name ubv1 netns "$P-v2"
ip -n "$P-v1" addr add 10.201.0.2/24 dev ubv0
ip -n "$P-v2" addr add 10.201.0.1/24 dev ubv1
ip -n "$P-v1" link set ubv0 up
ip -n "$P-v2" link set ubv1 up
server veth "$P-v2" 10.201.0.1

# Path 2: user hop. TAP ubh0 in $P-h1 (10.202.0.2) <-> unetback-userhop <-> TAP ubh1 in $P-h2.
add_netns "$P-h1"
add_netns "$P-h2"
"$USERHOP" --a ubh0 --netns-a "$P-h1" --b ubh1 --netns-b "$P-h2" >"$WORK/userhop.log" 2>&1 &
USERHOP_PID=$!
PIDS+=("$USERHOP_PID")
wait_for_line "$WORK/userhop.log" 10 "userhop ready" || die "unetback-userhop did not start"
ip -n "$P-h1" addr add 10.202.0.2/24 dev ubh0
ip -n "$P-h2" addr add 10.202.0.1/24 dev ubh1
server user_hop "$P-h2" 10.202.0.1

# Path 3: unetback. xensim, unetbackd in $P-d0 with bridge ubbr0 (10.203.0.1), guests made
# by unetback-xl with the vif-unetback hotplug script, their netfront-shim TAPs in $P-gN.
NS0=$P-d0
BR=ubbr0
add_netns "$NS0"
"$XENSIM" --dir "$WORLD" >"$WORK/xensim.log" 2>&1 &
XENSIM_PID=$!
PIDS+=("$XENSIM_PID")
wait_for_line "$WORK/xensim.log" 10 "xensim ready" || die "xensim did not start"
ip -n "$NS0" link add "$BR" type bridge
ip -n "$NS0" addr add 10.203.0.1/24 dev "$BR"
ip -n "$NS0" link set "$BR" up
# If br_netfilter is loaded on this machine, bridged frames would go through netfilter hooks
# that neither baseline pays: turn them off (the sysctls are per namespace, this one only).
ip netns exec "$NS0" sh -c 'for f in /proc/sys/net/bridge/bridge-nf-call-*; do
  [ -w "$f" ] && echo 0 >"$f"; done; true'
ip netns exec "$NS0" "$UNETBACKD" --hypervisor "sim:$WORLD" --max-queues 4 --log-level warn \
  "${DAEMON_ARGS[@]}" >"$WORK/unetbackd.log" 2>&1 &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
for _ in $(seq 50); do [[ -S $WORLD/unetbackd.sock ]] && break; sleep 0.1; done
[[ -S $WORLD/unetbackd.sock ]] || die "unetbackd did not start"

# create_guest NAME NETNS IPV4-HOST-PART [xl args...]: a guest with one vif on the bridge.
create_guest() {
  local name=$1 ns=$2 host=$3
  shift 3
  add_netns "$ns"
  local mac
  mac=$(printf '00:16:3e:bb:%02x:%02x' $((host / 256)) $((host % 256)))
  ip netns exec "$NS0" "$XL" --world "$WORLD" create "$name" \
    --vif "mac=$mac,bridge=$BR,script=$SCRIPT" --guest-netns "$ns" --address "10.203.0.$host/24" \
    --shim "$SHIM" "$@" >"$WORK/xl-$name.out" 2>"$WORK/xl-$name.log" ||
    die "unetback-xl create $name failed: $(tail -n 3 "$WORK/xl-$name.log")"
  GUESTS_UP+=("$name")
  GUEST_DOMID[$name]=$(sed -n 's/^domid \([0-9]*\).*/\1/p' "$WORK/xl-$name.out")
}
destroy_guest() {
  local name=$1 g
  ip netns exec "$NS0" "$XL" --world "$WORLD" destroy "$name" >/dev/null 2>"$WORK/xl-destroy-$name.log" ||
    BROKEN+=("destroy $name failed")
  local keep=()
  for g in "${GUESTS_UP[@]}"; do [[ $g == "$name" ]] || keep+=("$g"); done
  GUESTS_UP=("${keep[@]}")
}
shim_pid() { cat "$WORLD/guest-${GUEST_DOMID[$1]}.pid"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$DAEMON_PID/status"; }

RSS0=$(rss_kib)
t=$SECONDS
create_guest g1 "$P-g1" 2
create_guest g2 "$P-g2" 3
say "veth, user hop and unetback ready in $((SECONDS - T0)) s (2 guests in $((SECONDS - t)) s)"
ip netns exec "$P-g1" ping -c 2 -i 0.2 -W 2 10.203.0.1 >/dev/null 2>&1 ||
  die "guest g1 cannot ping the host over unetback"
ip netns exec "$P-h1" ping -c 2 -i 0.2 -W 2 10.202.0.1 >/dev/null 2>&1 ||
  die "the user hop does not forward (ping failed)"
ip netns exec "$P-v1" ping -c 1 -W 2 10.201.0.1 >/dev/null 2>&1 || die "veth ping failed"
server unetback "$NS0" 10.203.0.1
server g2 "$P-g2" 10.203.0.3

# The processes whose CPU time counts for each path (besides the iperf3 client, whose rusage
# the runner takes when it reaps it).
pids_of() {
  case $1 in
    veth) echo "iperf3-server=${SERVER[veth]}" ;;
    user_hop) echo "iperf3-server=${SERVER[user_hop]},userhop=$USERHOP_PID" ;;
    unetback) echo "iperf3-server=${SERVER[unetback]},unetbackd=$DAEMON_PID,xensim=$XENSIM_PID,shim-g1=$(shim_pid g1)" ;;
    unetback-g2g) echo "iperf3-server=${SERVER[g2]},unetbackd=$DAEMON_PID,xensim=$XENSIM_PID,shim-g1=$(shim_pid g1),shim-g2=$(shim_pid g2)" ;;
  esac
}
client_ns() {
  case $1 in veth) echo "$P-v1" ;; user_hop) echo "$P-h1" ;; *) echo "$P-g1" ;; esac
}
server_addr() {
  case $1 in veth) echo 10.201.0.1 ;; user_hop) echo 10.202.0.1 ;; unetback) echo 10.203.0.1 ;; g2) echo 10.203.0.3 ;; esac
}

# The tests: name -> iperf3 client arguments (after -c ADDR). -R: the server sends.
TESTS=(tcp1-guest-to-host tcp1-host-to-guest tcp4-guest-to-host tcp4-host-to-guest
  udp64-guest-to-host udp64-host-to-guest udp1400-guest-to-host udp1400-host-to-guest)
G2G_TESTS=(tcp1-guest-to-guest udp64-guest-to-guest)
test_args() {
  local t=$1 a=(-t "$SECS")
  [[ $t == *host-to-guest ]] && a+=(-R)
  case $t in
    tcp1-*) a+=("${OMIT[@]}") ;;
    tcp4-*) a+=(-P 4 "${OMIT[@]}") ;;
    # 64-byte Ethernet frames: 14 + 20 + 8 + 18 bytes of payload + 4 FCS.
    udp64-*) a+=(-u -b 0 -l 18) ;;
    udp1400-*) a+=(-u -b 0 -l 1400) ;;
  esac
  echo "${a[@]}"
}

wait_all() {
  local pid
  for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

# measure PATH TEST ROUND [SERVER]: one run; a failure is retried once with a fresh server.
measure() {
  local path=$1 test=$2 rnd=$3 srv=${4:-$1}
  local ctl='' args _try pids
  [[ $path == unetback ]] && ctl=$CTL
  read -r -a args <<<"$(test_args "$test")"
  local prof=()
  if [[ -n $PROFILE_DIR && $path == unetback && $rnd == 1 ]] &&
    [[ $test == tcp1-guest-to-host || $test == tcp1-host-to-guest || $test == udp64-guest-to-host ]]; then
    local ppids
    ppids="$DAEMON_PID,$XENSIM_PID,$(shim_pid g1)"
    perf record -q -F 499 -g -o "$PROFILE_DIR/$test.data" -p "$ppids" -- sleep "$SECS" \
      >"$PROFILE_DIR/$test.record.log" 2>&1 &
    prof+=($!)
    perf record -q -e raw_syscalls:sys_enter -p "$ppids" -o "$PROFILE_DIR/$test.syscalls.data" \
      -- sleep "$SECS" >/dev/null 2>&1 &
    prof+=($!)
    PIDS+=("${prof[@]}")
  fi
  for _try in 1 2; do
    if [[ $srv == g2 ]]; then pids=$(pids_of unetback-g2g); else pids=$(pids_of "$path"); fi
    bpy run "$RESULTS" "$path" "$test" "$rnd" "$(client_ns "$path")" "$pids" "$ctl" "$WORLD" \
      $((SECS + 25)) -- -c "$(server_addr "$srv")" "${args[@]}" && { wait_all "${prof[@]}"; return 0; }
    restart_server "$srv"
  done
  wait_all "${prof[@]}"
  BROKEN+=("$path $test round $rnd: no traffic")
}

# Every long-lived process must still be there after each step.
check_alive() {
  local pid
  for pid in "$XENSIM_PID" "$DAEMON_PID" "$USERHOP_PID"; do
    kill -0 "$pid" 2>/dev/null || die "process $pid ($(basename "$(readlink "/proc/$pid/exe" 2>/dev/null || echo gone)")) died"
  done
  local g
  for g in "${GUESTS_UP[@]}"; do
    kill -0 "$(shim_pid "$g")" 2>/dev/null || die "netfront-shim of $g died (see $WORLD/guest-${GUEST_DOMID[$g]}.log)"
  done
}

# ---------------------------------------------------------------------------------------------
# The rounds: each test runs on the three paths back to back (the order rotates every round),
# so each ratio compares figures taken within seconds of each other.
ORDERS=("veth user_hop unetback" "user_hop unetback veth" "unetback veth user_hop")
for ((r = 1; r <= ROUNDS; r++)); do
  read -r -a order <<<"${ORDERS[$(((r - 1) % 3))]}"
  say "round $r/$ROUNDS (order: ${order[*]})"
  for t in "${TESTS[@]}"; do
    for p in "${order[@]}"; do measure "$p" "$t" "$r"; done
    check_alive
  done
  for t in "${G2G_TESTS[@]}"; do measure unetback "$t" "$r" g2; done
  check_alive
done
destroy_guest g1
destroy_guest g2
kill -TERM "${SERVER[g2]}" 2>/dev/null || true

# ---------------------------------------------------------------------------------------------
# Scaling with queues: one guest asking for N queues (unetbackd offers up to 4), N flows.
say "queue scaling: ${SCALE_QUEUES[*]}"
for q in "${SCALE_QUEUES[@]}"; do
  create_guest "gq$q" "$P-q$q" $((40 + q)) --queues "$q"
  qpids="iperf3-server=${SERVER[unetback]},unetbackd=$DAEMON_PID,xensim=$XENSIM_PID,shim=$(shim_pid "gq$q")"
  for t in "${QUEUE_TESTS[@]}"; do
    read -r -a args <<<"$(test_args "$t")"
    [[ $t == udp* ]] && args+=(-P "$q")
    bpy run "$RESULTS" "unetback-q$q" "$t" 1 "$P-q$q" "$qpids" "$CTL" "$WORLD" $((SECS + 25)) \
      -- -c 10.203.0.1 "${args[@]}" || { restart_server unetback; BROKEN+=("queues $q $t: no traffic"); }
  done
  check_alive
  destroy_guest "gq$q"
done

# ---------------------------------------------------------------------------------------------
# Scaling with guests (added one by one, kept), each with its own iperf3 server port on the
# host; and unetbackd's RSS with 1 and N vifs, idle and after traffic.
say "guest scaling: ${SCALE_GUESTS[*]}"
n_up=0
for n in "${SCALE_GUESTS[@]}"; do
  while ((n_up < n)); do
    n_up=$((n_up + 1))
    create_guest "s$n_up" "$P-s$n_up" $((100 + n_up))
    server "s$n_up" "$NS0" 10.203.0.1 $((5300 + n_up))
  done
  check_alive
  rss_idle=$(rss_kib)
  specs=()
  for ((i = 1; i <= n; i++)); do specs+=("$P-s$i,10.203.0.1,$((5300 + i))"); done
  bpy multi "$RESULTS" guests "$n" "$SECS" $((SECS + 30)) "${specs[@]}" ||
    BROKEN+=("guest scaling with $n guests: a guest had no traffic")
  check_alive
  bpy note "$RESULTS" "{\"kind\": \"rss\", \"vifs\": $n, \"rss_kib\": $rss_idle, \"rss_after_traffic_kib\": $(rss_kib)}"
done
bpy note "$RESULTS" "{\"kind\": \"rss\", \"vifs\": 0, \"rss_kib\": $RSS0}"

# ---------------------------------------------------------------------------------------------
ELAPSED=$((SECONDS - T0))
NOTES=()
((QUICK)) && NOTES+=("quick mode: ${ROUNDS} round(s) of ${SECS} s runs; scaling reduced to queues ${SCALE_QUEUES[*]} (${QUEUE_TESTS[*]}) and guests ${SCALE_GUESTS[*]}; figures are a smoke check, not a measurement")
((QUICK && ELAPSED > 180)) && NOTES+=("quick mode took ${ELAPSED} s, over its 3-minute budget: the machine is slow or loaded")
((${#DAEMON_ARGS[@]})) && NOTES+=("unetbackd ran with: ${DAEMON_ARGS[*]}")
NOTES+=("UDP figures are what one iperf3 sender and receiver (one syscall per datagram each) get through; compare sent_mpps with mpps in the JSON. The 1 Mpps target is also given as 1 / unetbackd CPU per packet")
NOTES+=("guest-to-guest ratios compare with the baselines' guest-to-host run (the kernel paths have one namespace pair)")
if [[ -n $SYSCALL_NOTE ]]; then
  NOTES+=("$SYSCALL_NOTE")
else
  NOTES+=("syscalls: perf stat -e raw_syscalls:sys_enter on each process of the path (every path's, so that the slower syscall entry while the tracepoint is on costs every path alike); wake-ups: voluntary + nonvoluntary context switches of unetbackd's threads (/proc/<pid>/task/*/status); both per packet moved (unetbackd's tx + rx packets)")
fi
NOTES+=("CPU s/GB: utime+stime from /proc/<pid>/stat of the iperf3 server and the path's processes (forwarder, or unetbackd + xensim + netfront-shim), plus the iperf3 client's rusage; kernel work done in softirq threads is not counted")
NOTES+=("machine: $(nproc) CPUs shared with other work, load average at start $(cut -d' ' -f1-3 /proc/loadavg); absolute figures are noisy, ratios are what to read")
META=$(python3 - "$QUICK" "$ROUNDS" "$SECS" "$ELAPSED" "$(uname -r)" "$(nproc)" "${#BROKEN[@]}" "${BROKEN[@]}" -- "${NOTES[@]}" <<'PY'
import json, sys
a = sys.argv[1:]
quick, rounds, secs, elapsed, kernel, ncpu, nb = a[:7]
rest = a[7:]
broken = rest[:int(nb)]
notes = rest[int(nb) + 1:]
print(json.dumps({"mode": "quick" if quick == "1" else "full", "rounds": int(rounds), "seconds": int(secs),
                  "elapsed_s": int(elapsed), "machine": {"kernel": kernel, "cpus": int(ncpu)},
                  "broken": broken, "notes": notes}))
PY
)
bpy report "$RESULTS" "$JSON_OUT" "$PLOT_OUT" "$META"
[[ -n $PROFILE_DIR ]] && cp "$RESULTS" "$PROFILE_DIR/results.jsonl"
say "done in ${ELAPSED} s"
if ((${#BROKEN[@]})); then
  for b in "${BROKEN[@]}"; do say "BROKEN: $b"; done
  exit 1
fi
exit 0
}
