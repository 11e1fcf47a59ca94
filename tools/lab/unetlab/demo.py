"""The unetback demo (`tools/lab.sh demo`, which builds first): a xensim world, unetbackd in
network namespace PREFIX-dom0 with Linux bridge xenbr0 (10.99.0.1/24), and guests created by
unetback-xl (libxl's role) whose netfront-shim TAPs live in namespaces PREFIX-guest1/-guest2
(PREFIX: ubd<pid>). iperf3 guest->host, host->guest and guest->guest, then unetback-ctl's
figures. Everything this run made is torn down on exit, failure or Ctrl-C. Needs root.

  python3 -m unetlab demo BUILD_DIR [--seconds N] [--json FILE] [--one-guest]
"""
import argparse
import json
import os
import re
import sys
import time

from . import counters, iperf
from .world import LabError, World, main_guard

BRIDGE = "xenbr0"
HOST_IP = "10.99.0.1"
GUESTS = (("guest1", "10.99.0.2/24", "00:16:3e:00:00:01"),
          ("guest2", "10.99.0.3/24", "00:16:3e:00:00:02"))


def figures(stats, json_out, runs):
    """The "label|value" rows from the daemon's counters (ring slots per packet each way,
    grant-copy segments per copy call), and the JSON document if json_out."""
    if stats is None:
        return ["stats|unavailable (no JSON from unetback-ctl)"]
    t = counters.summed(stats)

    def r(a, b):
        return counters.ratio(t, a, b)

    def fmt(x):
        return "-" if x is None else "%.2f" % x
    rows = [
        "guest-TX slots/packet|%s  (%d packets)" % (fmt(r("tx_slots", "tx_packets")), t.get("tx_packets", 0)),
        "guest-RX slots/packet (minimum)|%s  (%s)  (%d packets)" % (
            fmt(r("rx_slots", "rx_packets")), fmt(r("rx_min_slots", "rx_packets")), t.get("rx_packets", 0)),
        "guest-TX copy segments/call|%s" % fmt(r("tx_copy_segments", "tx_copy_calls")),
        "guest-RX copy segments/call|%s" % fmt(r("rx_copy_segments", "rx_copy_calls")),
        "guest-TX zerocopy / copied|%d / %d" % (t.get("tx_zerocopy", 0), t.get("tx_copied", 0)),
        "guest-RX dropped (queue full)|%d" % t.get("rx_dropped_queue_full", 0),
    ]
    if json_out:
        segs = t.get("tx_copy_segments", 0) + t.get("rx_copy_segments", 0)
        calls = t.get("tx_copy_calls", 0) + t.get("rx_copy_calls", 0)
        out = {"runs": runs,
               "rx_slots_per_packet": r("rx_slots", "rx_packets"),
               "rx_min_slots_per_packet": r("rx_min_slots", "rx_packets"),
               "tx_slots_per_packet": r("tx_slots", "tx_packets"),
               "copy_segments_per_call": segs / calls if calls else None,
               "rx_copy_segments_per_call": r("rx_copy_segments", "rx_copy_calls"),
               "tx_copy_segments_per_call": r("tx_copy_segments", "tx_copy_calls"),
               "zerocopy_packets": t.get("tx_zerocopy", 0), "copied_packets": t.get("tx_copied", 0),
               "rx_dropped_queue_full": t.get("rx_dropped_queue_full", 0),
               "counters": t}
        with open(json_out, "w") as f:
            json.dump(out, f, indent=2)
    return rows


def ping_avg(text):
    """The average of ping's "rtt min/avg/max/mdev = a/b/c/d ms" line, or None."""
    m = re.search(r"= [0-9.]+/([0-9.]+)/", text)
    return m.group(1) if m else None


def run(args):
    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces, TAPs, a bridge)")
    n_guests = 1 if args.one_guest else 2
    with World(args.build, "demo") as w:
        for b in ("xensim", "unetbackd", "xl", "ctl", "shim"):
            w.bin(b)
        w.say(f"world {w.world}")
        ns0 = w.netns("dom0")
        w.start_xensim()
        w.say(f"xensim ready (pid {w.xensim.pid})")
        w.bridge(ns0, BRIDGE, HOST_IP + "/24")
        w.start_daemon(ns0)
        w.say(f"unetbackd running in {ns0} (pid {w.daemon.pid})")

        guests = []
        for name, addr, mac in GUESTS[:n_guests]:
            ns = w.netns(name)
            t0 = time.monotonic()
            g = w.create_guest(name, ns, addr, mac, BRIDGE, echo=True)
            guests.append(g)
            w.say(f"{name} created: {g.xl_out} in {int(time.monotonic() - t0)} s")
        print(w.run(ns0, [w.bin("xl"), "--world", w.world, "list"], check=False).stdout,
              end="", file=sys.stderr)

        g1 = guests[0]
        p = w.ping(g1.ns, HOST_IP, count=3, check=False)
        with open(w.path("ping.log"), "w") as f:
            f.write(p.stdout + p.stderr)
        if p.returncode != 0:
            raise LabError(f"guest1 cannot ping the host (see {w.path('ping.log')})")
        ping = ping_avg(p.stdout)
        w.say(f"guest1 -> host ping ok (avg {ping or ''} ms)")

        secs = args.seconds
        runs = []

        def measure(name, server_ns, addr, client_ns, extra=()):
            d = iperf.run_pair(w, server_ns, addr, client_ns, secs, extra, out=f"iperf-{name}.json")
            gbit, retr = iperf.summary(d)
            runs.append({"name": name, "gbit_s": gbit, "retransmits": retr})
            return "%.2f" % gbit, retr

        w.say(f"iperf3 guest1 -> host ({secs} s)")
        g2h = measure("guest-to-host", ns0, HOST_IP, g1.ns)
        w.say(f"iperf3 host -> guest1 ({secs} s)")
        h2g = measure("host-to-guest", ns0, HOST_IP, g1.ns, ["-R"])
        g2g = ("-", "-")
        if n_guests > 1:
            w.say(f"iperf3 guest1 -> guest2 through {BRIDGE} ({secs} s)")
            g2g = measure("guest-to-guest", guests[1].ns, guests[1].ip, g1.ns)

        text = w.ctl("stats")
        print(text.stdout + text.stderr, end="", file=sys.stderr)
        rows = figures(counters.stats(w), args.json, runs)

        print("\n%-34s %s" % (f"unetback demo (xensim, {secs} s runs)", "result"))
        print("%-34s %s" % ("guest1 -> host  (iperf3)", "%s Gbit/s, %s retransmits" % g2h))
        print("%-34s %s" % ("host -> guest1  (iperf3 -R)", "%s Gbit/s, %s retransmits" % h2g))
        print("%-34s %s" % (f"guest1 -> guest2 via {BRIDGE}", "%s Gbit/s, %s retransmits" % g2g))
        print("%-34s %s" % ("ping guest1 -> host (avg)", f"{ping or '?'} ms"))
        for row in rows:
            k, v = row.split("|", 1)
            print("%-34s %s" % (k, v))
        print(flush=True)
    return 1 if w.failed else 0


def main(argv):
    ap = argparse.ArgumentParser(prog="demo", description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--seconds", "--time", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--one-guest", action="store_true")
    args = ap.parse_args(argv)
    return main_guard("demo", lambda: run(args))
