"""What /proc says about one process: RSS, open fds, the guests' memory views it maps."""
import os
import re

_VIEW = re.compile(r"memfd:xensim-dom\d+-memory")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


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
