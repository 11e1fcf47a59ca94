"""unetback's lab: one world (xensim, a dom0 namespace, unetbackd, guests made by unetback-xl)
and the measurements taken in it, shared by the lab's commands (`tools/lab.sh demo`, `soak`, `bench --experiments`).

  world     World: brings a xensim world up under names of its own, tears down what it made
  iperf     the iperf3 runner and the parsing of its JSON
  udpflow   the unetback-udpflow runner and the parsing of its report
  procfs    /proc accounting of a process (RSS, fds, guest memory views, CPU, context switches)
  counters  unetbackd's per-queue counters (unetback-ctl --json stats), summed, and their ratios
"""
