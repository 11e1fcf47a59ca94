"""unetback's scaling, measured after the bench's rounds: with queues (one guest asking for N
queues, the queue tests run on it) and with guests (added one by one and kept, one
single-stream TCP run per guest at once: aggregate, Jain's fairness index, min/max); and, with
each number of guests, unetbackd's memory per vif (RSS idle and after traffic, PSS, USS), its
fds, threads and idle wake-ups. How many queues and guests depends on the mode (bench's
parse_args). Each function takes the Runner (bench_run) and notes its figures as its records.
"""
import json
import subprocess
import time

from . import procfs
from .bench_run import say, test_args
from .stats import jain, min_over_max

IDLE_SETTLE_S = 3  # past a queue's 2 s housekeeping tail after its last work
IDLE_WINDOW_S = 5


def queue_scaling(b):
    """One guest asking for N queues (unetbackd offers up to 4), for each N in turn."""
    w, a = b.w, b.args
    say(f"queue scaling: {' '.join(map(str, a.scale_queues))}")
    for q in a.scale_queues:
        name = f"gq{q}"
        b.create_guest(name, f"q{q}", 40 + q, ["--queues", str(q)])
        qpids = {"iperf3-server": b.servers["unetback"].pid, "unetbackd": w.daemon.pid,
                 "xensim": w.xensim.pid, "shim": b.shim(name)}
        for test in a.queue_tests:
            args = test_args(test, a.seconds, a.omit)
            if test.startswith("udp"):
                args += ["-P", str(q)]
            if not b.run_one(f"unetback-q{q}", test, 1, f"q{q}", qpids, True,
                             a.seconds + 25, ["-c", "10.203.0.1"] + args):
                b.restart_server("unetback")
                b.broken.append(f"queues {q} {test}: no traffic")
        b.check_alive()
        b.destroy_guest(name)


def guest_scaling(b, ns0):
    """Guests added one by one and kept, each with its own iperf3 server port on the host in
    namespace ns0; and unetbackd's RSS with N vifs, idle and after traffic."""
    w, a = b.w, b.args
    say(f"guest scaling: {' '.join(map(str, a.scale_guests))}")
    n_up = 0
    for n in a.scale_guests:
        while n_up < n:
            n_up += 1
            b.create_guest(f"s{n_up}", f"s{n_up}", 100 + n_up)
            b.server(f"s{n_up}", ns0, "10.203.0.1", 5300 + n_up)
        b.check_alive()
        rss_idle = procfs.rss_kib(w.daemon.pid)
        idle = idle_sample(w.daemon.pid)
        specs = [(f"{w.prefix}-s{i}", "10.203.0.1", 5300 + i) for i in range(1, n + 1)]
        if not multi(b, "guests", n, a.seconds, a.seconds + 30, specs):
            b.broken.append(f"guest scaling with {n} guests: a guest had no traffic")
        b.check_alive()
        b.note({"kind": "rss", "vifs": n, "rss_kib": rss_idle,
                "rss_after_traffic_kib": procfs.rss_kib(w.daemon.pid), **idle})


def multi(b, kind, n, secs, timeout, specs):
    """Concurrent single-stream TCP, one per guest: [(ns, addr, port)]."""
    procs = []
    for ns, addr, port in specs:
        cmd = b.w.host.wrap(ns, ["iperf3", "-J", "--connect-timeout", "3000", "-c", addr,
                                 "-p", str(port), "-t", str(secs)])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
        b.w.procs.append((p, "iperf3-client"))
        procs.append((ns, p))
    rates, errors = [], []
    for ns, p in procs:
        try:
            stdout, _ = p.communicate(timeout=float(timeout))
            e = json.loads(stdout)["end"]
            rates.append(e["sum_received"]["bits_per_second"] / 1e9)
        except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as ex:
            p.kill()
            p.communicate()
            rates.append(0.0)
            errors.append("%s: %s" % (ns, ex))
    agg = sum(rates)
    rec = {"kind": kind, "n": int(n), "per_guest_gbit_s": rates, "aggregate_gbit_s": agg,
           "jain_index": jain(rates), "min_over_max": min_over_max(rates),
           "errors": errors, "ok": all(r > 0 for r in rates)}
    b.note(rec)
    say("  %d guest(s): %.2f Gbit/s aggregate, Jain %.3f, min/max %.2f%s" % (
        int(n), agg, rec["jain_index"], rec["min_over_max"],
        "" if rec["ok"] else " FAILED " + "; ".join(errors)))
    return rec["ok"]


def idle_sample(pid):
    """What unetbackd costs while its guests are idle: wake-ups per second (context
    switches of all its threads over IDLE_WINDOW_S), PSS and USS, fds, threads."""
    time.sleep(IDLE_SETTLE_S)  # a measurement window, not a synchronisation
    before = procfs.ctxt_switches(pid)
    time.sleep(IDLE_WINDOW_S)
    delta = procfs.ctxt_delta(before, procfs.ctxt_switches(pid))
    mem = procfs.memory_kib(pid)
    return {"idle_wakeups_per_s": None if delta is None else sum(delta) / IDLE_WINDOW_S,
            "pss_kib": mem["pss"], "uss_kib": mem["uss"], "fds": procfs.fd_count(pid),
            "threads": procfs.thread_count(pid)}
