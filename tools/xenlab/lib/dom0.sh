# shellcheck shell=bash
# dom0's preparation before the lab parts (dom0_setup) and the package's removal after them
# (remove_checks), as dom0-run.sh calls them.
#   dom0_setup   in this order: dom0_boot (systemd as PID 1, xenstored from xen.service, modules,
#                the core-dump logger, xenbr0 at 10.99.0.1/24), pkg_install (dpkg -i of
#                /host/debs/unetback_*.deb: unetbackd.service active, READY=1, Before=
#                libvirtd.service, the modprobe file refusing xen-netback), canary_start (the
#                128 MiB tmpfs canary integrity checks), xen_caps (xl info's virt_caps),
#                watchdog_start (a process list on the console after 45 s without a line),
#                domu_configs (the lab domUs' xl configs in /tmp: u1, u2, u1s, u2s, mq, shim,
#                p1, pmq)
#   mkcfg FILE NAME VCPUS IP MAC RAMDISK [TYPE]   an xl config of a lab domU on xenbr0
#   remove_checks  apt-get remove unetback: the service stopped, the daemon gone
# Uses from lib/common.sh: say, fig, check, up, now, since, unit_prop; from lib/daemon.sh:
# start_unetbackd. Globals set: CANARY_SUM, VIRT_CAPS, READY_US, EXEC_US, WATCHDOG_PID (and the
# setup's scratch variables, which are global too: XS_PID, MODFILE, t0, rc, st, loaded,
# befores). Read: H, OUT, ROUNDS, SECS, SHIM, UNIT.

# dom0_boot: what xen.service left, the modules, the core-dump logger, xenbr0.
dom0_boot() {
  # dom0 setup. systemd (PID 1) ran Debian's /etc/init.d/xen as xen.service: xenfs, xen-evtchn,
  # xen-gntdev, xenstored, xen-init-dom0, xenconsoled. What is left is the operator's part.
  say "dom0 up, kernel $(uname -r), rounds=$ROUNDS secs=$SECS shim=$SHIM"
  fig dom0_boot_s "$(up)"
  check dom0.systemd_pid1 "$([ "$(cat /proc/1/comm)" = systemd ] && echo 0 || echo 1)" \
    "PID 1 is $(cat /proc/1/comm), system state $(systemctl is-system-running 2>&1)"
  XS_PID=$(pgrep -o -x oxenstored || pgrep -o -x xenstored)
  check dom0.xenstored_from_xen_service "$(grep -qs '/xen.service$' "/proc/${XS_PID:-0}/cgroup" && echo 0 || echo 1)" \
    "$(cat "/proc/${XS_PID:-0}/comm" 2>/dev/null || echo "no xenstored") pid ${XS_PID:-none}, cgroup $(cut -d: -f3 "/proc/${XS_PID:-0}/cgroup" 2>/dev/null)"
  fig dom0.xenstored "$(cat "/proc/${XS_PID:-0}/comm" 2>/dev/null || echo none)"
  systemd-analyze >"$OUT/systemd-analyze-at-start.txt" 2>&1
  modprobe -a xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs bridge tun
  mountpoint -q /proc/xen || mount -t xenfs xenfs /proc/xen
  # perf finds its tracepoints (unetbackd's syscall count) in tracefs.
  mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
  # A process that dies of a signal with a core dump is named on the console (the core itself
  # is dropped): heap corruption in any dom0 process shows which one it was.
  cat >/run/corelog <<'EOF2'
#!/bin/sh
echo "XENLAB-CORE $(cut -d' ' -f1 /proc/uptime) $1[$2] died of signal $3" >/dev/console
cat >/dev/null
EOF2
  chmod +x /run/corelog
  echo '|/run/corelog %e %p %s' >/proc/sys/kernel/core_pattern
  ulimit -c unlimited
  mkdir -p /var/log/xen/console
  ip link add xenbr0 type bridge
  ip addr add 10.99.0.1/24 dev xenbr0
  ip link set xenbr0 up
  ip link set lo up
}

