"""The unetback benchmark (issue 6), run by `tools/lab.sh bench` after it has built the tree:
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
killed.

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
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import counters, experiments, iperf, perfstat, procfs
from .bench_report import report, unetback_figures
from .stats import jain, min_over_max
from .world import ROOT, LabError, World, main_guard

USAGE = ("usage: bench BUILD_DIR [--quick] [--json FILE] [--plot FILE.png] [--seconds N] "
         "[--rounds N] [--profile DIR] [--unetbackd-arg ARG]... [--no-syscall-count] "
         "[--tests T1,T2,...] [--no-scaling]")
BRIDGE = "ubbr0"
TESTS = ["tcp1-guest-to-host", "tcp1-host-to-guest", "tcp4-guest-to-host", "tcp4-host-to-guest",
         "udp64-guest-to-host", "udp64-host-to-guest", "udp1400-guest-to-host",
         "udp1400-host-to-guest"]
G2G_TESTS = ["tcp1-guest-to-guest", "udp64-guest-to-guest"]
PROFILED = ("tcp1-guest-to-host", "tcp1-host-to-guest", "udp64-guest-to-host")
ORDERS = [["veth", "user_hop", "unetback"], ["user_hop", "unetback", "veth"],
          ["unetback", "veth", "user_hop"]]


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


def lab_deps(*packages):
    """tools/lab.sh deps PKG...: True if they are (now) installed."""
    return subprocess.run([os.path.join(ROOT, "tools", "lab.sh"), "deps"] + list(packages),
                          stdout=sys.stderr).returncode == 0


class Bench:
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

    def multi(self, kind, n, secs, timeout, specs):
        """Concurrent single-stream TCP, one per guest: [(ns, addr, port)]."""
        procs = []
        for ns, addr, port in specs:
            cmd = self.w.host.wrap(ns, ["iperf3", "-J", "--connect-timeout", "3000", "-c", addr,
                                        "-p", str(port), "-t", str(secs)])
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL)
            self.w.procs.append((p, "iperf3-client"))
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
        self.note(rec)
        say("  %d guest(s): %.2f Gbit/s aggregate, Jain %.3f, min/max %.2f%s" % (
            int(n), agg, rec["jain_index"], rec["min_over_max"],
            "" if rec["ok"] else " FAILED " + "; ".join(errors)))
        return rec["ok"]

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

    # ---- the whole run ---------------------------------------------------------------------

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

        if not a.scaling:
            a.scale_queues, a.scale_guests = [], []
        # Scaling with queues: one guest asking for N queues (unetbackd offers up to 4).
        say(f"queue scaling: {' '.join(map(str, a.scale_queues))}")
        for q in a.scale_queues:
            name = f"gq{q}"
            self.create_guest(name, f"q{q}", 40 + q, ["--queues", str(q)])
            qpids = {"iperf3-server": self.servers["unetback"].pid, "unetbackd": w.daemon.pid,
                     "xensim": w.xensim.pid, "shim": self.shim(name)}
            for test in a.queue_tests:
                args = test_args(test, a.seconds, a.omit)
                if test.startswith("udp"):
                    args += ["-P", str(q)]
                if not self.run_one(f"unetback-q{q}", test, 1, f"q{q}", qpids, True,
                                    a.seconds + 25, ["-c", "10.203.0.1"] + args):
                    self.restart_server("unetback")
                    self.broken.append(f"queues {q} {test}: no traffic")
            self.check_alive()
            self.destroy_guest(name)

        # Scaling with guests (added one by one, kept), each with its own iperf3 server port on
        # the host; and unetbackd's RSS with 1 and N vifs, idle and after traffic.
        say(f"guest scaling: {' '.join(map(str, a.scale_guests))}")
        n_up = 0
        for n in a.scale_guests:
            while n_up < n:
                n_up += 1
                self.create_guest(f"s{n_up}", f"s{n_up}", 100 + n_up)
                self.server(f"s{n_up}", ns0, "10.203.0.1", 5300 + n_up)
            self.check_alive()
            rss_idle = procfs.rss_kib(w.daemon.pid)
            idle = self.idle_sample(w.daemon.pid)
            specs = [(f"{w.prefix}-s{i}", "10.203.0.1", 5300 + i) for i in range(1, n + 1)]
            if not self.multi("guests", n, a.seconds, a.seconds + 30, specs):
                self.broken.append(f"guest scaling with {n} guests: a guest had no traffic")
            self.check_alive()
            self.note({"kind": "rss", "vifs": n, "rss_kib": rss_idle,
                       "rss_after_traffic_kib": procfs.rss_kib(w.daemon.pid), **idle})
        self.note({"kind": "rss", "vifs": 0, "rss_kib": rss0})

        elapsed = int(time.monotonic() - t_start)
        report(self.records, a.json, a.plot, self.meta(elapsed), w.dir)
        if a.profile:
            shutil.copy(w.path("results.jsonl"), os.path.join(a.profile, "results.jsonl"))
        say(f"done in {elapsed} s")
        for b in self.broken:
            say(f"BROKEN: {b}")
        return 1 if self.broken else 0

    def no_ipv6(self, ns):
        for which in ("all", "default"):
            self.w.run(ns, ["sysctl", "-qw", f"net.ipv6.conf.{which}.disable_ipv6=1"])

    IDLE_SETTLE_S = 3  # past a queue's 2 s housekeeping tail after its last work
    IDLE_WINDOW_S = 5

    def idle_sample(self, pid):
        """What unetbackd costs while its guests are idle: wake-ups per second (context
        switches of all its threads over IDLE_WINDOW_S), PSS and USS, fds, threads."""
        time.sleep(self.IDLE_SETTLE_S)  # a measurement window, not a synchronisation
        before = procfs.ctxt_switches(pid)
        time.sleep(self.IDLE_WINDOW_S)
        delta = procfs.ctxt_delta(before, procfs.ctxt_switches(pid))
        mem = procfs.memory_kib(pid)
        return {"idle_wakeups_per_s": None if delta is None else sum(delta) / self.IDLE_WINDOW_S,
                "pss_kib": mem["pss"], "uss_kib": mem["uss"], "fds": procfs.fd_count(pid),
                "threads": procfs.thread_count(pid)}

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
