"""The benchmark's figures: one run's record from iperf3's JSON, CPU time and unetbackd's
counters; the report over every record (medians, per-round ratios, targets, table, JSON, plot)."""
import json
import os
import subprocess
import sys

from .stats import med, per

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
        # Under Xen, what gntdev makes of the copies: GNTTABOP_copy ops (one per local page a
        # segment touches) per segment, and hypercalls (16 ops each) per packet.
        "rx_copy_ops_per_segment": per(d.get("rx_copy_ops", 0), d.get("rx_copy_segments", 0)),
        "tx_copy_ops_per_segment": per(d.get("tx_copy_ops", 0), d.get("tx_copy_segments", 0)),
        "rx_copy_hypercalls_per_packet": per(d.get("rx_copy_hypercalls", 0), d.get("rx_packets", 0)),
        "tx_copy_hypercalls_per_packet": per(d.get("tx_copy_hypercalls", 0), d.get("tx_packets", 0)),
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


PATHS = ["veth", "user_hop", "unetback"]


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


def report(recs, json_out, plot_out, meta, work):
    """The benchmark's JSON (json_out), table (stdout) and plot (plot_out) from its records:
    "run" (one iperf3 run of a path), "guests" (guest scaling), "rss" (memory)."""
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
    # Per vif: between the fewest and the most vifs with guests (the record with no vif, taken
    # before any guest, is the daemon alone).
    vifs = sorted(k for k in mem if k >= 1)
    if len(vifs) >= 2:
        lo, hi = vifs[0], vifs[-1]
        memory["kib_per_vif_idle"] = (mem[hi]["rss_kib"] - mem[lo]["rss_kib"]) / (hi - lo)
        if mem[hi].get("rss_after_traffic_kib") and mem[lo].get("rss_after_traffic_kib"):
            memory["kib_per_vif_after_traffic"] = (
                mem[hi]["rss_after_traffic_kib"] - mem[lo]["rss_after_traffic_kib"]) / (hi - lo)
        memory["compared"] = [lo, hi]
        for key in ("idle_wakeups_per_s", "pss_kib", "uss_kib", "fds", "threads"):
            if mem[hi].get(key) is not None and mem[lo].get(key) is not None:
                memory[key + "_per_idle_vif"] = (mem[hi][key] - mem[lo][key]) / (hi - lo)

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
    print("unetback per packet (medians)  %-8s %-8s %-9s %-9s %-9s %-9s %-9s %-9s %-8s %-8s %-8s %s" % (
        "rxslot", "(min)", "rxseg/cp", "txseg/cp", "rxhc/p", "txhc/p", "rxntf/p", "txntf/p", "us/pkt",
        "sys/pkt", "wake/pkt", "zerocopy/copied"))
    for t in tests:
        u = figs[t].get("unetback", {}).get("unetback")
        if not u:
            continue
        print("  %-28s %-8s %-8s %-9s %-9s %-9s %-9s %-9s %-9s %-8s %-8s %-8s %s/%s" % (
            t, fmt(u.get("rx_slots_per_packet")), fmt(u.get("rx_min_slots_per_packet")),
            fmt(u.get("rx_copy_segments_per_call"), "%.1f"), fmt(u.get("tx_copy_segments_per_call"), "%.1f"),
            fmt(u.get("rx_copy_hypercalls_per_packet"), "%.3f"),
            fmt(u.get("tx_copy_hypercalls_per_packet"), "%.3f"),
            fmt(u.get("rx_notify_sent_per_packet"), "%.3f"), fmt(u.get("tx_notify_sent_per_packet"), "%.3f"),
            fmt(u.get("unetbackd_us_per_packet"), "%.1f"), fmt(u.get("unetbackd_syscalls_per_packet"), "%.3f"),
            fmt(u.get("unetbackd_wakeups_per_packet"), "%.3f"),
            fmt(u.get("tx_zerocopy"), "%.0f"), fmt(u.get("tx_copied"), "%.0f")))
    print("  (rxslot: RX ring slots per packet, (min) the least possible; seg/cp: grant-copy segments"
          " per call; hc/p: grant-copy hypercalls per packet as Linux's gntdev would issue them"
          " (16 ops each, an op per local page a segment touches); ntf/p: notifications sent per packet; us/pkt: unetbackd CPU per packet moved;"
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
        idle = [(k, v) for k, v in sorted(mem.items()) if v.get("idle_wakeups_per_s") is not None]
        if idle:
            print("unetbackd with idle guests: " + ", ".join(
                "%d vif(s) %.1f wake-ups/s, PSS %d KiB, USS %d KiB, %d fds, %d threads" % (
                    k, v["idle_wakeups_per_s"], v["pss_kib"], v["uss_kib"], v["fds"], v["threads"])
                for k, v in idle))
        if "idle_wakeups_per_s_per_idle_vif" in memory:
            print("  per idle vif: %.2f wake-ups/s, %.0f KiB PSS, %.0f KiB USS, %.1f fds, %.1f threads" % (
                memory["idle_wakeups_per_s_per_idle_vif"], memory["pss_kib_per_idle_vif"],
                memory["uss_kib_per_idle_vif"], memory["fds_per_idle_vif"],
                memory["threads_per_idle_vif"]))
    print()
    print("targets (reported, not enforced):")
    for t in targets:
        state = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        v = t["value"]
        print("  %-62s %-8s goal %-6s %s" % (t["target"], fmt(v, "%.3f") if isinstance(v, float) else v, t["goal"], state))
    for n in meta["notes"]:
        print("note: " + n)

    if plot_out:
        write_plot(figs, tests, plot_out, meta, work)
    return 0



def write_plot(figs, tests, plot_out, meta, d):
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
set yrange [0:*]
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
