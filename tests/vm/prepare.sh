#!/usr/bin/env bash
# tests/vm/prepare.sh - host side, idempotent: everything a VM boot needs.
#
#  1. Debian packages (installed only when missing; tools/setup.sh lists them too).
#  2. The Debian kernel that linux-image-amd64 points to: `apt-get download` + `dpkg-deb -x`
#     into $USCM_VM_CACHE/<kver>/ (never installed on the host: no initramfs/grub hooks),
#     `depmod` over the unpacked tree, and an uncompressed vmlinux (boots via PVH: under
#     TCG that skips ~4 s of in-guest decompression).
#  3. A busybox initramfs whose /init (initramfs-init.sh) mounts the host's / read-only
#     over virtio-9p under a tmpfs overlay and switches to it.
#  4. Debian's tgt (the user-space iSCSI target tgtd, 68-dropin-iser), unpacked the same way
#     into $USCM_VM_CACHE/tgt/ and never installed: the package's postinst starts tgtd
#     (tgt.service, or /etc/init.d/tgt) as a daemon on the host wherever an init system
#     runs; unpacked, tgtd runs only where a group starts it, in the guest.
#
# Prints shell assignments (USCM_VM_KVER, _KERNEL, _INITRD, _MODDIR, _TGT) on stdout; progress
# goes to stderr. Needs root. Cache: USCM_VM_CACHE (default /var/cache/uscm-vm).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CACHE=${USCM_VM_CACHE:-/var/cache/uscm-vm}
say() { echo "vm-prepare: $*" >&2; }

# package -> a file that shows it is installed
declare -A NEED=(
  [qemu-system-x86]=/usr/bin/qemu-system-x86_64
  [busybox-static]=/bin/busybox
  [cpio]=/usr/bin/cpio
  [kmod]=/usr/sbin/depmod
  [iproute2]=/usr/bin/rdma
  [ibverbs-providers]=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
  [ibverbs-utils]=/usr/bin/ibv_devinfo
  [rdmacm-utils]=/usr/bin/rping
  [perftest]=/usr/bin/ib_send_bw
  [qperf]=/usr/bin/qperf
  [libfabric-bin]=/usr/bin/fi_pingpong
  [ucx-utils]=/usr/bin/io_demo
  [fio]=/usr/bin/fio
  [python3-pyverbs]=/usr/lib/python3/dist-packages/pyverbs/__init__.py
  [libiscsi-bin]=/usr/bin/iscsi-inq
  [libaio1]=/usr/lib/x86_64-linux-gnu/libaio.so.1
  [qemu-utils]=/usr/bin/qemu-io
  [qemu-block-extra]=/usr/lib/x86_64-linux-gnu/qemu/block-iscsi.so
  [dapl2-utils]=/usr/bin/dtestcm
  [librpma0]=/usr/lib/x86_64-linux-gnu/librpma.so.0
  [librpma-dev]=/usr/include/librpma.h
  [xz-utils]=/usr/bin/xz
  [python3]=/usr/bin/python3
)

updated=0
apt_update() { [ "$updated" = 1 ] || { say "apt-get update"; apt-get update -qq >&2; updated=1; }; }

