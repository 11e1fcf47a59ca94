"""The seed experiments of issue 7 on unetbackd's internal switch (tools/lab.sh bench --experiments).

  pending   seed 000 (vhost_net 2017): guest A sends a 1-byte-payload UDP flow to the host (through
            the switch's uplink TAP) and a 1400-byte flow to guest B, which takes only
            --rx-rate packets a second. Both flows' packet rates alone, then together, with the
            pending limit falling back to copies (zerocopy-fallback=1) and stalling (=0); and TCP
            with 1, 10 and 100 flows A -> C both ways, with the share of A's packets that went
            zerocopy.
  coalesce  seed 003 (Linux netback 2015): A sends Linux-like slot chains (a header slot, then
            odd-offset frags: netfront-shim --tx-frags) to C over the switch; rx-coalesce=full vs
            legacy: data slots per packet, packets laid into more than 18 slots (a Linux netfront
            drops those), TCP throughput.
  refill    seed 002 (virtio-net 2015): a UDP stream from the host to a guest whose shim re-posts
            RX buffers at min(budget, ring)/2 ("early") vs once half the ring is free
            ("half_ring"): packets lost, throughput.
  scenarios the figures the functional scenarios measure but do not judge (FIGURE lines of the
            integration, root-netns, e2e and hostile suites: stream rates, outages, waits
            behind floods, shares; unetlab.scenario_figures), from one run of those suites.

Every world (unetlab.World: xensim, unetbackd with switch sw0 and uplink TAP usw0, guests made
by unetback-xl with bridge=unetback:sw0) lives in network namespaces named ubx<pid><tag>-*,
created here and deleted on exit; only processes started here are ended, by PID.

  python3 -m unetlab experiments BUILD_DIR [--seconds N] [--quick] [--json FILE]
                                           [--only pending|coalesce|refill|scenarios]

Exit status: 0 every experiment ran (whatever the figures), 1 something broke, 2 usage.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from . import counters, iperf, scenario_figures, udpflow
from .world import LabError, World, main_guard

SUBNET = "10.210.0"
HOST_IP = SUBNET + ".1"
SLOW_RX_PPS = 100   # guest B in the pending experiment (the seed's 1 Mbit netem queue)
# The coalesce experiment's sender frags: a TSO frame of 64 KiB must still fit netback's 18 TX
# slots in pieces of this size (>= 3852), each piece at an odd offset.
TX_FRAG_SIZE = 3900
# Senders run this long before the receivers count: the slow guest's ring (256 packets) and
# queue (512 KiB) hold 6 s of its 100 packets/s, full of the previous run's packets at first.
WARMUP_S = 8


class Broken(LabError):
    pass


class SwitchWorld(World):
    """xensim + unetbackd (switch sw0, uplink usw0 at HOST_IP) + guests on the switch."""

    def __init__(self, build, tag, daemon_args):
        super().__init__(build, "experiments", prefix=f"ubx{os.getpid()}{tag}",
                         keep=os.environ.get("UNETBACK_KEEP_EXPERIMENTS") is not None,
                         quiet_teardown=True)
        self.daemon_args = daemon_args

    def __enter__(self):
        super().__enter__()
        try:
            self.ns0 = self.netns("d0")
            self.start_xensim()
            self.start_daemon(self.ns0, ["--log-level", "warn", "--switch-uplink", "sw0=usw0"]
                              + self.daemon_args, wait_s=10)
            self.ip(self.ns0, "addr", "add", HOST_IP + "/24", "dev", "usw0")
            self.ip(self.ns0, "link", "set", "usw0", "up")
        except BaseException as e:
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def guest(self, n, shim_args=()):
        name, ip = f"g{n}", f"{SUBNET}.{10 + n}"
        g = self.create_guest(name, self.netns(name), ip + "/24", f"00:16:3e:aa:00:{n:02x}",
                              "unetback:sw0", shim_args=shim_args)
        return g

    def ping_from(self, g, ip):
        if self.ping(g.ns, ip, check=False).returncode != 0:
            raise Broken(f"{g.name} cannot ping {ip}")

    def counters(self, g):
        """The vif's counters, summed over its queues."""
        s = counters.stats(self, f"{g.domid}/0")
        if s is None:
            raise Broken(f"no stats for {g.name}")
        return counters.summed(s)


def say(msg):
    print(f"[experiments] {msg}", file=sys.stderr, flush=True)