pkg_install() {
  # The package, as an operator installs it: dpkg -i from the share. Its postinst enables and
  # starts unetbackd.service (Type=notify: systemctl's start job ends at the daemon's READY=1).
  t0=$(now)
  dpkg -i "$H"/debs/unetback_*.deb >"$OUT/dpkg-install.log" 2>&1
  rc=$?
  fig pkg.install_s "$(since "$t0")"
  check pkg.dpkg_install $rc "dpkg -i $(cd "$H/debs" && ls unetback_*.deb | tr '\n' ' ')rc=$rc"
  [ $rc = 0 ] || tail -15 "$OUT/dpkg-install.log" | sed 's/^/XENLAB   dpkg: /'
  dpkg --verify unetback >/dev/null 2>&1
  check dom0.programs_copied $? "the package's files in dom0 match its md5sums (dpkg --verify unetback)"
  st=$(systemctl is-active "$UNIT")
  check systemd.unetbackd_active "$([ "$st" = active ] && echo 0 || echo 1)" \
    "after dpkg -i: systemctl is-active $UNIT: $st (Type=$(unit_prop Type), enabled: $(systemctl is-enabled "$UNIT" 2>&1))"
  [ "$st" = active ] || unit_diagnosis
  # The unit's sandbox is in effect (tools/dist/hardening.conf): only CAP_NET_ADMIN is left, and
  # inside its mount namespace /proc/xen is still xenfs (ProtectKernelTunables= and
  # ProtectControlGroups= give the unit a /proc without it; BindReadOnlyPaths= brings it back).
  # The driver-domain unit is skipped in the control domain: its condition reads /proc/xen too.
  local caps pid
  caps=$(unit_prop CapabilityBoundingSet)
  pid=$(unit_prop MainPID)
  check systemd.unit_sandbox "$([ "$caps" = cap_net_admin ] && [ "${pid:-0}" != 0 ] &&
    nsenter -t "$pid" -m grep -q control_d /proc/xen/capabilities && echo 0 || echo 1)" \
    "CapabilityBoundingSet=$caps; /proc/xen/capabilities in the daemon's mount namespace: $(
      [ "${pid:-0}" != 0 ] && nsenter -t "$pid" -m cat /proc/xen/capabilities 2>&1 | head -1)"
  check systemd.driver_domain_unit_skipped "$([ "$(systemctl is-active unetbackd-driver-domain.service)" != active ] && echo 0 || echo 1)" \
    "unetbackd-driver-domain.service in dom0: $(systemctl is-active unetbackd-driver-domain.service 2>&1), $(systemctl show -p ConditionResult --value unetbackd-driver-domain.service 2>&1)"
  READY_US=$(unit_prop ActiveEnterTimestampMonotonic)
  EXEC_US=$(unit_prop ExecMainStartTimestampMonotonic)
  [ "${READY_US:-0}" -gt 0 ] && [ "${EXEC_US:-0}" -gt 0 ] &&
    fig systemd.ready_after_exec_s "$(awk -v a="$EXEC_US" -v b="$READY_US" 'BEGIN{printf "%.3f", (b - a) / 1e6}')"
  befores=$(unit_prop Before)
  check systemd.unetbackd_before_libvirtd "$(echo " $befores " | grep -q ' libvirtd.service ' && echo 0 || echo 1)" \
    "Before=$befores"
  # The modprobe file: udev's alias load is blacklisted, an explicit load by name is refused.
  # The kernel netback rounds below load it with modprobe -i (--ignore-install), which skips the
  # package's "install xen-netback /bin/false" on purpose, with unetbackd.service stopped.
  MODFILE=$(dpkg -L unetback 2>/dev/null | grep '/modprobe.d/' | head -1)
  modprobe xen-netback >/dev/null 2>&1
  rc=$?
  lsmod | grep -q '^xen_netback'
  loaded=$?
  check pkg.netback_load_refused "$([ $rc != 0 ] && [ $loaded != 0 ] && echo 0 || echo 1)" \
    "modprobe xen-netback rc=$rc, $([ $loaded = 0 ] && echo loaded || echo not loaded) ($MODFILE: $(grep -v '^#' "$MODFILE" 2>/dev/null | tr '\n' ';'))"
  rmmod xen-netback 2>/dev/null
}

canary_start() {
  # Integrity probe: a tmpfs file of random data whose checksum is taken again after every
  # scenario. A stray write into dom0 memory (a grant copy landing on the wrong frame, say) shows
  # up here, or as processes dying of heap corruption (counted from the console on the host).
  head -c 128M /dev/urandom >/tmp/canary
  # shellcheck disable=SC2034 # read by integrity (lib/common.sh)
  CANARY_SUM=$(sha256sum </tmp/canary)
}

xen_caps() {
  say "dom0 ready: $(xl info | awk '/xen_version/{print "xen " $3}'), $(nproc) vCPUs"
  # What the hypervisor can run: virt_caps has hvm and hap when the emulated CPU offers SVM with
  # nested paging (XENLAB_CPU), which PVH guests and their live migration need (log-dirty on HAP;
  # this Xen has no shadow paging). Xen's boot messages about it are kept in out/.
  xl info >"$OUT/xl-info.txt" 2>&1
  xl dmesg >"$OUT/xl-dmesg-boot.txt" 2>&1
  VIRT_CAPS=$(awk -F': *' '/^virt_caps/ {print $2}' "$OUT/xl-info.txt")
  fig xen.virt_caps "$(echo "${VIRT_CAPS:-none}" | tr -s ' ' ',')"
  grep -E 'SVM|HAP|VMX|HVM:' "$OUT/xl-dmesg-boot.txt" | head -12 | sed 's/^/XENLAB   xen: /'
  for u in xen.service libvirtd.socket systemd-udevd.service; do say "unit $u: $(systemctl is-active $u)"; done
  fig dom0_ready_s "$(up)"
}

