"""The benchmark's maths: medians, Jain's index, per-round ratios, the per-process CPU and
syscall parsers, and the report over a set of records."""
import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout

from unetlab import bench, bench_report, bench_run, perfstat, procfs, stats


class StatsTest(unittest.TestCase):
    def test_median_leaves_out_missing_values(self):
        self.assertEqual(stats.med([3, None, 1, 2]), 2)
        self.assertEqual(stats.med([4, 1]), 2.5)
        self.assertIsNone(stats.med([None]))
        self.assertIsNone(stats.med([]))

    def test_jain_index(self):
        self.assertAlmostEqual(stats.jain([2.0, 2.0, 2.0, 2.0]), 1.0)
        self.assertAlmostEqual(stats.jain([1.0, 0.0, 0.0, 0.0]), 0.25)
        self.assertAlmostEqual(stats.jain([1.0, 3.0]), 16 / 20)
        self.assertEqual(stats.jain([0.0, 0.0]), 0.0)

    def test_min_over_max(self):
        self.assertEqual(stats.min_over_max([1.0, 4.0, 2.0]), 0.25)
        self.assertEqual(stats.min_over_max([0.0, 0.0]), 0.0)

    def test_per_round_ratio_is_the_median_of_the_rounds_ratios(self):
        # Rounds: 2/4, 3/3, 9/3 -> 0.5, 1, 3: the median is 1 (not 14/10, the ratio of sums).
        self.assertEqual(stats.per_round_ratio([(2, 4), (3, 3), (9, 3)]), 1.0)
        self.assertEqual(stats.per_round_ratio([(2, 0), (None, 1), (1, 2)]), 0.5)
        self.assertIsNone(stats.per_round_ratio([(1, 0)]))


class ProcParsersTest(unittest.TestCase):
    def test_cpu_ticks_with_a_parenthesis_in_the_command_name(self):
        stat = "42 (a b) c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 10 1000 10"
        self.assertEqual(procfs.cpu_ticks(0, stat), 12)

    def test_cpu_ticks_of_ourselves_and_of_no_process(self):
        self.assertIsNotNone(procfs.cpu_ticks(os.getpid()))
        self.assertIsNone(procfs.cpu_ticks(2 ** 22 + 1))

    def test_context_switch_delta_counts_a_new_thread_from_zero(self):
        self.assertEqual(procfs.ctxt_delta({"1": (10, 2)}, {"1": (15, 3), "2": (4, 1)}), (9, 2))
        self.assertIsNone(procfs.ctxt_delta(None, {}))
        self.assertTrue(procfs.ctxt_switches(os.getpid()))

    def test_perf_stat_csv(self):
        self.assertEqual(perfstat.parse("# started on x\n\n1234,,raw_syscalls:sys_enter,100.00,,\n"), 1234)
        self.assertEqual(perfstat.parse("<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n"), 0)
        self.assertIsNone(perfstat.parse("# nothing\n"))


def run_rec(path, test, rnd, value, cpu=None, udp=False, unetback=None):
    key = "mpps" if udp else "gbit_s"
    r = {"kind": "run", "path": path, "test": test, "round": rnd, "ok": True, key: value,
         "bytes": 1e9, "cpu_s": cpu or {}}
    if unetback is not None:
        r["unetback"] = unetback
    return r


