"""One measured iperf3 run on one of the bench's paths (veth, user hop, unetback), and what the
runs stand on: the persistent iperf3 servers, the guests on the bridge, the check that every
long-lived process is still there.

A run records the CPU time of every process of its path (/proc/<pid>/stat, and the iperf3
client's rusage once it is reaped), their syscalls (perf stat, when it works), iperf3's
receiver figures and, on the unetback paths, unetbackd's counters (unetback-ctl --json stats)
and its threads' context switches before and after; every record goes to results.jsonl in
the world's directory as it is taken. A failed run is retried once with a fresh server. With
--profile, round 1's unetback runs of the PROFILED tests are also recorded by perf record
(call graphs and syscalls).
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from . import counters, iperf, perfstat, procfs
from .bench_report import unetback_figures
from .world import LabError

BRIDGE = "ubbr0"
PROFILED = ("tcp1-guest-to-host", "tcp1-host-to-guest", "udp64-guest-to-host")


def say(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def test_args(test, secs, omit):
    """iperf3 client arguments (after -c ADDR) of a test. -R: the server sends."""
    a = ["-t", str(secs)]
    if test.endswith("host-to-guest"):
        a.append("-R")
    if test.startswith("tcp1-"):
        a += omit
    elif test.startswith("tcp4-"):
        a += ["-P", "4"] + omit
    elif test.startswith("udp64-"):
        # 64-byte Ethernet frames: 14 + 20 + 8 + 18 bytes of payload + 4 FCS.
        a += ["-u", "-b", "0", "-l", "18"]
    elif test.startswith("udp1400-"):
        a += ["-u", "-b", "0", "-l", "1400"]
    return a


class Runner:
    """The bench's servers, guests and runs over one World; Bench adds the whole run to it."""

    def __init__(self, w, args, perf):
        self.w, self.args, self.perf = w, args, perf
        self.records = []
        self.broken = []
        self.servers = {}   # name -> Popen
        self.server_spec = {}
        self.guests = {}    # name -> Guest
        self.userhop = None

    # ---- records ---------------------------------------------------------------------------

    def note(self, rec):
        self.records.append(rec)
        with open(self.w.path("results.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")

    # ---- servers ---------------------------------------------------------------------------

    def server(self, name, ns, addr, port=5201):
        """A persistent iperf3 server (one test at a time), remembered for a restart."""
        self.server_spec[name] = (ns, addr, port)
        self._start_server(name)

    def _start_server(self, name):
        ns, addr, port = self.server_spec[name]
        self.servers[name] = self.w.spawn(ns, ["iperf3", "-s", "-B", addr, "-p", str(port)],
                                          f"server-{name}.log", role="iperf3-server")
        for _ in range(30):
            r = self.w.run(ns, ["ss", "-Hltn", f"sport = :{port}"], check=False)
            if r.stdout.strip():
                return
            time.sleep(0.1)
        raise LabError(f"iperf3 server {name} did not start (see {self.w.path(f'server-{name}.log')})")

    def stop_server(self, name):
        p = self.servers.pop(name, None)
        if p is not None and p.poll() is None:
            p.terminate()
            p.wait()

    def restart_server(self, name):
        """An iperf3 server can be left wedged by a client that failed mid-test."""
        self.stop_server(name)
        self._start_server(name)

    # ---- guests ----------------------------------------------------------------------------

    def create_guest(self, name, nsname, host, xl_args=()):
        """A guest with one vif on the bridge, at 10.203.0.HOST, IPv4 only: with IPv6 its kernel
        sends router solicitations and MLD reports, and an idle guest would not be idle."""
        ns = self.w.netns(nsname)
        self.no_ipv6(ns)
        mac = "00:16:3e:bb:%02x:%02x" % (host // 256, host % 256)
        g = self.w.create_guest(name, ns, f"10.203.0.{host}/24", mac, BRIDGE, xl_args=xl_args)
        self.guests[name] = g
        return g

    def destroy_guest(self, name):
        if not self.w.destroy_guest(self.guests.pop(name)):
            self.broken.append(f"destroy {name} failed")

    def shim(self, name):
        return self.w.shim_pid(self.guests[name])

    def no_ipv6(self, ns):
        for which in ("all", "default"):
            self.w.run(ns, ["sysctl", "-qw", f"net.ipv6.conf.{which}.disable_ipv6=1"])

    # ---- the paths -------------------------------------------------------------------------

    def pids_of(self, path):
        """The processes whose CPU time counts for a path (besides the iperf3 client, whose
        rusage the runner takes when it reaps it)."""
        w = self.w
        if path == "veth":
            return {"iperf3-server": self.servers["veth"].pid}
        if path == "user_hop":
            return {"iperf3-server": self.servers["user_hop"].pid, "userhop": self.userhop.pid}
        common = {"unetbackd": w.daemon.pid, "xensim": w.xensim.pid, "shim-g1": self.shim("g1")}
        if path == "unetback":
            return dict({"iperf3-server": self.servers["unetback"].pid}, **common)
        return dict({"iperf3-server": self.servers["g2"].pid}, **common, **{"shim-g2": self.shim("g2")})

    def client_ns(self, path):
        return {"veth": "v1", "user_hop": "h1"}.get(path, "g1")

    def server_addr(self, srv):
        return {"veth": "10.201.0.1", "user_hop": "10.202.0.1", "unetback": "10.203.0.1",
                "g2": "10.203.0.3"}[srv]

    def run_one(self, path, test, rnd, ns, pids, ctl, timeout, client_args):
        """One iperf3 run with the CPU time of every process involved and unetbackd's counters
        before and after; appends its record. True if it carried traffic."""
        w = self.w
        udp = "-u" in client_args

        def ctl_counters():
            s = counters.stats(w) if ctl else None
            return None if s is None else counters.summed(s)
        before = {r: procfs.cpu_ticks(p) for r, p in pids.items()}
        cb = ctl_counters()
        daemon = pids.get("unetbackd")
        sw_before = procfs.ctxt_switches(daemon) if daemon else None
        perfs = perfstat.start(self.perf, {r: p for r, p in pids.items()
                                           if not r.startswith("iperf3-client")}, w.dir)
        cmd = w.host.wrap(f"{w.prefix}-{ns}", ["iperf3", "-J", "--connect-timeout", "3000"]
                          + client_args)
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as err:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
            w.procs.append((p, "iperf3-client"))
            timer = threading.Timer(float(timeout), p.kill)
            timer.start()
            try:
                stdout = p.stdout.read()
                # Reap it ourselves: the client is gone once reaped, so its CPU time comes from
                # wait4's rusage (the same utime/stime accounting /proc/<pid>/stat shows).
                _, status, ru = os.wait4(p.pid, 0)
            finally:
                timer.cancel()
            p.returncode = os.waitstatus_to_exitcode(status)
            p.stdout.close()
            client_cpu = ru.ru_utime + ru.ru_stime
            err.seek(0)
            stderr = err.read()
        wall = time.monotonic() - t0
        after = {r: procfs.cpu_ticks(p_) for r, p_ in pids.items()}
        sw = procfs.ctxt_delta(sw_before, procfs.ctxt_switches(daemon)) if daemon else None
        syscalls = perfstat.stop(perfs)
        ca = ctl_counters()
        rec = {"kind": "run", "path": path, "test": test, "round": int(rnd), "args": client_args,
               "wall_s": wall, "ok": False}
        died = [r for r, v in after.items() if v is None]
        if died:
            rec["died"] = died
        try:
            j = json.loads(stdout)
        except ValueError:
            j = {"error": "no JSON from iperf3: " + stderr.decode(errors="replace")[-300:]}
        if p.returncode != 0 or "error" in j:
            rec["error"] = j.get("error", "iperf3 exit %s" % p.returncode)
        else:
            rec.update(iperf.receiver_figures(j, udp))
            rec["ok"] = rec["bytes"] > 0
        cpu = {r: (after[r] - before[r]) / procfs.CLK_TCK for r in pids
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
            # unetbackd's CPU per packet it moved (both directions; one queue is one thread,
            # so 1 / this is the packet rate one queue could reach if nothing else limited it).
            moved = rec["unetback"]["tx_packets"] + rec["unetback"]["rx_packets"]
            if moved and "unetbackd" in cpu:
                rec["unetback"]["unetbackd_us_per_packet"] = cpu["unetbackd"] * 1e6 / moved
            # Wake-ups: every time one of unetbackd's threads left the CPU (voluntary: it
            # blocked, in epoll_wait or a read; nonvoluntary: it was preempted), per packet.
            if moved and sw is not None:
                rec["unetback"]["unetbackd_wakeups_per_packet"] = (sw[0] + sw[1]) / moved
                rec["unetback"]["unetbackd_voluntary_switches_per_packet"] = sw[0] / moved
                rec["unetback"]["unetbackd_nonvoluntary_switches_per_packet"] = sw[1] / moved
            if moved and "unetbackd" in syscalls:
                rec["unetback"]["unetbackd_syscalls_per_packet"] = syscalls["unetbackd"] / moved
        self.note(rec)
        if rec["ok"]:
            main = ("%.3f Mpps, %.1f%% loss" % (rec["mpps"], rec["loss_percent"]) if udp
                    else "%.2f Gbit/s, %d retr" % (rec["gbit_s"], rec["retransmits"]))
            say("  r%s %-24s %-9s %s, %.1f CPU s/GB" % (rnd, test, path, main,
                                                         rec.get("cpu_s_per_gb", 0)))
            return True
        say("  r%s %-24s %-9s FAILED: %s" % (rnd, test, path, rec.get("error", "no traffic")))
        return False

    def measure(self, path, test, rnd, srv=None):
        """One run; a failure is retried once with a fresh server."""
        w, a = self.w, self.args
        srv = srv or path
        prof = []
        if a.profile and path == "unetback" and rnd == 1 and test in PROFILED:
            ppids = f"{w.daemon.pid},{w.xensim.pid},{self.shim('g1')}"
            prof.append(w.spawn(None, ["perf", "record", "-q", "-F", "499", "-g", "-o",
                                       os.path.join(a.profile, f"{test}.data"), "-p", ppids,
                                       "--", "sleep", str(a.seconds)],
                                os.path.join(a.profile, f"{test}.record.log"), role="perf"))
            prof.append(w.spawn(None, ["perf", "record", "-q", "-e", perfstat.EVENT, "-p", ppids,
                                       "-o", os.path.join(a.profile, f"{test}.syscalls.data"),
                                       "--", "sleep", str(a.seconds)], os.devnull, role="perf"))
        try:
            for _ in (1, 2):
                pids = self.pids_of("unetback-g2g" if srv == "g2" else path)
                if self.run_one(path, test, rnd, self.client_ns(path), pids, path == "unetback",
                                a.seconds + 25,
                                ["-c", self.server_addr(srv)] + test_args(test, a.seconds, a.omit)):
                    return
                self.restart_server(srv)
            self.broken.append(f"{path} {test} round {rnd}: no traffic")
        finally:
            for p in prof:
                p.wait()

    def check_alive(self):
        """Every long-lived process must still be there after each step."""
        for p, name in ((self.w.xensim, "xensim"), (self.w.daemon, "unetbackd"),
                        (self.userhop, "unetback-userhop")):
            if p.poll() is not None:
                raise LabError(f"process {p.pid} ({name}) died")
        for name, g in self.guests.items():
            if procfs.cpu_ticks(self.w.shim_pid(g)) is None:
                raise LabError(f"netfront-shim of {name} died "
                               f"(see {self.w.world}/guest-{g.domid}.log)")
