"""Syscalls counted by perf's raw_syscalls:sys_enter tracepoint, one `perf stat` per process of
the path (every path's, so that the cost of the enabled tracepoint -- every syscall on the
machine takes the slow entry path while it is on -- is the same in every path's runs)."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

EVENT = "raw_syscalls:sys_enter"


def usable():
    """(perf path, None) if perf can count EVENT here, else (None, why not)."""
    perf = shutil.which("perf")
    if not perf:
        return None, "no perf (linux-perf): syscalls per packet not measured"
    r = subprocess.run([perf, "stat", "-x,", "-e", EVENT, "--", "true"], capture_output=True,
                       text=True)
    out = r.stdout + r.stderr
    if r.returncode != 0 or EVENT not in out or "not supported" in out or "not counted" in out:
        return None, (f"perf cannot count {EVENT} here ({out.replace(chr(10), ' ')[:120]}): "
                      "syscalls per packet not measured")
    return perf, None


def start(perf, pids, work):
    """{role: (perf process, output file)} for {role: pid}; {} without perf."""
    if not perf:
        return {}
    out = {}
    for role, pid in pids.items():
        fd, path = tempfile.mkstemp(prefix=f"perf-{role}.", dir=work)
        os.close(fd)
        p = subprocess.Popen([perf, "stat", "-x", ",", "--no-big-num", "-e", EVENT,
                              "-p", str(pid), "-o", path], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out[role] = (p, path)
    time.sleep(0.2)  # perf has attached before the traffic starts
    return out


def parse(text):
    """The count of EVENT in `perf stat -x,` output; 0 if it was not counted (the process
    never ran in the window); None if the output has no such line."""
    for line in text.splitlines():
        f = line.strip().split(",")
        if len(f) >= 3 and f[2] == EVENT:
            if f[0].isdigit():
                return int(f[0])
            if f[0] == "<not counted>":
                return 0
    return None


def stop(started):
    """{role: syscalls} over the window (SIGINT makes perf stat print its counts)."""
    counts = {}
    for role, (p, path) in started.items():
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        try:
            with open(path) as f:
                n = parse(f.read())
            if n is not None:
                counts[role] = n
            os.unlink(path)
        except OSError:
            pass
    return counts