watchdog_start() {
  # Watchdog: when the scenarios have said nothing for 45 s, what every process is doing goes
  # to the console (a hang then shows where it is: a command in D state, a spinning process, or
  # nothing at all when the whole of dom0 stopped).
  (
    while sleep 15; do
      quiet=$(awk -v l="$(cat /tmp/last-say 2>/dev/null || echo 0)" -v n="$(up)" 'BEGIN{printf "%d", n-l}')
      if [ "${quiet:-0}" -ge 45 ]; then
        echo "XENLAB-WATCHDOG $(up) quiet ${quiet}s, load $(cut -d' ' -f1-3 /proc/loadavg)"
        ps -eo pid,ppid,stat,pcpu,wchan:24,args --sort=-pcpu 2>&1 | head -25 | sed 's/^/XENLAB-WATCHDOG   /' | cut -c1-180
      fi
    done
  ) &
  # shellcheck disable=SC2034 # read by dom0-run.sh, which ends the watchdog
  WATCHDOG_PID=$!
}

mkcfg() { # mkcfg FILE NAME VCPUS IP MAC RAMDISK [TYPE: pv (default) or pvh]
  cat >"$1" <<EOF
name = "$2"
type = "${7:-pv}"
kernel = "/tmp/img/vmlinuz"
ramdisk = "/tmp/img/$6"
extra = "console=hvc0 rdinit=/init lab_ip=$4/24 quiet loglevel=4"
memory = 256
vcpus = $3
vif = [ 'bridge=xenbr0,mac=$5' ]
on_crash = "destroy"
on_poweroff = "destroy"
EOF
  # A guest that crashes (Xen: "Triple fault - invoking HVM shutdown action 1", a reboot) is not
  # restarted under a new domid in the middle of a scenario.
  echo 'on_reboot = "destroy"' >>"$1"
}
domu_configs() {
  # domU configs: stock xl, stock vif-bridge (the default vif script).
  mkdir -p /tmp/img
  cp "$H/vmlinuz" "$H"/domU-*.cpio.gz /tmp/img/
  mkcfg /tmp/u1.cfg labu 1 10.99.0.2 00:16:3e:00:00:02 domU-initrd.cpio.gz
  mkcfg /tmp/u2.cfg labu2 1 10.99.0.5 00:16:3e:00:00:05 domU-initrd.cpio.gz
  # The same two domUs on unetbackd's internal switch "lab" (its hotplug script, no dom0 bridge):
  # see switch_d2d_round.
  sed "s/'bridge=xenbr0,mac=\(.*\)'/'bridge=unetback:lab,script=vif-unetback,mac=\1'/" /tmp/u1.cfg >/tmp/u1s.cfg
  sed "s/'bridge=xenbr0,mac=\(.*\)'/'bridge=unetback:lab,script=vif-unetback,mac=\1'/" /tmp/u2.cfg >/tmp/u2s.cfg
  mkcfg /tmp/mq.cfg labmq 2 10.99.0.3 00:16:3e:00:00:03 domU-initrd.cpio.gz
  mkcfg /tmp/shim.cfg labshim 1 10.99.0.4 00:16:3e:00:00:04 domU-shim-initrd.cpio.gz
  # PVH domUs (the guest lifecycle's migrations): the same kernel, initramfs and xen-netfront,
  # booted directly as PVH guests (no device model). Their log-dirty mode runs on HAP, which Xen
  # has when the emulated CPU offers SVM with nested paging (XENLAB_CPU, xenlab.sh).
  mkcfg /tmp/p1.cfg labp 1 10.99.0.6 00:16:3e:00:00:06 domU-initrd.cpio.gz pvh
  mkcfg /tmp/pmq.cfg labpmq 2 10.99.0.7 00:16:3e:00:00:07 domU-initrd.cpio.gz pvh
}

# dom0_setup: everything dom0-run.sh does before the first part, in this order.
dom0_setup() {
  dom0_boot
  pkg_install
  canary_start
  xen_caps
  watchdog_start
  domu_configs
}

# apt-get remove: the service is stopped (by the package's prerm), the daemon gone, the
# programs removed, the conffiles kept until a purge.
remove_checks() {
  local t0 rc pid st
  say "=== apt-get remove unetback"
  [ "$(systemctl is-active "$UNIT")" = active ] || start_unetbackd
  pid=$(unit_prop MainPID)
  t0=$(now)
  apt-get remove -y unetback >"$OUT/apt-remove.log" 2>&1
  rc=$?
  fig pkg.remove_s "$(since "$t0")"
  check pkg.apt_remove $rc "apt-get remove -y unetback rc=$rc"
  [ $rc = 0 ] || tail -10 "$OUT/apt-remove.log" | sed 's/^/XENLAB   apt: /'
  st=$(systemctl is-active "$UNIT")
  check systemd.remove_stops_service "$([ "$st" != active ] && ! kill -0 "$pid" 2>/dev/null && [ ! -e /usr/sbin/unetbackd ] && echo 0 || echo 1)" \
    "after apt-get remove: $UNIT $st, pid $pid $(kill -0 "$pid" 2>/dev/null && echo alive || echo gone), /usr/sbin/unetbackd $([ -e /usr/sbin/unetbackd ] && echo present || echo removed), dpkg: $(dpkg-query -W -f='${db:Status-Abbrev}' unetback 2>&1)"
  # shellcheck disable=SC2034 # UNETBACKD_PID: every file reads it (set up in lib/common.sh)
  UNETBACKD_PID=
}
