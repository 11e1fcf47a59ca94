"""The unetback benchmark, run by `tools/lab.sh bench` after it has built the tree:
three paths between two network namespaces, measured side by side in one run, in alternating
rounds, every figure reported as a median and as a ratio against the kernel's own paths
measured in the same round.

  veth      iperf3 over a veth pair (the kernel's inter-namespace path)
  user_hop  TAP -> unetback-userhop (vnet_hdr, offloads, poll/read/write) -> TAP: the cost
            floor of any userspace backend
  unetback  guest <-> host through netfront-shim, the rings, xensim grant copies,
            unetbackd and its vif TAP on a bridge (and guest <-> guest over that bridge)

Then: unetback scaling with queues and with guests (aggregate, Jain's fairness index) and
unetbackd's memory per vif. Per unetback run: unetbackd's CPU, syscalls (perf stat,
raw_syscalls:sys_enter) and wake-ups (its threads' context switches) per packet moved, and its
CPU per GB against the user-hop forwarder's. Everything lives in namespaces named ubb-<pid>-*,
created here and deleted on exit, failure or Ctrl-C; only processes started here are ever
killed. One run of a path is measured in bench_run, the scaling in bench_scaling, and the
figures, table, JSON and plot are made in bench_report.

  python3 -m unetlab bench BUILD_DIR [--quick] [--json FILE] [--plot FILE.png] [--seconds N]
                                     [--rounds N] [--profile DIR] [--unetbackd-arg ARG]...
                                     [--no-syscall-count] [--tests T1,T2,...] [--no-scaling]
  python3 -m unetlab bench BUILD_DIR --experiments [--quick] [--json FILE] [--seconds N]
                                     [--only pending|coalesce|refill]

--experiments: instead, the three seed experiments on unetbackd's internal switch
(unetlab/experiments.py): the zerocopy pending limit with and without the copy fallback
(seed 000), full vs legacy RX coalescing VM->VM (seed 003), the shim's RX refill threshold
(seed 002); the JSON goes under "experiments".

--unetbackd-arg ARG: one more argument for unetbackd (repeat it), e.g. to compare a tunable:
  --unetbackd-arg --goodcopy-len --unetbackd-arg 65535
--profile DIR: in round 1, the unetback runs of tcp1 (both ways) and udp64 guest-to-host are
recorded with `perf record -g` (unetbackd, netfront-shim, xensim) and their syscalls with
`perf record -e raw_syscalls:sys_enter`, into DIR/<test>.data and DIR/<test>.syscalls.data,
with every run's record in DIR/results.jsonl. perf's own CPU time lowers those runs' figures.
--no-syscall-count: no perf stat during the runs (the syscall figures are left out): to see
what counting them costs the paths.
--tests T1,T2,...: only these tests (names as in the table, e.g. udp64-host-to-guest,
tcp1-guest-to-guest), and --no-scaling: no queue and guest scaling; for a quick A/B of one
path while working on it. The full bench (no --tests) is what docs/performance.md quotes.

Exit status: 0 all paths carried traffic (whatever the figures), 1 a path is broken (no
traffic, a process died, setup failed), 2 usage error. Low figures never fail the run.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

from . import experiments, perfstat, procfs
from .bench_report import report
from .bench_run import BRIDGE, Runner, say
from .bench_scaling import guest_scaling, queue_scaling
from .world import ROOT, LabError, World, main_guard

USAGE = ("usage: bench BUILD_DIR [--quick] [--json FILE] [--plot FILE.png] [--seconds N] "
         "[--rounds N] [--profile DIR] [--unetbackd-arg ARG]... [--no-syscall-count] "
         "[--tests T1,T2,...] [--no-scaling]")
TESTS = ["tcp1-guest-to-host", "tcp1-host-to-guest", "tcp4-guest-to-host", "tcp4-host-to-guest",
         "udp64-guest-to-host", "udp64-host-to-guest", "udp1400-guest-to-host",
         "udp1400-host-to-guest"]
G2G_TESTS = ["tcp1-guest-to-guest", "udp64-guest-to-guest"]
ORDERS = [["veth", "user_hop", "unetback"], ["user_hop", "unetback", "veth"],
          ["unetback", "veth", "user_hop"]]


def lab_deps(*packages):
    """tools/lab.sh deps PKG...: True if they are (now) installed."""
    return subprocess.run([os.path.join(ROOT, "tools", "lab.sh"), "deps"] + list(packages),
                          stdout=sys.stderr).returncode == 0


class Bench(Runner):
    """The whole bench over one World: the three paths, the rounds, the scaling, the report."""

    def run(self):
        w, a = self.w, self.args
        t_start = time.monotonic()
        say(f"work dir {w.dir}, namespaces {w.prefix}-*")
        with open(w.path("results.jsonl"), "w"):
            pass
        # Path 1: veth. "guest" namespace v1 (10.201.0.2), "host" v2 (10.201.0.1).
        v1, v2 = w.netns("v1"), w.netns("v2")
        w.ip(v1, "link", "add", "ubv0", "type", "veth", "peer", "name", "ubv1", "netns", v2)
        w.ip(v1, "addr", "add", "10.201.0.2/24", "dev", "ubv0")
        w.ip(v2, "addr", "add", "10.201.0.1/24", "dev", "ubv1")
        w.ip(v1, "link", "set", "ubv0", "up")
        w.ip(v2, "link", "set", "ubv1", "up")
        self.server("veth", v2, "10.201.0.1")

        # Path 2: user hop. TAP ubh0 in h1 (10.202.0.2) <-> unetback-userhop <-> TAP ubh1 in h2.
        h1, h2 = w.netns("h1"), w.netns("h2")
        self.userhop = w.spawn(None, [w.bin("userhop"), "--a", "ubh0", "--netns-a", h1, "--b",
                                      "ubh1", "--netns-b", h2], "userhop.log", role="userhop")
        w.wait_for_line("userhop.log", "userhop ready", 10, self.userhop)
        w.ip(h1, "addr", "add", "10.202.0.2/24", "dev", "ubh0")
        w.ip(h2, "addr", "add", "10.202.0.1/24", "dev", "ubh1")
        self.server("user_hop", h2, "10.202.0.1")

        # Path 3: unetback. xensim, unetbackd in d0 with bridge ubbr0 (10.203.0.1), guests made
        # by unetback-xl with the vif-unetback hotplug script, their shim TAPs in gN.
        ns0 = w.netns("d0")
        self.no_ipv6(ns0)
        w.start_xensim()
        w.bridge(ns0, BRIDGE, "10.203.0.1/24")
        # If br_netfilter is loaded on this machine, bridged frames would go through netfilter
        # hooks that neither baseline pays: turn them off (per-namespace sysctls, this one only).
        w.run(ns0, ["sh", "-c", 'for f in /proc/sys/net/bridge/bridge-nf-call-*; do '
                                '[ -w "$f" ] && echo 0 >"$f"; done; true'])
        w.start_daemon(ns0, ["--max-queues", "4", "--log-level", "warn"] + a.unetbackd_arg)

        rss0 = procfs.rss_kib(w.daemon.pid)
        t = time.monotonic()
        self.create_guest("g1", "g1", 2)
        self.create_guest("g2", "g2", 3)
        say("veth, user hop and unetback ready in %d s (2 guests in %d s)" % (
            time.monotonic() - t_start, time.monotonic() - t))
        if w.ping(f"{w.prefix}-g1", "10.203.0.1", check=False).returncode != 0:
            raise LabError("guest g1 cannot ping the host over unetback")
        if w.ping(h1, "10.202.0.1", check=False).returncode != 0:
            raise LabError("the user hop does not forward (ping failed)")
        if w.ping(v1, "10.201.0.1", count=1, check=False).returncode != 0:
            raise LabError("veth ping failed")
        self.server("unetback", ns0, "10.203.0.1")
        self.server("g2", f"{w.prefix}-g2", "10.203.0.3")

        # The rounds: each test runs on the three paths back to back (the order rotates every
        # round), so each ratio compares figures taken within seconds of each other.
        for r in range(1, a.rounds + 1):
            order = ORDERS[(r - 1) % 3]
            say(f"round {r}/{a.rounds} (order: {' '.join(order)})")
            for test in TESTS:
                if test not in a.tests:
                    continue
                for p in order:
                    self.measure(p, test, r)
                self.check_alive()
            for test in G2G_TESTS:
                if test not in a.tests:
                    continue
                self.measure("unetback", test, r, "g2")
            self.check_alive()
        self.destroy_guest("g1")
        self.destroy_guest("g2")
        self.stop_server("g2")

        # Then unetback's scaling with queues and with guests, and unetbackd's memory per vif;
        # its RSS with no vif was taken before the first guest was made.
        if not a.scaling:
            a.scale_queues, a.scale_guests = [], []
        queue_scaling(self)
        guest_scaling(self, ns0)
        self.note({"kind": "rss", "vifs": 0, "rss_kib": rss0})

        elapsed = int(time.monotonic() - t_start)
        report(self.records, a.json, a.plot, self.meta(elapsed), w.dir)
        if a.profile:
            shutil.copy(w.path("results.jsonl"), os.path.join(a.profile, "results.jsonl"))
        say(f"done in {elapsed} s")
        for b in self.broken:
            say(f"BROKEN: {b}")
        return 1 if self.broken else 0

    def meta(self, elapsed):
        a = self.args
        notes = []
        if a.quick:
            notes.append(f"quick mode: {a.rounds} round(s) of {a.seconds} s runs; scaling reduced "
                         f"to queues {' '.join(map(str, a.scale_queues))} ({' '.join(a.queue_tests)}) "
                         f"and guests {' '.join(map(str, a.scale_guests))}; figures are a smoke "
                         "check, not a measurement")
            if elapsed > 180:
                notes.append(f"quick mode took {elapsed} s, over its 3-minute budget: the machine "
                             "is slow or loaded")
        if a.unetbackd_arg:
            notes.append(f"unetbackd ran with: {' '.join(a.unetbackd_arg)}")
        notes.append("UDP figures are what one iperf3 sender and receiver (one syscall per "
                     "datagram each) get through; compare sent_mpps with mpps in the JSON. The 1 "
                     "Mpps target is also given as 1 / unetbackd CPU per packet")
        notes.append("guest-to-guest ratios compare with the baselines' guest-to-host run (the "
                     "kernel paths have one namespace pair)")
        if a.syscall_note:
            notes.append(a.syscall_note)
        else:
            notes.append("syscalls: perf stat -e raw_syscalls:sys_enter on each process of the "
                         "path (every path's, so that the slower syscall entry while the "
                         "tracepoint is on costs every path alike); wake-ups: voluntary + "
                         "nonvoluntary context switches of unetbackd's threads "
                         "(/proc/<pid>/task/*/status); both per packet moved (unetbackd's tx + "
                         "rx packets)")
        notes.append("CPU s/GB: utime+stime from /proc/<pid>/stat of the iperf3 server and the "
                     "path's processes (forwarder, or unetbackd + xensim + netfront-shim), plus "
                     "the iperf3 client's rusage; kernel work done in softirq threads is not "
                     "counted")
        ncpu = os.cpu_count()
        notes.append(f"machine: {ncpu} CPUs shared with other work, load average at start "
                     f"{a.load_at_start}; absolute figures are noisy, ratios are what to read")
        return {"mode": "quick" if a.quick else "full", "rounds": a.rounds, "seconds": a.seconds,
                "elapsed_s": elapsed, "machine": {"kernel": os.uname().release, "cpus": ncpu},
                "broken": self.broken, "notes": notes}


def parse_args(argv):
    # --unetbackd-arg takes any value, one that starts with "--" too.
    rest, daemon_args, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--unetbackd-arg":
            if i + 1 >= len(argv):
                raise SystemExit(USAGE)
            daemon_args.append(argv[i + 1])
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    ap = argparse.ArgumentParser(prog="bench", usage=USAGE)
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--seconds", type=int)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--profile")
    ap.add_argument("--no-syscall-count", dest="count_syscalls", action="store_false")
    ap.add_argument("--tests")
    ap.add_argument("--no-scaling", dest="scaling", action="store_false")
    a = ap.parse_args(rest)
    if a.tests is None:
        a.tests = TESTS + G2G_TESTS
    else:
        a.tests = [t for t in a.tests.split(",") if t]
        unknown = [t for t in a.tests if t not in TESTS + G2G_TESTS]
        if unknown or not a.tests:
            print(f"bench: --tests takes names from: {','.join(TESTS + G2G_TESTS)} "
                  f"(unknown: {','.join(unknown) or 'none given'})", file=sys.stderr)
            raise SystemExit(2)
    a.unetbackd_arg = daemon_args
    # --quick (a smoke run): one round of short runs and reduced scaling, < 3 minutes.
    if a.quick:
        a.seconds = a.seconds if a.seconds is not None else 2
        a.rounds = a.rounds if a.rounds is not None else 1
        a.scale_queues, a.scale_guests = [1, 2], [1, 4]
        a.queue_tests = ["tcp4-guest-to-host", "udp64-guest-to-host"]
    else:
        a.seconds = a.seconds if a.seconds is not None else 5
        a.rounds = a.rounds if a.rounds is not None else 3
        a.scale_queues, a.scale_guests = [1, 2, 4], [1, 4, 16]
        a.queue_tests = ["tcp4-guest-to-host", "tcp4-host-to-guest", "udp64-guest-to-host"]
    if a.seconds < 1 or a.rounds < 1:
        print("bench: --seconds and --rounds take positive integers", file=sys.stderr)
        raise SystemExit(2)
    # Full runs are long enough to leave TCP slow start out of the figures.
    a.omit = ["-O", "1"] if a.seconds >= 4 else []
    return a


def run(a):
    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces, TAPs, a bridge)")
    for t in ("iperf3", "ip"):
        if not shutil.which(t):
            raise LabError(f"{t} is missing (tools/lab.sh deps)")
    if a.profile:
        if not shutil.which("perf") and not lab_deps("linux-perf"):
            raise LabError("cannot install linux-perf")
        os.makedirs(a.profile, exist_ok=True)
    # Syscalls per packet come from perf's raw_syscalls:sys_enter tracepoint (counting only,
    # no samples). Without a working perf the run goes on and those figures are left out.
    perf, a.syscall_note = None, None
    if not a.count_syscalls:
        a.syscall_note = "--no-syscall-count: syscalls per packet not measured"
    else:
        if not shutil.which("perf"):
            lab_deps("linux-perf")
        perf, a.syscall_note = perfstat.usable()
    if a.syscall_note:
        say(a.syscall_note)
    if a.plot and not shutil.which("gnuplot") and not lab_deps("gnuplot-nox"):
        raise LabError("cannot install gnuplot-nox")
    with open("/proc/loadavg") as f:
        a.load_at_start = " ".join(f.read().split()[:3])
    with World(a.build, "bench", prefix=f"ubb-{os.getpid()}") as w:
        for b in ("xensim", "unetbackd", "xl", "ctl", "shim", "userhop"):
            w.bin(b)
        rc = Bench(w, a, perf).run()
        if rc:
            w.failed = True
    return rc


def main(argv):
    if "--experiments" in argv:
        return experiments.main([x for x in argv if x != "--experiments"])
    a = parse_args(argv)
    return main_guard("bench", lambda: run(a))
