"""Soak test (`tools/lab.sh soak`, which builds first): a xensim world with unetbackd in network
namespace PREFIX-dom0 (bridge ubsbr0, 10.98.0.1/24; PREFIX: ubs<pid>) and three guests running
iperf3 for the whole run -- guest1 -> host, host -> guest2 (-R), guest3 both ways (--bidir) --
while a fourth guest is created and destroyed (unetback-xl create/destroy) over and over.

It samples unetbackd every interval: RSS, open fds (/proc/PID/fd), the grant pages it has
mapped as it counts them (`unetback-ctl stats`: mapped_grant_pages) and the guests'
whole-memory views it holds (/proc/PID/maps: xensim's "-memory" memfds). The baseline is taken
once the three guests are up, idle, before the traffic and the churn; the final sample after
the churn stopped and the traffic ended. Fails if the fds or the mapped grant pages did not
return to the baseline, if RSS grew by more than the bound, if any iperf3 interval carried no
traffic, or if a create/destroy failed. Needs root. It ends only the processes it started and
deletes only the namespaces it made.

  python3 -m unetlab soak BUILD_DIR [--minutes N] [--interval S] [--rss-bound-mb M] [--churn-pause S]

--minutes N        traffic + churn duration (default 1; fractions such as 0.5 work)
--interval S       report interval in seconds (default 10)
--rss-bound-mb M   allowed RSS growth from the baseline to the end (default 48)
--churn-pause S    seconds the 4th guest stays up, and down, in each cycle (default 1)
"""
import argparse
import json
import os
import re
import sys
import threading
import time

from . import counters, iperf, procfs
from .world import LabError, World, main_guard

BRIDGE = "ubsbr0"
HOST_IP = "10.98.0.1"
STREAMS = {1: ("g1->host", []), 2: ("host->g2", ["-R"]), 3: ("g3 bidir", ["--bidir"])}


def sample(w):
    """(rss_kib, fds, grant_pages, view_pages) of unetbackd: RSS and fds from /proc; grant
    pages mapped (rings, in-flight zerocopy TX) as the daemon counts them (`stats`:
    mapped_grant_pages; xensim hands out mapped grants inside its whole-memory views, so
    /proc/PID/maps cannot show them); view pages: the guests' whole-memory views."""
    pid = w.daemon.pid
    s = counters.stats(w) or {}
    try:
        grants = int(s.get("mapped_grant_pages", -1))
    except (TypeError, ValueError):
        grants = -1
    try:
        return procfs.rss_kib(pid), procfs.fd_count(pid), grants, procfs.view_pages(pid)
    except (OSError, StopIteration):
        raise LabError("cannot sample unetbackd's /proc entries") from None


def vif_count(w):
    s = counters.stats(w)
    return "?" if s is None else str(len(s.get("vifs", [])))


def traffic_report(results):
    """The per-interval table (Gbit/s, receiver side per stream direction) and the per-stream
    mean and minimum: (lines for stdout, problems). results: {i: iperf3 JSON text or an
    exception}."""
    series, problems = {}, []
    for i, (name, _) in STREAMS.items():
        r = results.get(i)
        if isinstance(r, Exception) or r is None:
            problems.append(f"{name}: no iperf3 result ({r})")
            continue
        try:
            d = json.loads(r)
        except ValueError as e:
            problems.append(f"{name}: no iperf3 result ({e})")
            continue
        if "error" in d:
            problems.append(f"{name}: iperf3 error: {d['error']}")
        rows = iperf.intervals(d)
        series[name] = rows
        stalled = [t for t, g in rows if g == 0.0]
        if not rows or stalled:
            problems.append(f"{name}: traffic stopped (intervals ending at {stalled})")
    lines = ["%8s" % "t (s)" + "".join("%12s" % n for n in series)]
    n = max((len(r) for r in series.values()), default=0)
    for k in range(n):
        t = next((r[k][0] for r in series.values() if k < len(r)), 0)
        lines.append("%8.0f" % t + "".join("%12s" % ("%.2f" % r[k][1] if k < len(r) else "-")
                                           for r in series.values()))
    for name, rows in series.items():
        if rows:
            lines.append("%-10s mean %.2f Gbit/s, min %.2f" % (
                name, sum(g for _, g in rows) / len(rows), min(g for _, g in rows)))
    return lines, problems


