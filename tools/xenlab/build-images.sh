#!/usr/bin/env bash
# Builds (or reuses) the Xen lab images from Debian bookworm packages:
#   CACHE/xen.elf            the Xen 4.17 hypervisor (QEMU -kernel loads the multiboot ELF)
#   CACHE/vmlinuz            the Debian kernel, for dom0 and every domU
#   CACHE/kernel/            that kernel's modules (domU initramfs are built from it at run time)
#   CACHE/dom0-initrd.cpio.gz  busybox + virtio-blk + ext4: mounts /dev/vda, switch_root
#   CACHE/rootfs.img         ext4 dom0 root (debootstrap minbase + xen-utils-4.17 ...); QEMU
#                            opens it with snapshot=on, so a boot never changes the cached image
# dom0 boots like an operator's: systemd as PID 1, Xen's daemons from Debian's /etc/init.d/xen
# (systemd's sysv generator makes it xen.service: xenstored, xen-init-dom0, xenconsoled),
# libvirtd (libvirt-daemon-system with the libxl driver, socket-activated). The lab itself is a
# oneshot unit, xenlab.service (After=xen.service), whose /sbin/xenlab-init mounts the 9p share,
# runs the scenario script from it and powers off: changing the scenarios or the project's
# package needs no rebuild. Units that are slow or useless in this emulated machine are masked.
# The cache is keyed by a hash of this script: edit it and the next run rebuilds.
#
# usage: build-images.sh CACHE_DIR
set -euo pipefail
CACHE=${1:?usage: build-images.sh CACHE_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
log() { printf '[xenlab] %s\n' "$*" >&2; }

KEY=$(cat "$HERE/build-images.sh" "$HERE/dom0-initrd-init" "$HERE/xenlab-init" "$HERE/xenlab.service" | sha256sum | cut -c1-16)
if [[ -f $CACHE/stamp && $(cat "$CACHE/stamp") == "$KEY" && -f $CACHE/rootfs.img ]]; then
  log "images cached in $CACHE ($KEY)"
  exit 0
fi
rm -f "$CACHE/stamp"

# The mirror this machine's apt already uses (one-line or deb822 sources).
mirror() {
  awk '$1=="deb"{for(i=2;i<=NF;i++) if($i ~ /^[a-z]+:\/\//){print $i; exit}}' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1
  awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1
}
MIRROR=${MIRROR:-$(mirror | head -1)}
[[ -n $MIRROR ]] || { log "no Debian mirror found in /etc/apt"; exit 1; }

# The kernel the linux-image-amd64 metapackage points at today (e.g. linux-image-6.1.0-57-amd64).
KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
KVER=${KPKG#linux-image-}
XENPKG=xen-hypervisor-4.17-amd64
log "building images: $XENPKG, $KPKG, mirror $MIRROR"

mkdir -p "$CACHE/debs"
(cd "$CACHE/debs" && { ls ${XENPKG}_*.deb >/dev/null 2>&1 || apt-get download -q $XENPKG; } &&
  { ls ${KPKG}_*.deb >/dev/null 2>&1 || apt-get download -q "$KPKG"; })
rm -rf "$CACHE/xen" "$CACHE/kernel"
mkdir -p "$CACHE/xen" "$CACHE/kernel"
dpkg -x "$CACHE"/debs/${XENPKG}_*.deb "$CACHE/xen"
dpkg -x "$CACHE"/debs/${KPKG}_*.deb "$CACHE/kernel"
zcat "$CACHE"/xen/boot/xen-4.17-amd64.gz >"$CACHE/xen.elf"
cp "$CACHE/kernel/boot/vmlinuz-$KVER" "$CACHE/vmlinuz"
depmod -b "$CACHE/kernel" "$KVER"
echo "$KVER" >"$CACHE/kver"

# dom0 initramfs: busybox + the modules needed to reach the root disk.
"$HERE/mk-initrd.sh" "$CACHE" "$CACHE/dom0-initrd.cpio.gz" "$HERE/dom0-initrd-init" -- \
  virtio_pci virtio_blk ext4

R=$CACHE/rootfs
# systemd-sysv: systemd as /sbin/init. libvirt-daemon-system: libvirtd.service and its sockets;
# libvirt-daemon-driver-xen: the libxl driver (virsh -c xen:///); libvirt-clients: virsh. dbus and
# libpam-systemd provide the virtual packages (dbus-system-bus, logind) debootstrap cannot pick.
INCLUDE=xen-utils-4.17,xenstore-utils,iperf3,iproute2,bridge-utils,kmod,procps,util-linux,ethtool,psmisc,busybox-static,iputils-ping,udev,strace,linux-perf,systemd-sysv,dbus,libpam-systemd,libvirt-daemon-system,libvirt-daemon-driver-xen,libvirt-clients
if [[ ! -x $R/usr/lib/xen-4.17/bin/xl || $(cat "$R/.xenlab-include" 2>/dev/null) != "$INCLUDE" ]]; then
  rm -rf "$R"
  debootstrap --variant=minbase --include="$INCLUDE" \
    bookworm "$R" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap.log"; exit 1; }
  echo "$INCLUDE" >"$R/.xenlab-include"
fi
# The point releases this machine has (bookworm-updates, bookworm-security): the hypervisor
# above is the host's candidate (4.17.7 from bookworm-security), and a package built here
# depends on the host's library versions (libxenevtchn1 >= 4.17.7...), as an operator's build
# depends on what their dom0 runs.
if [[ ! -f $R/.xenlab-upgraded ]]; then
  SEC=${SECURITY_MIRROR:-${MIRROR%/debian*}/debian-security}
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' \
    "$MIRROR" "$MIRROR" "$SEC" >"$R/etc/apt/sources.list"
  # No service is started in the chroot (policy-rc.d 101: "action forbidden").
  printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
  chmod 755 "$R/usr/sbin/policy-rc.d"
  mount -t proc proc "$R/proc"
  rc=0
  (chroot "$R" apt-get update -q && DEBIAN_FRONTEND=noninteractive chroot "$R" apt-get -y -q dist-upgrade) \
    >"$CACHE/upgrade.log" 2>&1 || rc=$?
  umount "$R/proc"
  rm -f "$R/usr/sbin/policy-rc.d"
  ((rc == 0)) || { tail -20 "$CACHE/upgrade.log"; exit 1; }
  chroot "$R" apt-get clean
  touch "$R/.xenlab-upgraded"
fi
rm -rf "$R/lib/modules"
mkdir -p "$R/lib/modules"
cp -a "$CACHE/kernel/lib/modules/$KVER" "$R/lib/modules/"
rm -rf "$R/lib/modules/$KVER/kernel/drivers/"{gpu,media,infiniband,net/wireless,net/ethernet} \
  "$R/lib/modules/$KVER/kernel/sound"
depmod -b "$R" "$KVER"
rm -rf "$R/usr/share/doc" "$R/usr/share/man" "$R/usr/share/locale" "$R"/var/cache/apt/archives/*.deb
echo xenlab-dom0 >"$R/etc/hostname"
install -m755 "$HERE/xenlab-init" "$R/sbin/xenlab-init"
# systemd's configuration for the lab's dom0: the lab unit, a fixed machine id (no first-boot
# units), /tmp on tmpfs (the lab's canary lives there), and masks: timers (apt, e2scrub, fstrim,
# logrotate, dpkg-db-backup, tmpfiles-clean, cron), gettys (the console belongs to the lab's
# output), udev's coldplug (systemd-udev-trigger: under TCG it loads parport and friends for a
# minute; udevd itself runs and handles every uevent from then on, the backend/vif ones
# included), logind and libvirt-guests (nothing to log into or resume), and libvirt's default
# NAT network (would need dnsmasq; the lab bridges to xenbr0). libvirtd is socket-activated
# only (libvirtd.socket, as Debian ships it, with --timeout 120): started at boot, it ran beside
# xen.service (it is ordered After=xencommons.service, a unit Debian does not have) and its
# libxl driver then blocked on xenstore before xenstored was up, so virsh hung.
install -m644 "$HERE/xenlab.service" "$R/etc/systemd/system/xenlab.service"
mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/xenlab.service "$R/etc/systemd/system/multi-user.target.wants/xenlab.service"
ln -sf /lib/systemd/system/multi-user.target "$R/etc/systemd/system/default.target"
echo 0123456789abcdef0123456789abcdef >"$R/etc/machine-id"
echo 'tmpfs /tmp tmpfs mode=1777,nosuid,nodev 0 0' >"$R/etc/fstab"
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
  logrotate.timer dpkg-db-backup.timer systemd-tmpfiles-clean.timer getty.target \
  serial-getty@hvc0.service console-getty.service systemd-timesyncd.service cron.service \
  systemd-udev-trigger.service systemd-logind.service libvirt-guests.service \
  modprobe@dm_mod.service modprobe@efi_pstore.service modprobe@fuse.service modprobe@loop.service \
  modprobe@configfs.service sys-kernel-config.mount sys-fs-fuse-connections.mount \
  systemd-binfmt.service proc-sys-fs-binfmt_misc.automount systemd-pstore.service \
  systemd-random-seed.service systemd-sysusers.service systemd-update-utmp.service; do
  ln -sf /dev/null "$R/etc/systemd/system/$u"
done
# Boot time (dom0 at the lab's first line: 128 s on a loaded host, of which 21 s in generators
# before the first job and 46 s of sysinit units competing for the two emulated CPUs; and every
# systemctl daemon-reload, e.g. dpkg -i's, runs the generators again: 30 s): the masks above
# take out what this dom0 never uses (device-mapper, loop, fuse, configfs, EFI pstore, binfmt,
# a random seed and utmp on a snapshot disk, users debootstrap already made); the generators
# for disks this machine does not have (LUKS, dm-verity, dm-integrity, GPT auto-mounts,
# hibernation, offline updates), for gettys (masked above) and for units on the kernel command
# line are masked the same way (/etc/systemd/system-generators/NAME -> /dev/null). What a dom0
# runs stays: journald (volatile: the disk is a snapshot, the lab saves the journal), udevd,
# dbus, the fstab and SysV generators (xen.service and xendomains.service are Debian's init scripts).
mkdir -p "$R/etc/systemd/system-generators" "$R/etc/systemd/journald.conf.d"
for g in systemd-cryptsetup-generator systemd-veritysetup-generator systemd-integritysetup-generator \
  systemd-gpt-auto-generator systemd-hibernate-resume-generator systemd-system-update-generator \
  systemd-run-generator systemd-getty-generator; do
  ln -sf /dev/null "$R/etc/systemd/system-generators/$g"
done
printf '[Journal]\nStorage=volatile\n' >"$R/etc/systemd/journald.conf.d/xenlab.conf"
# libvirt's libxl driver describes the host CPU with a model from libvirt's cpu_map, decoded
# from the CPUID words Xen reports (libxl_get_physinfo's hw_cap), and refuses to start ("Cannot
# find suitable CPU model for given data") when no model fits. None fits this emulated CPU:
# Xen clears sep on AMD CPUs (no SYSENTER in long mode), every host-decodable model in
# cpu_map but 486 and pentium lists sep, those two list vme, and QEMU's qemu64 has no vme (TCG
# cannot emulate it; -cpu qemu64,+vme,enforce is refused). A real AMD CPU has vme, so libvirt
# on a real Xen host decodes at least pentium. Here the lab adds one model to cpu_map with
# features every x86-64 CPU has, so that the CPU stays the qemu64 the lab's figures were
# taken on (another -cpu model would change Xen's and the guests' code paths, and -cpu max
# corrupted dom0 memory).
CPU_MAP=$R/usr/share/libvirt/cpu_map
if [[ -f $CPU_MAP/index.xml ]]; then
  cat >"$CPU_MAP/x86_xenlab-qemu64.xml" <<'XML'
<cpus>
  <!-- unetback's real-Xen lab (tools/xenlab/build-images.sh): QEMU's qemu64 under Xen, which
       reports it without sep (and QEMU without vme). -->
  <model name='xenlab-qemu64'>
    <decode host='on' guest='off'/>
    <feature name='cmov'/>
    <feature name='cx8'/>
    <feature name='fpu'/>
    <feature name='fxsr'/>
    <feature name='lm'/>
    <feature name='mmx'/>
    <feature name='pae'/>
    <feature name='pse'/>
    <feature name='sse'/>
    <feature name='sse2'/>
    <feature name='tsc'/>
  </model>
</cpus>
XML
  grep -q x86_xenlab-qemu64.xml "$CPU_MAP/index.xml" ||
    sed -i "0,/<include filename='x86_486.xml'\/>/s//&\n    <include filename='x86_xenlab-qemu64.xml'\/>/" "$CPU_MAP/index.xml"
  grep -q x86_xenlab-qemu64.xml "$CPU_MAP/index.xml" || { log "cannot add the lab's CPU model to $CPU_MAP/index.xml"; exit 1; }
fi
rm -f "$R/etc/systemd/system/multi-user.target.wants/libvirtd.service"
rm -f "$R"/etc/libvirt/qemu/networks/autostart/*.xml
# xenconsoled keeps the guests' consoles in /var/log/xen/console (the lab saves them).
sed -i 's/^#* *XENCONSOLED_ARGS=.*/XENCONSOLED_ARGS="--log=guest"/' "$R/etc/default/xen"
grep -q '^XENCONSOLED_ARGS=' "$R/etc/default/xen" || echo 'XENCONSOLED_ARGS="--log=guest"' >>"$R/etc/default/xen"
rm -f "$CACHE/rootfs.img"
mkfs.ext4 -q -F -L xenlab -d "$R" "$CACHE/rootfs.img" 2G
echo "$KEY" >"$CACHE/stamp"
log "images ready in $CACHE"
