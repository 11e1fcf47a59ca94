"""A xensim world: xensim, a dom0 network namespace (with a bridge or the daemon's switch
uplink), unetbackd in it, and guests created by unetback-xl whose netfront-shim TAPs live in
namespaces of their own.

Every name a world creates starts with its prefix (unique per process and tag), and its files
live in a directory of its own, so that two worlds can run on one machine at once. Interface
names (the bridge, the vif TAPs, the guests' TAPs) live inside the world's namespaces, so they
need no prefix. Teardown ends only what this world started (by PID, and a guest's shim only if
its command line names this world) and deletes only the namespaces it created: on a normal
exit, on an exception half-way through bring-up, and on SIGINT or SIGTERM.
"""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HOTPLUG_SCRIPT = os.path.join(ROOT, "tools", "hotplug", "vif-unetback")
SHIM_NAME = "netfront-shim"

BINARIES = {
    "xensim": "tools/xensim/xensim",
    "unetbackd": "backend/daemon/unetbackd",
    "xl": "tools/xl/unetback-xl",
    "ctl": "tools/ctl/unetback-ctl",
    "shim": "frontend-shim/netfront-shim",
    "userhop": "tools/userhop/unetback-userhop",
    "udpflow": "tools/udpflow/unetback-udpflow",
}


class LabError(Exception):
    """Something the lab needs did not work: the command reports it and exits 1."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: the world tears down and the command exits 128 + signal."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Host:
    """What a world does to the machine: namespaces and the commands run in them. Tests give a
    world a fake host instead."""

    def netns_exists(self, ns):
        return os.path.exists(os.path.join("/run/netns", ns))

    def netns_add(self, ns):
        self.run(["ip", "netns", "add", ns])
        self.run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def netns_del(self, ns):
        self.run(["ip", "netns", "del", ns], check=False)

    def wrap(self, ns, argv):
        """argv to run inside namespace ns (None: here)."""
        return list(argv) if ns is None else ["ip", "netns", "exec", ns] + list(argv)

    def run(self, argv, timeout=60, check=True):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise LabError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
        return r


def cmdline(pid):
    """argv of a live process, or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]] if raw else None


def is_shim_of(pid, world_dir):
    """True if pid is a netfront-shim attached to the xensim world in world_dir (unetback-xl
    starts it with `--hypervisor sim:DIR`). A pid file can outlive its process, and the pid
    can since belong to another world's guest: that one is never ours."""
    argv = cmdline(pid)
    if not argv:
        return False
    return os.path.basename(argv[0]) == SHIM_NAME and f"sim:{world_dir}" in argv


class Guest:
    def __init__(self, name, ns, ip, domid=None):
        self.name, self.ns, self.ip, self.domid = name, ns, ip, domid

    def __repr__(self):
        return f"Guest({self.name}, ns={self.ns}, ip={self.ip}, domid={self.domid})"


