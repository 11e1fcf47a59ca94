"""What /proc says about one process: RSS, open fds, the guests' memory views it maps, its CPU
time and its threads' context switches."""
import os
import re

_VIEW = re.compile(r"memfd:xensim-dom\d+-memory")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def memory_kib(pid, rollup_text=None):
    """{"pss": ..., "uss": ...} in KiB from /proc/PID/smaps_rollup: the proportional set size,
    and the unique set size (private clean + private dirty: what the process alone holds)."""
    if rollup_text is None:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            rollup_text = f.read()
    fields = {}
    for line in rollup_text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
            fields[parts[0][:-1]] = int(parts[1])
    return {"pss": fields.get("Pss", 0),
            "uss": fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)}


def thread_count(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid):
    """fd number -> what it refers to (readlink of /proc/PID/fd/N), for naming a leak."""
    out = {}
    for n in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(n)] = os.readlink(f"/proc/{pid}/fd/{n}")
        except OSError:
            pass
    return out


def view_pages(pid, maps_text=None):
    """4 KiB pages of the guests' whole-memory views (xensim's "xensim-dom<N>-memory" memfds)
    mapped by pid; maps_text: a /proc/PID/maps text instead of the live one."""
    if maps_text is None:
        with open(f"/proc/{pid}/maps") as f:
            maps_text = f.read()
    pages = 0
    for line in maps_text.splitlines():
        if _VIEW.search(line):
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            pages += (hi - lo) // 4096
    return pages


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid, stat_text=None):
    """utime + stime of one process, in clock ticks (proc(5) fields 14 and 15); None if gone."""
    if stat_text is None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat_text = f.read()
        except OSError:
            return None
    fields = stat_text[stat_text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def ctxt_switches(pid):
    """{tid: (voluntary, nonvoluntary)} context switches of every thread of one process."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        v = n = None
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        n = int(line.split()[1])
        except OSError:
            continue  # the thread ended meanwhile
        if v is not None and n is not None:
            out[tid] = (v, n)
    return out


def ctxt_delta(before, after):
    """(voluntary, nonvoluntary) switches between two snapshots; a thread that appeared in
    between counts from zero, one that ended in between is lost (none do in a steady run)."""
    if before is None or after is None:
        return None
    v = n = 0
    for tid, (av, an) in after.items():
        bv, bn = before.get(tid, (0, 0))
        v += av - bv
        n += an - bn
    return v, n
