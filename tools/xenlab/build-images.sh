#!/usr/bin/env bash
# Builds (or reuses) the Xen lab images from Debian bookworm packages:
#   CACHE/xen.elf            the Xen 4.17 hypervisor (QEMU -kernel loads the multiboot ELF)
#   CACHE/vmlinuz            the Debian kernel, for dom0 and every domU
#   CACHE/kernel/            that kernel's modules (domU initramfs are built from it at run time)
#   CACHE/dom0-initrd.cpio.gz  busybox + virtio-blk + ext4: mounts /dev/vda, switch_root
#   CACHE/rootfs.img         ext4 dom0 root (debootstrap minbase + xen-utils-4.17 ...); QEMU
#                            opens it with snapshot=on, so a boot never changes the cached image
# The dom0 root only carries a small /sbin/xenlab-init that mounts the 9p share and runs the
# scenario script from it: changing the scenarios or the project's binaries needs no rebuild.
# The cache is keyed by a hash of this script: edit it and the next run rebuilds.
#
# usage: build-images.sh CACHE_DIR
set -euo pipefail
CACHE=${1:?usage: build-images.sh CACHE_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
log() { printf '[xenlab] %s\n' "$*" >&2; }

KEY=$(cat "$HERE/build-images.sh" "$HERE/dom0-initrd-init" "$HERE/xenlab-init" | sha256sum | cut -c1-16)
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
if [[ ! -x $R/usr/lib/xen-4.17/bin/xl ]]; then
  rm -rf "$R"
  debootstrap --variant=minbase \
    --include=xen-utils-4.17,xenstore-utils,iperf3,iproute2,bridge-utils,kmod,procps,util-linux,ethtool,psmisc,busybox-static,iputils-ping,udev,strace,linux-perf \
    bookworm "$R" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap.log"; exit 1; }
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
rm -f "$CACHE/rootfs.img"
mkfs.ext4 -q -F -L xenlab -d "$R" "$CACHE/rootfs.img" 2G
echo "$KEY" >"$CACHE/stamp"
log "images ready in $CACHE"