def flows(world, secs, specs, warmup=WARMUP_S):
    """Runs UDP flows at once, each {from: guest-or-None(host), to_ns, ip, port, size}. The
    senders start first; after WARMUP_S (a slow receiver's queue full, the pending limit
    reached) the receivers count over the same `secs`-second window. Each run uses ports of
    its own (a receiver must not count a previous run's late packets). Returns the receivers'
    reports."""
    def start_senders():
        return [world.spawn(s["from"].ns if s["from"] else world.ns0,
                            udpflow.send_argv(world, f"{s['ip']}:{s['port']}", s["size"],
                                              warmup + secs + 1, s.get("pps")),
                            f"send-{s['port']}-{time.monotonic_ns()}.log") for s in specs]

    def start_receivers():
        out = []
        for s in specs:
            log = f"recv-{s['port']}-{time.monotonic_ns()}.json"
            out.append((world.spawn(s["to_ns"], udpflow.recv_argv(world, s["port"], secs), log), log))
        return out

    if warmup > 0:
        senders = start_senders()
        time.sleep(warmup)
        receivers = start_receivers()
    else:
        # Receivers first: their sequence-number loss count then covers the whole stream.
        receivers = start_receivers()
        time.sleep(0.3)
        senders = start_senders()
    reports = [udpflow.wait_report(world, p, log) for p, log in receivers]
    for p in senders:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    return reports


def iperf_tcp(world, g_from, g_to, secs, parallel, port):
    iperf.server(world, g_to.ns, None, f"iperf-s-{port}.log", port=port)
    time.sleep(0.5)
    try:
        d = iperf.client(world, g_from.ns, g_to.ip, secs, ["-P", str(parallel)], port=port)
    except LabError as e:
        raise Broken(f"iperf3 -P {parallel} failed: {e}") from None
    return iperf.summary(d)[0]


def experiment_pending(build, secs):
    out = {}
    port = 6000
    tcp = {}
    for mode, flag in (("fallback", "1"), ("stall", "0")):
        say(f"pending: zerocopy-fallback={flag}")
        with SwitchWorld(build, "p" + flag, ["--zerocopy-fallback", flag]) as w:
            a = w.guest(1)
            b = w.guest(2, ["--rx-rate", str(SLOW_RX_PPS)])
            c = w.guest(3)
            for ip in (b.ip, c.ip, HOST_IP):
                w.ping_from(a, ip)
            small = {"from": a, "to_ns": w.ns0, "ip": HOST_IP, "size": 1}
            large = {"from": a, "to_ns": b.ns, "ip": b.ip, "size": 1400}
            if mode == "fallback":
                port += 2
                out["small_alone_pps"] = flows(w, secs, [dict(small, port=port)])[0]["pps"]
                out["large_alone_pps"] = flows(w, secs, [dict(large, port=port + 1)])[0]["pps"]
            port += 2
            before = w.counters(a)
            s, l = flows(w, secs, [dict(small, port=port), dict(large, port=port + 1)])
            after = w.counters(a)
            out[f"small_with_{mode}_pps"] = s["pps"]
            out[f"large_with_{mode}_pps"] = l["pps"]
            out[f"{mode}_tx_stalls"] = after["tx_stalls"] - before["tx_stalls"]
            out[f"{mode}_tx_copy_for_limit"] = after["tx_copy_for_limit"] - before["tx_copy_for_limit"]
            tcp[mode] = {}
            for n in (1, 10, 100):
                port += 1
                before = w.counters(a)
                gbit = iperf_tcp(w, a, c, secs, n, 5400 + port % 500)
                after = w.counters(a)
                zc = after["tx_zerocopy"] - before["tx_zerocopy"]
                cp = after["tx_copied"] - before["tx_copied"]
                tcp[mode][str(n)] = {"gbit_s": round(gbit, 3),
                                     "zerocopy_share": round(zc / (zc + cp), 3) if zc + cp else 0}
    out["tcp"] = tcp
    return out


def experiment_coalesce(build, secs):
    out = {}
    for mode in ("full", "legacy"):
        say(f"coalesce: rx-coalesce={mode}")
        with SwitchWorld(build, "c" + mode[0], ["--rx-coalesce", mode]) as w:
            a = w.guest(1, ["--tx-frags", str(TX_FRAG_SIZE)])
            c = w.guest(3)
            w.ping_from(a, c.ip)
            before = w.counters(c)
            gbit = iperf_tcp(w, a, c, secs, 1, 5301)
            after = w.counters(c)
            d = {k: after[k] - before[k] for k in after}
            data_slots = d["rx_slots"] - d["rx_extras"]
            out[mode] = {"slots_per_packet": round(data_slots / d["rx_packets"], 3) if d["rx_packets"] else 0,
                         "min_slots_per_packet": round((d["rx_min_slots"] - d["rx_extras"]) / d["rx_packets"], 3)
                         if d["rx_packets"] else 0,
                         "packets": d["rx_packets"],
                         "dropped": d["rx_over_18_slots"],
                         "gbit_s": round(gbit, 3)}
    return out