class Churn(threading.Thread):
    """The 4th guest, created and destroyed until the deadline (or stop()); its log lines go
    to churn.log, the last one "cycles N failures F"."""

    def __init__(self, w, ns, deadline, pause):
        super().__init__(daemon=True)
        self.w, self.ns, self.deadline, self.pause = w, ns, deadline, pause
        self.stopping = threading.Event()
        self.last = ""

    def run(self):
        n = fail = 0
        with open(self.w.path("churn.log"), "w") as log:
            def note(msg):
                print(msg, file=log, flush=True)
            while time.monotonic() < self.deadline and not self.stopping.is_set():
                try:
                    g = self.w.create_guest("churn", self.ns, "10.98.0.50/24", "00:16:3e:00:98:50",
                                            BRIDGE)
                except LabError:
                    note(f"cycle {n}: create failed: {self.w.log('xl-churn.err').strip()}"
                         .replace("\n", " "))
                    fail += 1
                else:
                    if self.w.ping(self.ns, HOST_IP, count=1, check=False).returncode != 0:
                        note(f"cycle {n}: no ping")
                        fail += 1
                    self.stopping.wait(self.pause)
                    if not self.w.destroy_guest(g):
                        note(f"cycle {n}: destroy failed")
                        fail += 1
                n += 1
                self.stopping.wait(self.pause)
            self.last = f"cycles {n} failures {fail}"
            note(self.last)

    def stop(self):
        self.stopping.set()
        self.join(120)


def run(args):
    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces, TAPs, a bridge)")
    duration = max(10, int(round(args.minutes * 60)))
    interval = args.interval
    with World(args.build, "soak") as w:
        for b in ("xensim", "unetbackd", "xl", "ctl", "shim"):
            w.bin(b)
        churn = []  # the churn thread, stopped before the world's teardown
        try:
            rc = soak(w, args, duration, interval, churn)
        finally:
            for c in churn:
                c.stop()
        if rc:
            w.failed = True
    return rc


