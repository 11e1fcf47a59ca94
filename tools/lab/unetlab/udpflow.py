"""unetback-udpflow (tools/udpflow): a UDP sender and a counting receiver, and the receiver's
one-line JSON report."""
import json
import subprocess

from .world import LabError


def send_argv(world, to, size, seconds, pps=None):
    argv = [world.bin("udpflow"), "send", "--to", to, "--size", str(size), "--seconds", str(seconds)]
    return argv + (["--pps", str(pps)] if pps else [])


def recv_argv(world, port, seconds):
    return [world.bin("udpflow"), "recv", "--port", str(port), "--seconds", str(seconds),
            "--from-start", "--json"]


def report(text):
    """The receiver's report: the last line of its output that is a JSON object."""
    lines = text.strip().splitlines()
    for line in reversed(lines):
        if line.startswith("{"):
            return json.loads(line)
    raise LabError(f"no udpflow report: {lines[-3:]}")


def wait_report(world, proc, log, timeout=60):
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise LabError(f"{log}: the receiver did not finish") from None
    return report(world.log(log, tail=100000))
