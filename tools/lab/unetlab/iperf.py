"""iperf3: servers and clients in a world's namespaces, and the figures from its JSON (-J)."""
import json
import time

from .world import LabError


def parse(text):
    """iperf3 -J output -> dict; LabError if it is not JSON or reports an error."""
    try:
        d = json.loads(text)
    except ValueError:
        raise LabError(f"no JSON from iperf3: {text[-400:]}") from None
    if "error" in d:
        raise LabError(f"iperf3 error: {d['error']}")
    return d


def summary(d):
    """(Gbit/s the receiver got, the sender's retransmits) of a finished run."""
    e = d["end"]
    return e["sum_received"]["bits_per_second"] / 1e9, e["sum_sent"].get("retransmits", 0)


def intervals(d):
    """[(end of the interval in s, Gbit/s)] over the run; a --bidir run adds both directions."""
    rows = []
    for iv in d.get("intervals", []):
        s = iv["sum"]
        bidir = iv.get("sum_bidir_reverse")
        rate = s["bits_per_second"] + (bidir["bits_per_second"] if bidir else 0)
        rows.append((s["end"], rate / 1e9))
    return rows


def server(world, ns, addr, log, port=None, once=True):
    """An iperf3 server of the world (one test with once), bound to addr (None: any)."""
    argv = ["iperf3", "-s"] + (["-1"] if once else []) + (["-B", addr] if addr else [])
    if port is not None:
        argv += ["-p", str(port)]
    return world.spawn(ns, argv, log, role="iperf3-server")


def client(world, ns, addr, secs, args=(), port=None, out=None, timeout_extra=60):
    """Runs an iperf3 client to the end; returns the parsed JSON (and keeps it in out)."""
    argv = ["iperf3", "-c", addr, "-t", str(secs), "-J"] + (["-p", str(port)] if port else [])
    r = world.run(ns, argv + list(args), timeout=secs + timeout_extra, check=False)
    if out:
        with open(world.path(out), "w") as f:
            f.write(r.stdout)
    if r.returncode != 0:
        raise LabError(f"iperf3 {ns} -> {addr} {' '.join(args)} failed: "
                       f"{(r.stdout + r.stderr)[-400:]}")
    return parse(r.stdout)


def run_pair(world, server_ns, addr, client_ns, secs, args=(), port=None, out=None):
    """A one-test server, then the client against it: the client's JSON."""
    s = server(world, server_ns, addr, f"iperf-server-{port or 5201}.log", port)
    time.sleep(0.3)
    try:
        return client(world, client_ns, addr, secs, args, port, out)
    finally:
        try:
            s.wait(5)
        except Exception:  # noqa: BLE001 - a server still there is ended at teardown
            pass


def receiver_figures(j, udp):
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