def experiment_refill(build, secs):
    """The host streams 1400-byte UDP packets to a guest, first unpaced (the guest's capacity),
    then paced at 80 % of it, where the refill rule decides whether buffers run out."""
    out = {}
    say("refill: early vs half_ring")
    with SwitchWorld(build, "r", []) as w:
        port = 6100
        for n, (key, rule) in enumerate((("early", "early"), ("half_ring", "half-ring")), start=1):
            g = w.guest(n, ["--rx-refill", rule])
            w.ping_from(g, HOST_IP)
            res = {}
            for label, pps in (("unpaced", None), ("paced", "capacity")):
                port += 1
                spec = {"from": None, "to_ns": g.ns, "ip": g.ip, "port": port, "size": 1400}
                if pps == "capacity":
                    spec["pps"] = int(0.8 * out.get("capacity_pps", res["unpaced"]["pps"]))
                    out.setdefault("capacity_pps", res["unpaced"]["pps"])
                r = flows(w, secs, [spec], warmup=0)[0]
                res[label] = {"lost": r.get("lost", 0), "received": r["packets"], "pps": r["pps"],
                              "gbit_s": round(r["bytes"] * 8 / r["seconds"] / 1e9, 3)
                              if r["seconds"] else 0}
            out[key] = dict(res["paced"], unpaced=res["unpaced"])
        out["paced_pps"] = int(0.8 * out["capacity_pps"])
    return out


def main(argv):
    ap = argparse.ArgumentParser(prog="experiments", description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--seconds", type=int)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--only", choices=("pending", "coalesce", "refill", "scenarios"))
    args = ap.parse_args(argv)
    return main_guard("experiments", lambda: run(args))


def run(args):
    if os.geteuid() != 0:
        say("needs root (network namespaces, TAPs)")
        return 1
    secs = args.seconds or (2 if args.quick else 5)
    build = os.path.abspath(args.build)
    results, broken = {}, []
    for name, fn in (("pending", experiment_pending), ("coalesce", experiment_coalesce),
                     ("refill", experiment_refill),
                     ("scenarios", lambda b, _secs: scenario_figures.collect(b, say=say))):
        if args.only and args.only != name:
            continue
        try:
            results[name] = fn(build, secs)
        except (LabError, subprocess.SubprocessError, OSError, KeyError, ValueError) as e:
            broken.append(f"{name}: {e}")
            say(f"{name} broke: {e}")

    p = results.get("pending")
    if p:
        print(f"\npending limit (seed 000), UDP packets/s received; guest B takes {SLOW_RX_PPS}/s")
        print(f"  {'':28}{'small (1 B) to host':>22}{'large (1400 B) to B':>22}")
        print(f"  {'alone':28}{p['small_alone_pps']:>22.0f}{p['large_alone_pps']:>22.0f}")
        print(f"  {'together, fallback (copy)':28}{p['small_with_fallback_pps']:>22.0f}"
              f"{p['large_with_fallback_pps']:>22.0f}")
        print(f"  {'together, stall':28}{p['small_with_stall_pps']:>22.0f}"
              f"{p['large_with_stall_pps']:>22.0f}")
        print("  TCP A -> C, Gbit/s (zerocopy share of A's packets)")
        for mode in ("fallback", "stall"):
            row = "  ".join(f"{n} flows {v['gbit_s']:.2f} ({v['zerocopy_share']:.2f})"
                            for n, v in p["tcp"][mode].items())
            print(f"    {mode:9} {row}")
    c = results.get("coalesce")
    if c:
        print(f"\nRX coalescing (seed 003), VM->VM, sender frags of {TX_FRAG_SIZE} B at odd offsets")
        for mode in ("full", "legacy"):
            v = c[mode]
            print(f"  {mode:7} slots/packet {v['slots_per_packet']:.2f} (minimum "
                  f"{v['min_slots_per_packet']:.2f}), >18 slots {v['dropped']} of {v['packets']}, "
                  f"{v['gbit_s']:.2f} Gbit/s")
    r = results.get("refill")
    if r:
        print(f"\nshim RX refill threshold (seed 002), host -> guest UDP 1400 B paced at "
              f"{r['paced_pps']} packets/s (80 % of the early rule's unpaced {r['capacity_pps']:.0f})")
        for k in ("early", "half_ring"):
            print(f"  {k:10} lost {r[k]['lost']} of {r[k]['lost'] + r[k]['received']}, "
                  f"{r[k]['gbit_s']:.3f} Gbit/s (unpaced: lost {r[k]['unpaced']['lost']}, "
                  f"{r[k]['unpaced']['gbit_s']:.3f} Gbit/s)")
    sc = results.get("scenarios")
    if sc:
        print("\nfigures of the functional scenarios (measured, not judged)")
        print(scenario_figures.report(sc))
    if args.json:
        data = {}
        if os.path.exists(args.json):
            with open(args.json) as f:
                try:
                    data = json.load(f)
                except ValueError:
                    data = {}
        data["experiments"] = results
        data.setdefault("experiments_seconds", secs)
        if broken:
            data["experiments_broken"] = broken
        with open(args.json, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        print(f"json: {args.json}")
    return 1 if broken else 0

