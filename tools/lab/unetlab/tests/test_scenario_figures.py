"""The FIGURE lines of the functional scenarios, read back from a meson JSON test log."""
import json
import os
import tempfile
import unittest

from unetlab import scenario_figures


class ScenarioFiguresTest(unittest.TestCase):
    def test_figure_lines_among_gtest_output(self):
        out = ("[ RUN      ] E2e.GuestToHost\n"
               "FIGURE e2e_guest_to_host_bps 2.5e+09 bit/s\n"
               "FIGURE broken notanumber ms\n"
               "some FIGURE e2e_not_at_line_start 1 ms\n"
               "FIGURE e2e_restart_kill_outage_ms 420 ms\n")
        self.assertEqual(scenario_figures.parse(out),
                         [("e2e_guest_to_host_bps", 2.5e9, "bit/s"),
                          ("e2e_restart_kill_outage_ms", 420.0, "ms")])

    def test_a_testlog_keeps_each_tests_result_beside_its_figures(self):
        records = [
            {"name": "e2e", "result": "OK", "stdout": "FIGURE a_bps 10 bit/s\n", "stderr": ""},
            {"name": "hostile_advisories", "result": "FAIL",
             "stdout": "x\n", "stderr": "FIGURE hostile_initwait_ms 35 ms\n"},
            {"name": "unit", "result": "OK", "stdout": None},
        ]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "log.json")
            with open(path, "w") as f:
                f.write("\n".join(json.dumps(r) for r in records) + "\nnot json\n")
            tests = scenario_figures.from_testlog(path)
        self.assertEqual(tests["e2e"]["figures"], {"a_bps": {"value": 10.0, "unit": "bit/s"}})
        self.assertEqual(tests["hostile_advisories"]["result"], "FAIL")
        self.assertEqual(tests["hostile_advisories"]["figures"]["hostile_initwait_ms"]["value"], 35.0)
        self.assertEqual(tests["unit"]["figures"], {})
        table = scenario_figures.report(tests)
        self.assertIn("hostile_advisories  (test FAIL)", table)
        self.assertIn("a_bps", table)
        self.assertNotIn("unit", table)


if __name__ == "__main__":
    unittest.main()