def soak(w, args, duration, interval, churn_out):
    w.say(f"world {w.world}; {duration} s of traffic and churn")
    ns0 = w.netns("dom0")
    w.start_xensim()
    w.bridge(ns0, BRIDGE, HOST_IP + "/24")
    w.start_daemon(ns0)
    w.say("unetbackd pid %d; before any guest: %d %d %d %d" % ((w.daemon.pid,) + sample(w)))

    for i in (1, 2, 3):
        ns = w.netns(f"g{i}")
        w.create_guest(f"guest{i}", ns, f"10.98.0.1{i}/24", f"00:16:3e:00:98:0{i}", BRIDGE)
        if w.ping(ns, HOST_IP, check=False).returncode != 0:
            raise LabError(f"guest{i} cannot ping the host")
    ns4 = w.netns("g4")
    w.say(f"3 guests up, vifs: {vif_count(w)}")
    time.sleep(1)
    b_rss, b_fds, b_pages, b_views = sample(w)
    b_fd_targets = procfs.fd_targets(w.daemon.pid)
    w.say(f"baseline (3 guests, idle): RSS {b_rss} KiB, {b_fds} fds, {b_pages} grant pages "
          f"mapped, {b_views} view pages")

    # Traffic: one iperf3 server per guest in dom0 (ports 5201..5203), clients in the guests.
    for i in STREAMS:
        iperf.server(w, ns0, HOST_IP, f"iperf-server-{i}.log", port=5200 + i)
    time.sleep(0.5)
    clients = {}
    for i, (_, mode) in STREAMS.items():
        clients[i] = w.spawn(f"{w.prefix}-g{i}",
                             ["iperf3", "-c", HOST_IP, "-p", str(5200 + i), "-t", str(duration),
                              "-i", str(interval), "-J"] + mode,
                             f"iperf-{i}.json", role="iperf3-client", err_log=f"iperf-{i}.err")

    churn = Churn(w, ns4, time.monotonic() + duration - 5, args.churn_pause)
    churn_out.append(churn)
    churn.start()

    print("%6s %10s %6s %11s %11s %6s" % ("t (s)", "RSS KiB", "fds", "grant pages", "view pages",
                                         "vifs"), file=sys.stderr, flush=True)
    t0 = time.monotonic()
    nxt = t0 + interval
    while churn.is_alive():
        # Sample on a fixed grid (sampling itself takes a moment under load).
        while time.monotonic() < nxt and churn.is_alive():
            time.sleep(0.5)
        nxt += interval
        if w.daemon.poll() is not None:
            raise LabError("unetbackd died")
        rss, fds, pages, views = sample(w)
        print("%6d %10d %6d %11d %11d %6s" % (time.monotonic() - t0, rss, fds, pages, views,
                                              vif_count(w)), file=sys.stderr, flush=True)
    churn.join()
    w.say(f"churn done: {churn.last}")
    failures = [line for line in w.log("churn.log", tail=100000).splitlines()
                if not line.startswith("cycles")]
    for line in failures[:5]:
        print(line, file=sys.stderr)
    rc = 0
    results = {}
    for i, p in clients.items():
        try:
            code = p.wait(duration + 60)
        except Exception as e:  # noqa: BLE001 - a client that hangs is a failed stream
            results[i] = e
            rc = 1
            continue
        if code != 0:
            w.say(f"iperf3 client {i} failed: {w.log(f'iperf-{i}.err', 300)}")
            rc = 1
        results[i] = w.log(f"iperf-{i}.json", tail=10 ** 8)
    time.sleep(2)  # the servers exit after their one test; the daemon settles
    e_rss, e_fds, e_pages, e_views = sample(w)
    # A vif the churn detached last may still be closing its descriptors: a leak stays, so
    # look again for up to 5 s before calling a difference one.
    settle_until = time.monotonic() + 5
    while (e_fds, e_pages) != (b_fds, b_pages) and time.monotonic() < settle_until:
        time.sleep(0.5)
        e_rss, e_fds, e_pages, e_views = sample(w)
    vifs = vif_count(w)

    lines, problems = traffic_report(results)
    for p in problems:
        print(f"[soak] {p}", file=sys.stderr)
    if problems:
        rc = 1
    print("\n".join(lines))
    print("\n%-28s %12s %12s" % ("unetbackd", "baseline", "end"))
    print("%-28s %12s %12s" % ("RSS (KiB)", b_rss, e_rss))
    print("%-28s %12s %12s" % ("open fds", b_fds, e_fds))
    print("%-28s %12s %12s" % ("grant pages mapped", b_pages, e_pages))
    print("%-28s %12s %12s" % ("guest memory view pages", b_views, e_views))
    print("%-28s %12s" % ("vifs at the end", vifs))
    print("%-28s %s" % ("churn", churn.last), flush=True)

    if e_fds != b_fds:
        e_fd_targets = procfs.fd_targets(w.daemon.pid)
        more = sorted(set(e_fd_targets.items()) - set(b_fd_targets.items()))
        gone = sorted(set(b_fd_targets.items()) - set(e_fd_targets.items()))
        w.say(f"fds did not return to the baseline ({b_fds} -> {e_fds}); new or changed: "
              f"{more[:10]}; gone: {gone[:10]}")
        rc = 1
    if e_pages != b_pages:
        w.say(f"mapped grant pages did not return to the baseline ({b_pages} -> {e_pages})")
        rc = 1
    if e_views != b_views:
        w.say(f"guest memory views did not return to the baseline ({b_views} -> {e_views})")
        rc = 1
    if e_rss - b_rss > args.rss_bound_mb * 1024:
        w.say(f"RSS grew by {(e_rss - b_rss) // 1024} MiB (bound {args.rss_bound_mb} MiB)")
        rc = 1
    if vifs != "3":
        w.say(f"expected 3 vifs at the end, found {vifs}")
        rc = 1
    m = re.fullmatch(r"cycles (\d+) failures 0", churn.last)
    if not m or int(m.group(1)) == 0:
        w.say(f"churn had failures or no cycles: {churn.last}")
        rc = 1
    if rc == 0:
        w.say(f"soak passed ({duration} s)")
    return rc


def main(argv):
    ap = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--minutes", type=float, default=1)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--rss-bound-mb", type=int, default=48)
    ap.add_argument("--churn-pause", type=float, default=1)
    args = ap.parse_args(argv)
    return main_guard("soak", lambda: run(args))