install_packages() {
  local missing=() p
  for p in "${!NEED[@]}"; do [ -e "${NEED[$p]}" ] || missing+=("$p"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    { apt_update; apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
}

kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}

# -> KVER, KDIR. Unpacks the kernel once; a stale package list is refreshed once.
fetch_kernel() {
  local pkg
  pkg=${USCM_VM_KPKG:-$(kernel_package)}
  if [ -z "$pkg" ]; then apt_update; pkg=$(kernel_package); fi
  if [ -z "$pkg" ]; then   # offline: the newest kernel already cached
    KDIR=$(ls -d "$CACHE"/*/.ready 2>/dev/null | sort -V | tail -1 | xargs -r dirname)
    [ -n "$KDIR" ] || { say "no kernel package known to apt and none cached"; exit 1; }
    KVER=$(basename "$KDIR"); return
  fi
  KVER=${pkg#linux-image-}; KDIR=$CACHE/$KVER
  [ -f "$KDIR/.ready" ] && return
  unpack_deb "$pkg" "$KDIR"
  depmod -b "$KDIR/root" "$KVER"   # the package's postinst would have done this
  touch "$KDIR/.ready"
}

# unpack_deb PKG DIR: `apt-get download` PKG and unpack it into DIR/root (nothing run,
# nothing installed); a stale package list is refreshed once.
unpack_deb() {
  local tmp
  say "downloading and unpacking $1 into $2"
  rm -rf "$2"; mkdir -p "$2"
  tmp=$(mktemp -d "$CACHE/download.XXXXXX")
  chown _apt "$tmp" 2>/dev/null || true
  if ! (cd "$tmp" && apt-get download -qq "$1" >&2); then
    apt_update; (cd "$tmp" && apt-get download -qq "$1" >&2)
  fi
  dpkg-deb -x "$tmp"/*.deb "$2/root"
  rm -rf "$tmp" "$2/root/usr/share/doc"
}

# -> TGT: the directory of tgtd and tgtadm; empty when tgt could not be fetched (offline,
# not cached): only 68-dropin-iser needs it, and says so.
fetch_tgt() {
  TGT=$CACHE/tgt/root/usr/sbin
  [ -f "$CACHE/tgt/.ready" ] && return
  if (unpack_deb tgt "$CACHE/tgt") && [ -x "$TGT/tgtd" ]; then
    touch "$CACHE/tgt/.ready"
  else
    say "tgt not fetched: 68-dropin-iser cannot run"; TGT=""
  fi
}

# -> KERNEL: vmlinux when it can be extracted (ELF with a PVH entry note), else the bzImage.
extract_vmlinux() {
  local bz=$KDIR/root/boot/vmlinuz-$KVER
  KERNEL=$KDIR/vmlinux
  [ -s "$KERNEL" ] && return
  if python3 - "$bz" "$KERNEL.tmp" <<'PY'
import lzma, sys, zlib
data = open(sys.argv[1], "rb").read()
for magic, make in ((b"\xfd7zXZ\x00", lzma.LZMADecompressor),
                    (b"\x1f\x8b\x08", lambda: zlib.decompressobj(16 + zlib.MAX_WBITS))):
    off = data.find(magic)
    if off < 0:
        continue
    try:
        out = make().decompress(data[off:])
    except Exception:
        continue
    if out[:4] == b"\x7fELF":
        open(sys.argv[2], "wb").write(out)
        sys.exit(0)
sys.exit(1)
PY
  then
    mv "$KERNEL.tmp" "$KERNEL"
  else
    rm -f "$KERNEL.tmp"; KERNEL=$bz; say "no vmlinux extracted: booting the bzImage (slower)"
  fi
}

# -> INITRD, named by a hash of its inputs so a changed init script rebuilds it.
build_initrd() {
  local hash dir m
  hash=$(cat "$HERE/initramfs-init.sh" /bin/busybox | sha256sum | cut -c1-12)
  INITRD=$KDIR/initrd-$hash.cpio.gz
  [ -f "$INITRD" ] && return
  say "building $INITRD"
  dir=$(mktemp -d "$CACHE/initrd.XXXXXX")
  mkdir -p "$dir"/{bin,dev,proc,sys,mods}
  cp /bin/busybox "$dir/bin/"; ln -s busybox "$dir/bin/sh"
  install -m 755 "$HERE/initramfs-init.sh" "$dir/init"
  # virtio-pci, 9p over virtio and overlayfs, dependencies first
  modprobe -d "$KDIR/root" -S "$KVER" --show-depends -a virtio_pci 9pnet_virtio 9p overlay |
    awk '$1 == "insmod" && !seen[$2]++ {print $2}' > "$dir/mods/list"
  while read -r m; do cp "$m" "$dir/mods/"; done < "$dir/mods/list"
  sed -i 's|.*/||' "$dir/mods/list"
  (cd "$dir" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"; rm -rf "$dir"
  find "$KDIR" -maxdepth 1 -name 'initrd-*.cpio.gz' ! -path "$INITRD" -delete
}

[ "$(id -u)" = 0 ] || { say "must run as root (apt-get, $CACHE, qemu)"; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"; flock 9   # two boots started at once prepare one after the other
install_packages
fetch_kernel
extract_vmlinux
build_initrd
fetch_tgt
printf 'USCM_VM_KVER=%q\nUSCM_VM_KERNEL=%q\nUSCM_VM_INITRD=%q\nUSCM_VM_MODDIR=%q\nUSCM_VM_TGT=%q\n' \
  "$KVER" "$KERNEL" "$INITRD" "$KDIR/root/lib/modules/$KVER" "$TGT"
