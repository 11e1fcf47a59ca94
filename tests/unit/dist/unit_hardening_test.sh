#!/bin/bash
# The systemd units' sandbox: `systemd-analyze security` (offline, on the units as built) rates
# each at most 2.0, and each keeps what the daemon and the stock hotplug scripts need.
# Usage: unit_hardening_test.sh UNIT_FILE...
set -u
fail=0
if ! command -v systemd-analyze >/dev/null; then
  echo "FAIL: systemd-analyze is missing (Debian package systemd; tools/lab.sh deps installs it)"
  exit 1
fi
for unit in "$@"; do
  name=$(basename "$unit")
  out=$(systemd-analyze security --offline=true "$unit" 2>&1)
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
  if [[ -z $score ]]; then
    echo "FAIL: $name: no exposure level in systemd-analyze's output:"
    echo "$out"
    fail=1
    continue
  fi
  echo "FIGURE unit_exposure unit=$name value=$score"
  if ! awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
    echo "FAIL: $name: exposure $score, more than 2.0:"
    grep '✗' <<<"$out"
    fail=1
  fi
  # What the sandbox must leave: a capability for TAPs and links, the Xen devices and the TAP
  # device, a writable /run (state records, control socket, the scripts' locks).
  for want in 'CapabilityBoundingSet=CAP_NET_ADMIN' 'DeviceAllow=/dev/xen/gntdev rw' \
      'DeviceAllow=/dev/xen/evtchn rw' 'DeviceAllow=/dev/net/tun rw' 'ReadWritePaths=/run ' \
      'SystemCallErrorNumber=EPERM'; do
    if ! grep -qF -- "$want" "$unit"; then
      echo "FAIL: $name lacks '$want'"
      fail=1
    fi
  done
  # ProtectKernelTunables=, ProtectControlGroups=, ProtectProc= and ProcSubset= each give the
  # unit a /proc without the xenfs mount on /proc/xen (seen in the real-Xen lab's dom0, systemd
  # 252): the ExecCondition= then finds no /proc/xen/capabilities and systemd skips the unit on
  # every Xen host, unless /proc/xen is bound into the unit again.
  for hiding in 'ProtectKernelTunables=yes' 'ProtectControlGroups=yes' 'ProtectProc=' 'ProcSubset='; do
    if grep -q "^$hiding" "$unit" && ! grep -q '^BindReadOnlyPaths=.*/proc/xen' "$unit"; then
      echo "FAIL: $name sets $hiding, which hides /proc/xen, without BindReadOnlyPaths=/proc/xen"
      fail=1
    fi
  done
done
exit $fail
