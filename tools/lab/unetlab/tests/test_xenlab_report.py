"""The real-Xen lab's report on a recorded quick run (CI, 2026-12-01): its ratios, its exit
status, and the boots it must not trust (a dom0 process died of a memory error, a stalled boot)."""
import contextlib
import io
import json
import os
import shutil
import tempfile
import unittest

from unetlab import xenlab_report

DATA = os.path.join(os.path.dirname(__file__), "data")
CONSOLE = """(XEN) Xen version 4.17
XENLAB 10.0 === kernel netback round 1
XENLAB 300.0 === unetbackd round 1
XENLAB 800.0 DONE
"""


class XenlabReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="unetlab-xenlab-report.")
        self.addCleanup(shutil.rmtree, self.dir)
        self.results = os.path.join(self.dir, "results.txt")
        self.json = os.path.join(self.dir, "report.json")
        self.console = os.path.join(self.dir, "console.log")
        shutil.copy(os.path.join(DATA, "xenlab-results.txt"), self.results)
        self.write_console(CONSOLE)

    def write_console(self, text):
        with open(self.console, "w") as f:
            f.write(text)

    def report(self, stalled="0", timed_out="0"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = xenlab_report.main([self.results, self.json, "1", "847", timed_out, self.console, "0",
                                     "1.38 2.16 2.23", "1", stalled])
        with open(self.json) as f:
            return rc, json.load(f), out.getvalue()

    def test_a_run_whose_checks_all_passed_reports_unetbackd_over_the_kernel_per_scenario(self):
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        self.assertTrue(d["passed"])
        self.assertFalse(d["environment_fault"])
        m = d["means_mbps"]
        for key in ("guest_tx", "guest_rx", "mq_guest_tx", "mq_guest_rx"):
            self.assertAlmostEqual(d["ratios"][key], m[key]["unetbackd"] / m[key]["kernel"], places=2)
        # domU -> domU counts both ways: (236 + 205) / (328 + 382).
        both = [m["domu_to_domu"], m["domu_to_domu_reverse"]]
        self.assertAlmostEqual(d["ratios"]["domu_to_domu"],
                               sum(x["unetbackd"] for x in both) / sum(x["kernel"] for x in both), places=2)
        # The recorded run: guest TX 348 of the kernel's 760 Mbit/s.
        self.assertEqual(d["means_mbps"]["guest_tx"], {"kernel": 760.0, "unetbackd": 348.0})
        self.assertIn("guest TX (domU -> dom0)", text)
        self.assertEqual(d["directions"]["guest_tx"], "domU -> dom0")

    def test_unetbackds_grant_copy_hypercalls_per_packet_are_averaged_beside_its_syscalls(self):
        with open(self.results, "a") as f:
            f.write("FIG unetbackd.r1.guest_rx.copy_hypercalls_per_packet 0.060\n"
                    "FIG unetbackd.r2.guest_rx.copy_hypercalls_per_packet 0.080\n"
                    "FIG unetbackd.r1.domu_to_domu.copy_hypercalls_per_packet 0.5\n"
                    "FIG unetbackd.r1.domu_to_domu_reverse.copy_hypercalls_per_packet 0.3\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        pp = d["unetbackd_per_packet"]["unetbackd"]
        self.assertAlmostEqual(pp["guest_rx"]["copy_hypercalls_per_packet"], 0.07, places=3)
        self.assertAlmostEqual(pp["domu_to_domu"]["copy_hypercalls_per_packet"], 0.4, places=3)
        self.assertIn("copy hc", text)
        self.assertNotIn("unetbackd.r1.guest_rx.copy_hypercalls_per_packet", text)  # in the table

    def test_the_internal_switch_rounds_are_compared_with_the_kernels_domu_to_domu(self):
        # switch_d2d_round's figures: labu <-> labu2 on unetbackd's switch, both ways; the
        # kernel's domU -> domU over xenbr0 of the same round is the baseline (328 + 382).
        with open(self.results, "a") as f:
            f.write("FIG unetbackd_sw.r1.domu_to_domu.mbps 500\n"
                    "FIG unetbackd_sw.r1.domu_to_domu_reverse.mbps 565\n"
                    "FIG unetbackd_sw.r1.domu_to_domu.wakeups_per_packet 0.1\n"
                    "CHECK unetbackd_sw.r1.switched PASS tx_switched grew by 90000 during the two transfers\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        self.assertAlmostEqual(d["ratios"]["domu_to_domu_switch"], (500 + 565) / (328 + 382), places=2)
        # The bridge row keeps unetbackd's own figures (236 + 205), not the switch's.
        self.assertAlmostEqual(d["ratios"]["domu_to_domu"], (236 + 205) / (328 + 382), places=2)
        self.assertEqual(d["means_mbps"]["domu_to_domu"]["unetbackd_sw"], 500.0)
        self.assertIn("domU -> domU, ub switch", text)
        self.assertNotIn("unetbackd_sw.r1.domu_to_domu.mbps", text)  # shown in its row only

    def test_both_sides_costs_per_frame_are_averaged_per_backend_and_direction(self):
        # side_costs of two rounds of the kernel's domU -> domU (both ways pooled) and one of
        # unetbackd's guest RX: means per backend and scenario, shown in the table.
        with open(self.results, "a") as f:
            f.write("FIG kernel.r1.domu_to_domu.pp.dom0_irqs 0.5\n"
                    "FIG kernel.r1.domu_to_domu_reverse.pp.dom0_irqs 0.7\n"
                    "FIG kernel.r2.domu_to_domu.pp.dom0_irqs 0.6\n"
                    "FIG kernel.r1.domu_to_domu.pp.domU_cpu_us 12.5\n"
                    "FIG unetbackd.r1.domu_to_domu.pp.dom0_irqs 0.2\n"
                    "FIG unetbackd.r1.guest_rx.pp.domU_irqs 0.04\n"
                    "FIG unetbackd.r1.guest_rx.pp.dom0_cpu_us 9.25\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        costs = d["side_costs_per_frame"]
        self.assertAlmostEqual(costs["domu_to_domu"]["kernel"]["dom0_irqs"], 0.6, places=3)
        self.assertEqual(costs["domu_to_domu"]["kernel"]["domU_cpu_us"], 12.5)
        self.assertEqual(costs["domu_to_domu"]["unetbackd"], {"dom0_irqs": 0.2})
        self.assertEqual(costs["guest_rx"]["unetbackd"], {"domU_irqs": 0.04, "dom0_cpu_us": 9.25})
        self.assertNotIn("guest_tx", costs)
        self.assertIn("both sides, per frame of the domU's eth0", text)
        self.assertRegex(text, r"domu_to_domu, kernel +0\.6 +- +- +12\.5")
        self.assertRegex(text, r"guest_rx, unetbackd +- +0\.04 +9\.2")
        self.assertNotIn("kernel.r1.domu_to_domu.pp.dom0_irqs", text)  # shown in its row only

    def test_a_restart_under_a_running_guest_is_summed_up_per_kind(self):
        with open(self.results, "a") as f:
            f.write("FIG adopt.unetbackd.crash.outage_ms 850\n"
                    "FIG adopt.unetbackd.crash.stall_ms 900\n"
                    "FIG adopt.unetbackd.crash.adopted_s 2.4\n"
                    "FIG adopt.unetbackd.takeover.outage_ms 120\n"
                    "CHECK adopt.unetbackd.crash.states_stayed_4 PASS frontend/backend states seen every 20 ms: 4/4\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        self.assertEqual(d["adoption"]["crash"], {"outage_ms": 850.0, "stall_ms": 900.0, "adopted_s": 2.4})
        self.assertEqual(d["adoption"]["takeover"], {"outage_ms": 120.0})
        self.assertIn("crash: outage 850 ms, stream stall 900 ms, adopted after 2.4 s", text)

    def test_the_split_of_a_restarts_gap_and_the_kernel_reload_baseline_are_reported(self):
        with open(self.results, "a") as f:
            f.write("FIG adopt.unetbackd.takeover.outage_ms 2140\n"
                    "FIG adopt.unetbackd.takeover.handover_ms 12.5\n"
                    "FIG adopt.unetbackd.takeover.exit_to_exec_ms 900\n"
                    "FIG adopt.unetbackd.takeover.exec_to_setup_ms 400\n"
                    "FIG adopt.unetbackd.takeover.setup_to_adopted_ms 30\n"
                    "FIG adopt.unetbackd.takeover.gap_after_start_ms 480\n"
                    "FIG adopt.kernel.reload.guest_lost 1\n"
                    "FIG adopt.kernel.reload.rmmod_rc 0\n"
                    "FIG adopt.kernel.reload.window_ms 20400\n"
                    "FIG adopt.kernel.reload.states_seen 4/4,4/6,6/6\n"
                    "CHECK adopt.kernel.reload.measured PASS rmmod rc=0\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        self.assertEqual(d["adoption"]["takeover"]["exit_to_exec_ms"], 900.0)
        self.assertEqual(d["adoption"]["takeover"]["gap_after_start_ms"], 480.0)
        self.assertEqual(d["adoption"]["kernel_reload"]["guest_lost"], 1.0)
        self.assertEqual(d["adoption"]["kernel_reload"]["states_seen"], "4/4,4/6,6/6")
        # In the order the parts happen: the handover, then the restart, then the new process.
        self.assertIn("takeover, ms: handover 12, exit_to_exec 900, exec_to_setup 400, setup_to_adopted 30, "
                      "gap_after_start 480", text)
        self.assertIn("kernel netback reloaded under a running guest (the baseline): guest lost, rmmod_rc 0, "
                      "states_seen 4/4,4/6,6/6, window_ms 20400", text)
        self.assertNotIn("kernel_reload: outage", text)

    def test_an_upgrade_to_a_successor_is_reported_with_its_own_split(self):
        with open(self.results, "a") as f:
            f.write("FIG adopt.unetbackd.upgrade.outage_ms 310\n"
                    "FIG adopt.unetbackd.upgrade.request_to_upgrade_ms 40\n"
                    "FIG adopt.unetbackd.upgrade.successor_to_main_ms 150\n"
                    "FIG adopt.unetbackd.upgrade.successor_setup_ms 90\n"
                    "FIG adopt.unetbackd.upgrade.successor_ask_ms 2\n"
                    "FIG adopt.unetbackd.upgrade.handover_ms 20\n"
                    "FIG adopt.unetbackd.upgrade.handed_over_to_exit_ms 5\n"
                    "FIG adopt.unetbackd.upgrade.exit_to_lock_ms 15\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        self.assertEqual(d["adoption"]["upgrade"]["successor_to_main_ms"], 150.0)
        self.assertIn("upgrade: outage 310 ms", text)
        self.assertIn("upgrade, ms: request_to_upgrade 40, successor_to_main 150, successor_setup 90, "
                      "successor_ask 2, handover 20, handed_over_to_exit 5, exit_to_lock 15", text)

    def test_a_failed_check_fails_the_run(self):
        with open(self.results, "a") as f:
            f.write("CHECK unetbackd.r1.no_tap FAIL vif5.0 still there\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 1)
        self.assertFalse(d["passed"])
        self.assertIn("FAILED unetbackd.r1.no_tap: vif5.0 still there", text)

    def test_a_dom0_process_that_died_of_a_memory_error_makes_the_boot_an_environment_fault(self):
        self.write_console(CONSOLE.replace("XENLAB 800.0 DONE",
                                           "malloc(): unsorted double linked list corrupted\nXENLAB 800.0 DONE"))
        rc, d, _ = self.report()
        self.assertEqual(rc, 3)
        self.assertTrue(d["environment_fault"])
        self.assertEqual(len(d["memory_errors"]), 1)
        self.assertTrue(d["memory_errors"][0].startswith("unetbackd round 1: malloc()"))

    def test_a_stalled_boot_is_an_environment_fault_and_says_so(self):
        os.unlink(self.results)  # dom0 never ran a scenario
        self.write_console("(XEN) PCI add device 0000:00:04.0\n")
        rc, d, text = self.report(stalled="1")
        self.assertEqual(rc, 3)
        completed = [c for c in d["checks"] if c["name"] == "lab.completed"]
        self.assertEqual(completed[0]["result"], "FAIL")
        self.assertEqual(completed[0]["detail"], "dom0's boot stalled")
        self.assertIn("boot stalled before its first scenario", text)

    def test_a_boot_that_timed_out_fails_without_blaming_the_environment(self):
        os.unlink(self.results)
        rc, d, _ = self.report(timed_out="1")
        self.assertEqual(rc, 1)
        self.assertFalse(d["environment_fault"])
        self.assertIn({"name": "lab.completed", "result": "FAIL", "detail": "timed out"}, d["checks"])

    def test_the_lifecycle_outages_are_summed_up_per_step_and_backend(self):
        # Recorded in the lab (2026-12-01, --only life): xl save + xl restore of labu on each
        # backend, the 50 ms pinger's longest gap, and the TCP stream's stall across it.
        with open(self.results, "a") as f:
            f.write("FIG saverestore.kernel.1.outage_ms 18157\n"
                    "FIG saverestore.kernel.1.stall_ms 19300\n"
                    "FIG saverestore.unetbackd.1.outage_ms 20842\n"
                    "FIG saverestore.unetbackd.2.outage_ms 19000\n"
                    "FIG saverestore.unetbackd.1.stall_ms 21100\n"
                    "FIG saverestore.unetbackd.mq.outage_ms 25000\n"
                    "FIG saverestore.unetbackd.1.first_ping_after_ms 1200\n"
                    "FIG migrate.pv_live_migration unsupported\n"
                    "FIG migrate.unetbackd.1.outage_ms 150\n"
                    "FIG migrate.kernel.1.refused_outage_ms 150\n"
                    "FIG migrate.unetbackd.2.refused_outage_ms 402\n"
                    "FIG migrate.unetbackd.pv.refused_outage_ms 97\n"
                    "CHECK saverestore.unetbackd.1.connected PASS vif 5/0: frontend state 4, backend state 4\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        life = d["lifecycle_ms"]
        self.assertEqual(life["saverestore"]["kernel"], {"median": 18157.0, "max": 18157.0, "n": 1})
        self.assertEqual(life["saverestore"]["unetbackd"], {"median": 19921.0, "max": 20842.0, "n": 2})
        self.assertEqual(life["saverestore.stream_stall"]["unetbackd"]["max"], 21100.0)
        self.assertEqual(life["saverestore.mq"]["unetbackd"]["n"], 1)
        self.assertEqual(life["saverestore.served_after_resume"], {"unetbackd": {"median": 1200.0, "max": 1200.0, "n": 1}})
        self.assertEqual(life["migrate"], {"unetbackd": {"median": 150.0, "max": 150.0, "n": 1}})
        self.assertEqual(d["figures"]["migrate.pv_live_migration"], "unsupported")
        # A refused attempt (Debian's Xen: no PV log-dirty) is not counted as a migration.
        self.assertEqual(life["migrate.refused"]["unetbackd"], {"median": 402.0, "max": 402.0, "n": 1})
        self.assertEqual(life["migrate.refused"]["kernel"]["n"], 1)
        # The PV domU's refused attempt beside the PVH domU's migrations: a step of its own.
        self.assertEqual(life["migrate.pv.refused"], {"unetbackd": {"median": 97.0, "max": 97.0, "n": 1}})
        self.assertIn("guest lifecycle, ms", text)
        self.assertRegex(text, r"saverestore +18157 \(max 18157, n=1\) +19921 \(max 20842, n=2\)")

    def test_a_run_without_lifecycle_steps_has_an_empty_lifecycle_summary(self):
        _, d, text = self.report()
        self.assertEqual(d["lifecycle_ms"], {})
        self.assertEqual(d["migrations"], {})
        self.assertNotIn("guest lifecycle", text)
        self.assertNotIn("live migrations", text)

    def test_a_guest_that_triple_faulted_makes_the_boot_an_environment_fault(self):
        # Xen's line for the PVH domU of a --only life boot (2026-12-02): it crashed right after
        # an intercepted RDTSC, on the kernel netback as on unetbackd.
        self.write_console(CONSOLE.replace(
            "XENLAB 800.0 DONE",
            "XENLAB 500.0 === guest lifecycle on unetbackd: xl save/restore x2 (PV), xl migrate localhost x10 (PVH)\n"
            "(XEN) d15v0 Triple fault - invoking HVM shutdown action 1\n"
            "(XEN) *** Dumping Dom15 vcpu#0 state: ***\n"
            "XENLAB 800.0 DONE"))
        rc, d, text = self.report()
        self.assertEqual(rc, 3)
        self.assertTrue(d["environment_fault"])
        self.assertEqual(len(d["guest_triple_faults"]), 1)
        self.assertIn("guest lifecycle on unetbackd", d["guest_triple_faults"][0])
        self.assertEqual(d["memory_errors"], [])
        self.assertIn("FAILED domU.no_triple_fault", text)
        self.assertIn("triple-faulted", text)

    def test_a_live_migration_is_clean_only_when_every_one_of_its_checks_passed(self):
        # migrate_once's checks (tools/xenlab/parts/life.sh) for the PVH domU: one kernel
        # migration, three on unetbackd of which one left an event channel to the old domid. The HAP check and the
        # PV domU's refused attempt are not migrations.
        with open(self.results, "a") as f:
            f.write("CHECK migrate.kernel.hap PASS xl info virt_caps: pv hvm hap\n"
                    "CHECK migrate.kernel.1.xl_migrate PASS xl migrate localhost rc=0\n"
                    "CHECK migrate.kernel.1.old_vif.no_tap PASS vif3.0 gone\n"
                    "CHECK migrate.kernel.1.connected PASS vif 4/0: frontend state 4, backend state 4\n"
                    "CHECK migrate.unetbackd.pv.refused_cleanly PASS xl migrate rc=1: log-dirty refused\n"
                    "CHECK migrate.unetbackd.1.xl_migrate PASS xl migrate localhost rc=0\n"
                    "CHECK migrate.unetbackd.1.old_vif.no_bound_port PASS no event channel left to dom7\n"
                    "CHECK migrate.unetbackd.2.xl_migrate PASS xl migrate localhost rc=0\n"
                    "CHECK migrate.unetbackd.2.old_vif.no_bound_port FAIL Port 41 Waiting connection\n"
                    "CHECK migrate.unetbackd.mq.xl_migrate PASS xl migrate localhost rc=0\n"
                    "CHECK migrate.unetbackd.mq.queues PASS frontend multi-queue-num-queues=2\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 1)
        self.assertEqual(d["migrations"], {"kernel": {"attempted": 1, "clean": 1},
                                           "unetbackd": {"attempted": 3, "clean": 2}})
        self.assertIn("live migrations (xl migrate to this host, every check passed): kernel 1 of 1, "
                      "unetbackd 2 of 3", text)

    def test_the_driver_domain_part_gets_its_ratios_grant_figures_and_checks(self):
        # The driverdomain lines of a --quick --only dd boot (2026-12-01, tools/xenlab/parts/dd.sh
        # dd_part): labdd serving labc with unetbackd, then with the kernel netback.
        with open(os.path.join(DATA, "xenlab-results-dd.txt")) as f:
            dd_lines = f.read()
        with open(self.results, "a") as f:
            f.write(dd_lines)
        rc, d, text = self.report()
        self.assertEqual(rc, 0)
        m = d["means_mbps"]
        for key in ("dd_guest_tx", "dd_guest_rx"):
            self.assertEqual(set(m[key]), {"kernel", "unetbackd"})
            self.assertAlmostEqual(d["ratios"][key], m[key]["unetbackd"] / m[key]["kernel"], places=2)
        self.assertIn("driver domain, guest TX", text)
        self.assertIn("driver domain, guest RX", text)
        # The driver domain's own rows do not leak into the dom0 rows.
        self.assertEqual(d["means_mbps"]["guest_tx"], {"kernel": 760.0, "unetbackd": 348.0})
        dd = d["driver_domain"]
        n = sum(1 for l in dd_lines.splitlines() if l.startswith("CHECK driverdomain."))
        self.assertEqual((dd["checks"], dd["checks_passed"]), (n, n))
        self.assertIn("dd_maptrack_frames_max", dd["grants"]["unetbackd"])
        self.assertIn("client_grant_frames", dd["grants"]["kernel"])
        self.assertRegex(text, rf"driver domain: {n} of {n} driverdomain\.\* checks passed")

    def test_a_client_left_behind_in_the_driver_domain_fails_the_run(self):
        with open(self.results, "a") as f:
            f.write("CHECK driverdomain.unetbackd.client.no_tap FAIL vif3.0 in labdd: 7: vif3.0: <BROADCAST>\n")
        rc, d, text = self.report()
        self.assertEqual(rc, 1)
        self.assertEqual(d["driver_domain"], {"checks_passed": 0, "checks": 1, "grants": {}})
        self.assertIn("FAILED driverdomain.unetbackd.client.no_tap", text)

    def test_a_wrong_number_of_arguments_is_a_usage_error(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(xenlab_report.main(["only-one"]), 2)
        self.assertIn("usage:", err.getvalue())


if __name__ == "__main__":
    unittest.main()
