"""The parsers and the figures on recorded output: iperf3 -J (TCP, --bidir, -R -P 2, a refused
connection), unetback-udpflow's receiver report, /proc/PID/maps, unetback-ctl's stats."""
import json
import os
import unittest

from unetlab import counters, demo, iperf, procfs, udpflow
from unetlab.world import LabError

DATA = os.path.join(os.path.dirname(__file__), "data")


def text(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


class IperfTest(unittest.TestCase):
    def test_summary_is_the_receivers_rate_and_the_senders_retransmits(self):
        d = iperf.parse(text("iperf3-tcp.json"))
        gbit, retr = iperf.summary(d)
        self.assertAlmostEqual(gbit, d["end"]["sum_received"]["bits_per_second"] / 1e9)
        self.assertEqual(retr, d["end"]["sum_sent"]["retransmits"])
        self.assertGreater(gbit, 0)

    def test_intervals_of_a_one_way_run(self):
        d = iperf.parse(text("iperf3-tcp.json"))
        rows = iperf.intervals(d)
        self.assertEqual(len(rows), len(d["intervals"]))
        self.assertAlmostEqual(rows[-1][0], d["intervals"][-1]["sum"]["end"])
        self.assertTrue(all(g > 0 for _, g in rows))

    def test_intervals_of_a_bidir_run_add_both_directions(self):
        d = iperf.parse(text("iperf3-bidir.json"))
        rows = iperf.intervals(d)
        iv = d["intervals"][0]
        both = (iv["sum"]["bits_per_second"] + iv["sum_bidir_reverse"]["bits_per_second"]) / 1e9
        self.assertAlmostEqual(rows[0][1], both)
        self.assertGreater(rows[0][1], iv["sum"]["bits_per_second"] / 1e9)

    def test_summary_of_a_reverse_run_with_two_streams(self):
        d = iperf.parse(text("iperf3-reverse-p2.json"))
        self.assertEqual(len(d["start"]["connected"]), 2)
        gbit, _ = iperf.summary(d)
        self.assertAlmostEqual(gbit, d["end"]["sum_received"]["bits_per_second"] / 1e9)

    def test_a_refused_connection_is_an_error_with_iperf3s_message(self):
        with self.assertRaisesRegex(LabError, "Connection refused"):
            iperf.parse(text("iperf3-refused.json"))

    def test_output_that_is_not_json_is_an_error(self):
        with self.assertRaisesRegex(LabError, "no JSON"):
            iperf.parse("iperf3: error - unable to connect")


class UdpflowTest(unittest.TestCase):
    def test_the_receivers_report_is_its_last_json_line(self):
        r = udpflow.report("noise\n" + text("udpflow-recv.txt"))
        self.assertEqual(r["packets"], 33677)
        self.assertEqual(r["lost"], 0)
        self.assertAlmostEqual(r["pps"] * r["seconds"], r["packets"], delta=1)

    def test_no_report_is_an_error(self):
        with self.assertRaisesRegex(LabError, "no udpflow report"):
            udpflow.report("sent=1 pps=1\n")


class ProcfsTest(unittest.TestCase):
    MAPS = (
        "7f0000000000-7f0000400000 rw-s 00000000 00:01 5 /memfd:xensim-dom1-memory (deleted)\n"
        "7f0000400000-7f0000401000 rw-s 00000000 00:01 6 /memfd:xensim-dom12-memory (deleted)\n"
        "7f0000401000-7f0000402000 rw-s 00000000 00:01 7 /memfd:xensim-evtchn (deleted)\n"
        "7f0000402000-7f0000403000 r--p 00000000 08:01 8 /usr/lib/libc.so.6\n")

    def test_view_pages_count_only_guest_memory_views(self):
        self.assertEqual(procfs.view_pages(0, self.MAPS), 1024 + 1)

    ROLLUP = ("55d0c0000000-7ffc00000000 ---p 00000000 00:00 0 [rollup]\n"
              "Rss:                2048 kB\nPss:                1500 kB\n"
              "Shared_Clean:        800 kB\nShared_Dirty:          0 kB\n"
              "Private_Clean:       200 kB\nPrivate_Dirty:      1048 kB\n")

    def test_memory_is_pss_and_the_private_pages(self):
        self.assertEqual(procfs.memory_kib(0, self.ROLLUP), {"pss": 1500, "uss": 1248})

    def test_our_own_process(self):
        self.assertGreater(procfs.rss_kib(os.getpid()), 0)
        self.assertGreaterEqual(procfs.fd_count(os.getpid()), 3)
        self.assertGreater(procfs.memory_kib(os.getpid())["uss"], 0)
        self.assertGreaterEqual(procfs.thread_count(os.getpid()), 1)


STATS = {"mapped_grant_pages": 3, "vifs": [
    {"vif": "1/0", "queues": [{"counters": {"tx_packets": 10, "tx_slots": 30, "rx_packets": 4}},
                              {"counters": {"tx_packets": 10, "tx_slots": 10, "rx_packets": 0}}]},
    {"vif": "2/0", "queues": [{"counters": {"rx_packets": 4, "rx_slots": 8, "rx_min_slots": 8,
                                            "tx_copy_segments": 64, "tx_copy_calls": 2}}]}]}


class CountersTest(unittest.TestCase):
    def test_summed_over_every_vif_and_queue(self):
        t = counters.summed(STATS)
        self.assertEqual(t["tx_packets"], 20)
        self.assertEqual(t["tx_slots"], 40)
        self.assertEqual(t["rx_packets"], 8)

    def test_ratio_of_missing_or_zero_is_none(self):
        t = counters.summed(STATS)
        self.assertEqual(counters.ratio(t, "tx_slots", "tx_packets"), 2.0)
        self.assertIsNone(counters.ratio(t, "rx_copy_segments", "rx_copy_calls"))
        self.assertIsNone(counters.ratio({"a": 1, "b": 0}, "a", "b"))


class DemoFiguresTest(unittest.TestCase):
    def test_rows_and_json_keys(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "demo.json")
            runs = [{"name": "guest-to-host", "gbit_s": 1.5, "retransmits": 0}]
            rows = demo.figures(STATS, out, runs)
            with open(out) as f:
                j = json.load(f)
        self.assertIn("guest-TX slots/packet|2.00  (20 packets)", rows)
        self.assertIn("guest-RX slots/packet (minimum)|1.00  (1.00)  (8 packets)", rows)
        self.assertIn("guest-TX copy segments/call|32.00", rows)
        self.assertIn("guest-RX copy segments/call|-", rows)
        self.assertEqual(set(j), {"runs", "rx_slots_per_packet", "rx_min_slots_per_packet",
                                  "tx_slots_per_packet", "copy_segments_per_call",
                                  "rx_copy_segments_per_call", "tx_copy_segments_per_call",
                                  "zerocopy_packets", "copied_packets", "rx_dropped_queue_full",
                                  "counters"})
        self.assertEqual(j["copy_segments_per_call"], 32.0)
        self.assertEqual(j["runs"], runs)

    def test_no_stats(self):
        self.assertEqual(len(demo.figures(None, None, [])), 1)

    def test_ping_average(self):
        self.assertEqual(demo.ping_avg("rtt min/avg/max/mdev = 0.051/0.093/0.144/0.038 ms"), "0.093")
        self.assertIsNone(demo.ping_avg("100% packet loss"))


if __name__ == "__main__":
    unittest.main()
