"""The figures the functional scenarios measure but do not judge.

A functional test asserts behaviour only; what it can also measure (a stream's rate, an outage
after a restart, how long a handshake waited behind a flood, the share a small flow kept) it
prints as one line, `FIGURE <name> <value> <unit>` (tests/support/figure.hpp). This module runs
the suites that print them, on a build of the caller's choice, and collects the lines from
meson's JSON test log, so that `tools/lab.sh bench --experiments` reports them beside the
experiments, with the same build and the same machine load.
"""
import json
import os
import re
import subprocess

# The suites whose scenarios print figures (root: namespaces, TAPs).
SUITES = ("integration", "root-netns", "e2e", "hostile")
LOGBASE = "scenario-figures"
FIGURE_RE = re.compile(r"^FIGURE (\S+) (\S+) (\S+)\s*$")


def parse(text):
    """FIGURE lines of one test's output: [(name, value, unit)], in order; bad lines skipped."""
    out = []
    for line in text.splitlines():
        m = FIGURE_RE.match(line.strip())
        if not m:
            continue
        try:
            out.append((m.group(1), float(m.group(2)), m.group(3)))
        except ValueError:
            continue
    return out


def from_testlog(path):
    """{test name: {"result": ..., "figures": {name: {"value": v, "unit": u}}}} of a testlog."""
    tests = {}
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            figures = {}
            for name, value, unit in parse((r.get("stdout") or "") + "\n" + (r.get("stderr") or "")):
                figures[name] = {"value": value, "unit": unit}
            tests[r.get("name", "?")] = {"result": r.get("result"), "figures": figures}
    return tests


def collect(build, suites=SUITES, say=print):
    """Runs the suites once on `build` (no rebuild) and returns from_testlog's dict."""
    cmd = ["meson", "test", "-C", build, "--no-rebuild", "--logbase", LOGBASE]
    for s in suites:
        cmd += ["--suite", s]
    say(f"scenarios: {' '.join(cmd)}")
    # A failed scenario still has its figures; its result is kept beside them.
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    path = os.path.join(build, "meson-logs", LOGBASE + ".json")
    if not os.path.exists(path):
        raise OSError(f"meson test wrote no {path}")
    return from_testlog(path)


def report(tests):
    """The figures as a table, one row per figure, grouped by test."""
    lines = []
    for test in sorted(tests):
        t = tests[test]
        if not t["figures"]:
            continue
        mark = "" if t["result"] in ("OK", "EXPECTEDFAIL") else f"  (test {t['result']})"
        lines.append(f"  {test}{mark}")
        for name, f in t["figures"].items():
            lines.append(f"    {name:58} {f['value']:>14.6g} {f['unit']}")
    return "\n".join(lines)
