"""A world's teardown, with a fake host (namespaces in memory, commands run here) and fake
programs in a fake build dir: xensim and unetbackd that only wait, an unetback-xl whose create
starts a process that looks like netfront-shim (argv[0] netfront-shim, `--hypervisor sim:DIR`)
and whose destroy fails, as it does once xensim is gone."""
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from unetlab.world import Host, Interrupted, LabError, World, cmdline, is_shim_of

XENSIM = """#!/bin/sh
echo "xensim ready"
exec sleep 300
"""
DAEMON_OK = """#!/bin/sh
# --hypervisor sim:DIR
touch "${2#sim:}/unetbackd.sock"
exec sleep 300
"""
DAEMON_FAILS = """#!/bin/sh
echo "unetbackd: cannot open the hypervisor" >&2
exit 1
"""
XL = """#!PYTHON
import os, subprocess, sys
world, cmd, name = sys.argv[2], sys.argv[3], sys.argv[4]
if cmd == "create":
    if name.startswith("bad"):
        print("libxl: error: hotplug script failed", file=sys.stderr)
        sys.exit(1)
    domid = len([f for f in os.listdir(world) if f.endswith(".pid")]) + 1
    shim = subprocess.Popen(["netfront-shim", "-c", "import time; time.sleep(300)",
                             "--hypervisor", "sim:" + world, "--domid", str(domid)],
                            executable=sys.executable, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(world, "guest-%d.pid" % domid), "w") as f:
        f.write("%d\\n" % shim.pid)
    print("domid %d" % domid)
    sys.exit(0)
if cmd == "destroy":
    print("xensim is not answering", file=sys.stderr)
    sys.exit(1)
sys.exit(2)
"""


class FakeHost(Host):
    def __init__(self, existing=()):
        self.ns = set(existing)
        self.ip_calls = []

    def netns_exists(self, ns):
        return ns in self.ns

    def netns_add(self, ns):
        self.ns.add(ns)

    def netns_del(self, ns):
        self.ns.discard(ns)

    def wrap(self, ns, argv):
        return list(argv)

    def run(self, argv, timeout=60, check=True):
        if argv[0] == "ip":
            self.ip_calls.append(argv)
            return subprocess.CompletedProcess(argv, 0, "", "")
        return super().run(argv, timeout, check)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def shim_like(world_dir):
    """A process that looks like a netfront-shim of the world in world_dir (once its exec has
    set up the new command line)."""
    p = subprocess.Popen(["netfront-shim", "-c", "import time; time.sleep(300)",
                             "--hypervisor", "sim:" + world_dir, "--domid", "1"],
                            executable=sys.executable)
    for _ in range(100):
        if cmdline(p.pid):
            break
        time.sleep(0.01)
    return p


class WorldTeardownTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.build = self.tmp.name
        self.write("tools/xensim/xensim", XENSIM)
        self.write("tools/xl/unetback-xl", XL.replace("PYTHON", sys.executable))
        self.write("frontend-shim/netfront-shim", "#!/bin/sh\nexit 1\n")
        self.write("backend/daemon/unetbackd", DAEMON_OK)
        self.others = []

    def tearDown(self):
        for p in self.others:
            p.kill()
            p.wait()
        self.tmp.cleanup()

    def write(self, rel, body):
        path = os.path.join(self.build, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(body)
        os.chmod(path, 0o755)

    def world(self, host, prefix="ubt1"):
        w = World(self.build, "test", prefix=prefix, host=host, stream=io.StringIO())
        # A failed world keeps its directory for the operator: these fail on purpose.
        self.addCleanup(lambda: w.dir and shutil.rmtree(w.dir, ignore_errors=True))
        return w

    def test_daemon_that_fails_to_start_takes_down_xensim_and_the_namespace(self):
        self.write("backend/daemon/unetbackd", DAEMON_FAILS)
        host = FakeHost()
        with self.assertRaisesRegex(LabError, "unetbackd did not start: .*cannot open"):
            with self.world(host) as w:
                ns0 = w.netns("dom0")
                xensim = w.start_xensim()
                w.start_daemon(ns0)
        self.assertIsNotNone(xensim.returncode)
        self.assertEqual(host.ns, set())
        self.assertTrue(os.path.isdir(w.dir), "a failed world keeps its logs")
        self.assertIn("cannot open", w.log("unetbackd.log"))

    def test_a_failed_guest_create_ends_the_guests_already_up_even_if_destroy_fails(self):
        host = FakeHost()
        with self.assertRaisesRegex(LabError, "create bad2 failed"):
            with self.world(host) as w:
                ns0 = w.netns("dom0")
                w.start_xensim()
                w.bridge(ns0, "xenbr0", "10.99.0.1/24")
                w.start_daemon(ns0)
                g1 = w.create_guest("g1", w.netns("g1"), "10.99.0.2/24", "00:16:3e:00:00:01", "xenbr0")
                shim = w.shim_pid(g1)
                self.assertTrue(alive(shim))
                w.create_guest("bad2", w.netns("bad2"), "10.99.0.3/24", "00:16:3e:00:00:02", "xenbr0")
        for _ in range(50):
            if not alive(shim):
                break
            time.sleep(0.1)
        self.assertFalse(alive(shim), "the guest's shim outlived its world")
        self.assertFalse(alive(w.daemon.pid) or alive(w.xensim.pid))
        self.assertEqual(host.ns, set())

    def test_teardown_spares_another_worlds_shim_named_by_a_stale_pid_file(self):
        # Our guest is gone and its pid now belongs to a guest of another world: the pid file
        # names a live netfront-shim, but not one of ours. (demo.sh killed it.)
        other_dir = tempfile.mkdtemp(prefix="unetback-other.", dir=self.build)
        other = shim_like(other_dir)
        self.others.append(other)
        mine_dir = None
        with self.world(FakeHost()) as w:
            w.start_xensim()
            mine_dir = w.world
            mine = shim_like(w.world)
            self.others.append(mine)
            with open(os.path.join(w.world, "guest-3.pid"), "w") as f:
                f.write(f"{other.pid}\n")
            with open(os.path.join(w.world, "guest-4.pid"), "w") as f:
                f.write(f"{mine.pid}\n")
        self.assertEqual(mine.wait(10), -signal.SIGTERM)
        self.assertIsNone(other.poll(), "another world's guest was killed")
        self.assertTrue(is_shim_of(other.pid, other_dir))
        self.assertFalse(is_shim_of(other.pid, mine_dir))
        self.assertFalse(os.path.exists(w.dir), "a world that succeeded leaves no files")

    def test_a_namespace_that_exists_is_never_taken_over_nor_deleted(self):
        host = FakeHost(existing={"ubt1-dom0"})
        with self.assertRaisesRegex(LabError, "ubt1-dom0 exists"):
            with self.world(host) as w:
                w.netns("dom0")
        self.assertEqual(host.ns, {"ubt1-dom0"})

    def test_two_worlds_at_once_have_their_own_names_and_files(self):
        host = FakeHost()
        with self.world(host, "uba1") as a, self.world(host, "ubb2") as b:
            self.assertNotEqual(a.netns("dom0"), b.netns("dom0"))
            self.assertNotEqual(a.world, b.world)
            self.assertEqual(host.ns, {"uba1-dom0", "ubb2-dom0"})
        self.assertEqual(host.ns, set())

    def test_sigterm_half_way_tears_down(self):
        host = FakeHost()
        with self.assertRaises(Interrupted) as e:
            with self.world(host) as w:
                w.netns("dom0")
                xensim = w.start_xensim()
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
                self.fail("SIGTERM did not interrupt the world")
        self.assertEqual(e.exception.signum, signal.SIGTERM)
        self.assertIsNotNone(xensim.returncode)
        self.assertEqual(host.ns, set())
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)


if __name__ == "__main__":
    unittest.main()