class World:
    """with World(build, "demo") as w: w.netns(...); w.start_xensim(); ... (see the commands).

    kind names the work directory (/tmp/unetback-KIND.XXXXXX) and the log prefix ([KIND]);
    prefix, by default "ub" + KIND's first letter + the PID + tag, starts every namespace name.
    """

    def __init__(self, build, kind, tag="", prefix=None, host=None, keep=False, stream=None,
                 quiet_teardown=False):
        self.build = os.path.abspath(build)
        self.kind = kind
        self.prefix = prefix or f"ub{kind[0]}{os.getpid()}{tag}"
        self.host = host or Host()
        self.keep = keep  # keep the work directory even on success
        self.stream = stream or sys.stderr
        self.quiet_teardown = quiet_teardown  # no "tearing down" line (one of many worlds)
        self.dir = None    # work directory: logs, outputs
        self.world = None  # xensim's directory (xenstore, event channels, guests' pid files)
        self.ns0 = None
        self.procs = []     # (Popen, role), in start order
        self.guests = []    # created with unetback-xl (or being created), destroyed at teardown
        self.namespaces = []
        self.xensim = None
        self.daemon = None
        self.failed = False
        self.why = "exit 1"  # what failed, for the teardown's last word
        self._old_handlers = {}

    # ---- life cycle ------------------------------------------------------------------------

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[s] = signal.signal(s, self._on_signal)
        self.dir = tempfile.mkdtemp(prefix=f"unetback-{self.kind}.")
        self.world = os.path.join(self.dir, "world")
        os.makedirs(self.world)
        return self

    def __exit__(self, etype, exc, tb):
        if isinstance(exc, LabError):
            self.say(f"error: {exc}")
            exc.reported = True
        if exc is not None:
            self.failed = True
            self.why = (f"exit {128 + exc.signum}, {exc}" if isinstance(exc, Interrupted)
                        else "exit 1" if isinstance(exc, LabError) else type(exc).__name__)
        # No second signal may cut the teardown short.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            self.teardown()
        finally:
            for s, h in self._old_handlers.items():
                signal.signal(s, h)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return False

    @staticmethod
    def _on_signal(signum, _frame):
        raise Interrupted(signum)

    def say(self, msg):
        print(f"[{self.kind}] {msg}", file=self.stream, flush=True)

    def fail(self, msg):
        """A failed check: the command goes on, exits 1, and the logs are kept."""
        self.say(msg)
        self.failed = True

    # ---- helpers ---------------------------------------------------------------------------

    def bin(self, name):
        path = os.path.join(self.build, BINARIES.get(name, name))
        if not os.access(path, os.X_OK):
            raise LabError(f"{path} is missing: build first (tools/lab.sh build)")
        return path

    def path(self, name):
        return os.path.join(self.dir, name)

    def log(self, name, tail=2000):
        try:
            with open(self.path(name), errors="replace") as f:
                return f.read()[-tail:]
        except OSError:
            return ""

    def wait_for_line(self, name, text, secs, proc=None):
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            if text in self.log(name, tail=100000):
                return
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.1)
        raise LabError(f"{name}: no '{text}': {self.log(name, 600).strip()}")

    def run(self, ns, argv, timeout=120, check=True):
        return self.host.run(self.host.wrap(ns, argv), timeout=timeout, check=check)

    def ip(self, ns, *args):
        return self.host.run(["ip", "-n", ns] + list(args))

    def spawn(self, ns, argv, log, role=None, err_log=None):
        """A process of this world, its stdout in log (in the work dir), its stderr there too
        or in err_log; ended at teardown."""
        with open(self.path(log), "w") as out, \
                open(self.path(err_log) if err_log else os.devnull, "w") as err:
            p = subprocess.Popen(self.host.wrap(ns, argv), stdout=out,
                                 stderr=err if err_log else subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        self.procs.append((p, role or os.path.basename(argv[0])))
        return p

    def netns(self, name):
        """Creates namespace PREFIX-name. One that exists already belongs to someone else: the
        world fails rather than take it over."""
        ns = f"{self.prefix}-{name}"
        if self.host.netns_exists(ns):
            raise LabError(f"namespace {ns} exists already (another world?)")
        self.host.netns_add(ns)
        self.namespaces.append(ns)
        return ns

    # ---- bring-up --------------------------------------------------------------------------

    def start_xensim(self):
        self.xensim = self.spawn(None, [self.bin("xensim"), "--dir", self.world], "xensim.log",
                                 role="xensim")
        self.wait_for_line("xensim.log", "xensim ready", 10, self.xensim)
        return self.xensim

    def bridge(self, ns, name, address):
        self.ip(ns, "link", "add", name, "type", "bridge")
        self.ip(ns, "addr", "add", address, "dev", name)
        self.ip(ns, "link", "set", name, "up")

    def start_daemon(self, ns, args=(), wait_s=5):
        self.ns0 = ns
        self.daemon = self.spawn(ns, [self.bin("unetbackd"), "--hypervisor", "sim:" + self.world]
                                 + list(args), "unetbackd.log", role="unetbackd")
        sock = os.path.join(self.world, "unetbackd.sock")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self.daemon.poll() is None:
            if os.path.exists(sock):
                return self.daemon
            time.sleep(0.1)
        raise LabError("unetbackd did not start: " + self.log("unetbackd.log", 600).strip())

    def create_guest(self, name, ns, address, mac, bridge, xl_args=(), shim_args=(), out=None,
                     timeout=90, echo=False):
        """unetback-xl create NAME (run in the dom0 namespace). Raises LabError if it fails,
        with its stderr. out: the file (in the work dir) for its stdout (default xl-NAME.out);
        its stderr goes to xl-NAME.err, and with echo to this world's stream too."""
        g = Guest(name, ns, address.split("/")[0])
        self.guests.append(g)  # before create: an interrupted create is destroyed at teardown
        argv = [self.bin("xl"), "--world", self.world, "create", name,
                "--vif", f"mac={mac},bridge={bridge},script={HOTPLUG_SCRIPT}",
                "--guest-netns", ns, "--address", address, "--shim", self.bin("shim")]
        argv += list(xl_args)
        if shim_args:
            argv += ["--"] + list(shim_args)
        r = self.run(self.ns0, argv, timeout=timeout, check=False)
        with open(self.path(out or f"xl-{name}.out"), "w") as f:
            f.write(r.stdout)
        with open(self.path(f"xl-{name}.err"), "w") as f:
            f.write(r.stderr)
        if echo:
            print(r.stderr, end="", file=self.stream, flush=True)
        if r.returncode != 0:
            self.guests.remove(g)  # unetback-xl undoes a failed create itself
            raise LabError(f"unetback-xl create {name} failed: {r.stderr.strip()[-400:]}")
        for line in r.stdout.splitlines():
            if line.startswith("domid "):
                g.domid = int(line.split()[1])
        g.xl_out = r.stdout.strip()
        return g

    def destroy_guest(self, g, timeout=60):
        """unetback-xl destroy; True if it succeeded."""
        r = self.run(self.ns0, [self.bin("xl"), "--world", self.world, "destroy", g.name],
                     timeout=timeout, check=False)
        if g in self.guests:
            self.guests.remove(g)
        return r.returncode == 0

    def shim_pid(self, g):
        with open(os.path.join(self.world, f"guest-{g.domid}.pid")) as f:
            return int(f.read().split()[0])

    def ctl(self, *args, timeout=10, check=False):
        return self.run(None, [self.bin("ctl"), "--world", self.world] + list(args),
                        timeout=timeout, check=check)

    def ping(self, ns, ip, count=2, check=True):
        r = self.run(ns, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", ip], check=False)
        if check and r.returncode != 0:
            raise LabError(f"{ns} cannot ping {ip}")
        return r

    # ---- teardown --------------------------------------------------------------------------

    def teardown(self):
        if not self.quiet_teardown:
            self.say("tearing down")
        core = {id(self.daemon), id(self.xensim)}
        others = [p for p, _ in self.procs if id(p) not in core]
        for p in reversed(others):
            _terminate(p, 10)
        # Guests while the daemon and xensim still answer.
        xl = os.path.join(self.build, BINARIES["xl"])
        for g in list(self.guests):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                r = self.run(self.ns0, [xl, "--world", self.world, "destroy", g.name],
                             timeout=60, check=False)
                if r.returncode != 0 and g.domid is not None:
                    self.say(f"destroy {g.name} failed")
        self.guests = []
        # A guest whose destroy could not run (xensim already gone): its pid file names it.
        for pid in self.guest_pids():
            if is_shim_of(pid, self.world):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        if self.daemon is not None:
            _terminate(self.daemon, 10)
        if self.xensim is not None:
            _terminate(self.xensim, 15)
        for ns in reversed(self.namespaces):
            self.host.netns_del(ns)
        self.namespaces = []
        if self.failed:
            self.say(f"failed ({self.why}); logs kept in {self.dir}")
            for d in (self.dir, self.world):
                for f in sorted(os.listdir(d)) if os.path.isdir(d) else ():
                    path = os.path.join(d, f)
                    if f.endswith(".log") and os.path.getsize(path) > 0:
                        print(f"---- {path} (tail)", file=self.stream)
                        with open(path, errors="replace") as fh:
                            print("".join(fh.readlines()[-15:]), end="", file=self.stream)
        elif not self.keep and self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def guest_pids(self):
        out = []
        if not self.world or not os.path.isdir(self.world):
            return out
        for f in sorted(os.listdir(self.world)):
            if f.startswith("guest-") and f.endswith(".pid"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(os.path.join(self.world, f)) as fh:
                        out.append(int(fh.read().split()[0]))
        return out


def _terminate(p, grace_s):
    if p.poll() is None:
        with contextlib.suppress(OSError):
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main_guard(kind, fn):
    """Runs a command's main(): exit status 1 on LabError, 128 + N on signal N."""
    try:
        return fn()
    except LabError as e:
        # Raised outside a world (a World reports its own before tearing down).
        if not getattr(e, "reported", False):
            print(f"[{kind}] error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:
        return 128 + e.signum
    except KeyboardInterrupt:
        return 130
