"""unetbackd's counters as `unetback-ctl --json stats` reports them, per vif and queue."""
import json


def summed(stats):
    """Every queue's counters of every vif in a stats document, summed by name."""
    t = {}
    for vif in stats.get("vifs", []):
        for q in vif.get("queues", []):
            for k, v in q.get("counters", {}).items():
                t[k] = t.get(k, 0) + v
    return t


def ratio(t, a, b):
    """t[a] / t[b], None if either is missing or zero."""
    return t[a] / t[b] if t.get(a) and t.get(b) else None


def stats(world, vif=None):
    """The daemon's stats document (of one vif, "DOMID/DEVID", with vif); None if unavailable."""
    r = world.ctl("--json", "stats", *([vif] if vif else []))
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None