class ReportTest(unittest.TestCase):
    META = {"mode": "quick", "rounds": 2, "seconds": 2, "elapsed_s": 1,
            "machine": {"kernel": "k", "cpus": 2}, "broken": [], "notes": ["n"]}

    def report(self, recs):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "bench.json")
            text = io.StringIO()
            with redirect_stdout(text):
                bench_report.report(recs, out, None, self.META, d)
            with open(out) as f:
                return json.load(f), text.getvalue()

    def test_ratios_per_round_and_guest_to_guest_against_guest_to_host(self):
        t = "tcp1-guest-to-host"
        ub = bench_report.unetback_figures({"rx_packets": 10, "rx_slots": 10, "rx_min_slots": 10})
        recs = [run_rec("veth", t, 1, 10.0), run_rec("user_hop", t, 1, 4.0, {"userhop": 2.0}),
                run_rec("unetback", t, 1, 2.0, {"unetbackd": 1.0}, unetback=ub),
                run_rec("veth", t, 2, 5.0), run_rec("user_hop", t, 2, 4.0, {"userhop": 1.0}),
                run_rec("unetback", t, 2, 4.0, {"unetbackd": 1.0}, unetback=ub),
                run_rec("unetback", "tcp1-guest-to-guest", 1, 3.0, unetback=ub),
                {"kind": "guests", "n": 2, "per_guest_gbit_s": [1.0, 3.0], "aggregate_gbit_s": 4.0,
                 "jain_index": 0.8, "min_over_max": 1 / 3, "errors": [], "ok": True},
                {"kind": "rss", "vifs": 1, "rss_kib": 1000, "rss_after_traffic_kib": 1100},
                {"kind": "rss", "vifs": 4, "rss_kib": 1600, "rss_after_traffic_kib": 2000},
                {"kind": "rss", "vifs": 0, "rss_kib": 900}]
        j, text = self.report(recs)
        r = j["ratios"][t]
        self.assertAlmostEqual(r["unetback_over_veth"], (0.2 + 0.8) / 2)
        self.assertAlmostEqual(r["unetback_over_user_hop"], (0.5 + 1.0) / 2)
        self.assertAlmostEqual(r["unetbackd_cpu_over_user_hop_cpu"], (0.5 + 1.0) / 2)
        # Round 1 only, against the kernel paths' guest-to-host run.
        self.assertAlmostEqual(j["ratios"]["tcp1-guest-to-guest"]["unetback_over_veth"], 0.3)
        self.assertEqual(j["tests"][t]["unetback"]["per_round"], [2.0, 4.0])
        self.assertEqual(j["tests"][t]["veth"]["gbit_s"], 7.5)
        self.assertEqual(j["memory"]["kib_per_vif_idle"], 200)
        self.assertEqual(j["memory"]["compared"], [1, 4])
        self.assertEqual(set(j), {"mode", "rounds", "seconds_per_run", "machine", "paths", "tests",
                                  "ratios", "scaling", "memory", "targets", "notes", "elapsed_s",
                                  "broken"})
        self.assertIn("guest scaling", text)
        self.assertIn("Jain 0.800", text)
        excess = next(x for x in j["targets"] if x["target"].startswith("RX slots above"))
        self.assertEqual(excess["value"], 0)
        self.assertTrue(excess["met"])

    def test_a_path_with_no_successful_run_has_no_figures_and_no_ratio(self):
        t = "udp64-guest-to-host"
        recs = [run_rec("veth", t, 1, 1.0, udp=True), dict(run_rec("unetback", t, 1, 0.0, udp=True), ok=False)]
        j, text = self.report(recs)
        self.assertNotIn("unetback", j["tests"][t])
        self.assertNotIn(t, j["ratios"])
        self.assertIn("n/a", text)


class TestArgsTest(unittest.TestCase):
    def test_iperf3_arguments_of_each_kind_of_test(self):
        self.assertEqual(bench_run.test_args("tcp1-host-to-guest", 5, ["-O", "1"]), ["-t", "5", "-R", "-O", "1"])
        self.assertEqual(bench_run.test_args("tcp4-guest-to-host", 2, []), ["-t", "2", "-P", "4"])
        self.assertEqual(bench_run.test_args("udp64-guest-to-guest", 2, []), ["-t", "2", "-u", "-b", "0", "-l", "18"])

    def test_unetbackd_args_may_start_with_dashes(self):
        a = bench.parse_args(["b", "--quick", "--unetbackd-arg", "--goodcopy-len", "--unetbackd-arg", "65535"])
        self.assertEqual(a.unetbackd_arg, ["--goodcopy-len", "65535"])
        self.assertEqual((a.seconds, a.rounds, a.omit), (2, 1, []))
        self.assertEqual(bench.parse_args(["b", "--seconds", "4"]).omit, ["-O", "1"])
        with self.assertRaises(SystemExit):
            bench.parse_args(["b", "--rounds", "0"])


if __name__ == "__main__":
    unittest.main()
