"""unetback's lab: one world (xensim, a dom0 namespace, unetbackd, guests made by unetback-xl)
and the measurements taken in it, shared by the lab's commands (`tools/lab.sh demo`, `soak`,
`bench`, `bench --experiments`).

  world     World: brings a xensim world up under names of its own, tears down what it made
  iperf     the iperf3 runner and the parsing of its JSON
  udpflow   the unetback-udpflow runner and the parsing of its report
  procfs    /proc accounting of a process (RSS, fds, guest memory views, CPU, context switches)
  counters  unetbackd's per-queue counters (unetback-ctl --json stats), summed, and their ratios
  perfstat  syscalls of a process counted by perf stat (raw_syscalls:sys_enter)
  stats     medians, per-round ratios, Jain's fairness index
  commands: demo, soak, experiments, bench (with bench_run: one measured run of a path;
            bench_scaling: queue and guest scaling, memory per vif; bench_report: its figures,
            table, JSON, plot), xenlab-report (the real-Xen lab's report, run by
            tools/lab/xenlab.sh)
"""
