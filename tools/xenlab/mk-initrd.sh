#!/usr/bin/env bash
# Packs a busybox initramfs: mk-initrd.sh CACHE OUT.cpio.gz INIT [FILE[:DEST]...] -- [MODULE...]
# FILEs are host binaries (put at DEST, default the same path) copied with the shared libraries
# ldd reports; a FILE written @PATH is dom0's (CACHE/rootfs/PATH, its libraries as ldd finds
# them in a chroot there), and a directory is copied whole (no libraries); MODULEs come from the
# kernel extracted in CACHE/kernel, with their dependencies, in load order (/modules.order).
set -euo pipefail
CACHE=$1 OUT=$2 INIT=$3
shift 3
files=()
while (($#)) && [[ $1 != -- ]]; do files+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
KVER=$(cat "$CACHE/kver")
M=$CACHE/kernel/lib/modules/$KVER
d=$(mktemp -d /tmp/xenlab-initrd.XXXXXX)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d"/{bin,mods,proc,sys,dev,tmp,newroot}
cp /bin/busybox "$d/bin/busybox"
install -m755 "$INIT" "$d/init"
: >"$d/modules.order"
for m in "$@"; do
  modprobe -d "$CACHE/kernel" -S "$KVER" --show-depends "$m" | awk '/^insmod/{print $2}'
done | awk '!seen[$0]++' | while read -r p; do
  rel=${p#"$M"/}
  mkdir -p "$d/mods/$(dirname "$rel")"
  cp "$p" "$d/mods/$rel"
  echo "$rel" >>"$d/modules.order"
done
for spec in "${files[@]}"; do
  f=${spec%%:*}
  dest=${spec#*:}
  root= # @PATH: from dom0's root tree
  if [[ $f == @* ]]; then
    f=${f#@}
    [[ $dest == @* ]] && dest=${dest#@}
    root=$CACHE/rootfs
  fi
  mkdir -p "$d$(dirname "$dest")"
  if [[ -d $root$f ]]; then
    mkdir -p "$d$dest"
    cp -rL "$root$f/." "$d$dest/"
    continue
  fi
  cp -L "$root$f" "$d$dest"
  if [[ -n $root ]]; then
    libs=$(chroot "$root" ldd "$f" | grep -o '/[^ ]*') || true
  else
    libs=$(ldd "$f" | grep -o '/[^ ]*') || true
  fi
  for lib in $libs; do
    mkdir -p "$d$(dirname "$lib")"
    cp -L "$root$lib" "$d$lib"
  done
done
(cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) >"$OUT"
