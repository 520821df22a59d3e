#!/bin/sh
# /init of the busybox initramfs (see prepare.sh). Builds the VM's root and hands over:
#   /lower   the host's / over virtio-9p (tag "hostroot"), read-only
#   /rw      tmpfs with the overlay's upper and work dirs: every guest write lands here
#   /newroot overlay of the two; /newroot/xfer = read-write 9p share (tag "xfer") that
#            holds the command, its output and its exit status
# then runs /xfer/init (guest-init.sh) as PID 1 on the new root.
/bin/busybox --install -s /bin
export PATH=/bin
fatal() {
  echo "uscm-vm initramfs: $*"
  echo o > /proc/sysrq-trigger   # qemu runs with -no-reboot: power off ends boot.sh
  sleep 5
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /mods/list); do insmod "/mods/$m" || echo "uscm-vm initramfs: insmod $m failed"; done
P9=trans=virtio,version=9p2000.L,msize=262144
mkdir -p /lower /rw /newroot
mount -t 9p -o ro,cache=loose,$P9 hostroot /lower || fatal "cannot mount the host root (9p)"
mount -t tmpfs -o mode=0755 tmpfs /rw && mkdir -p /rw/upper /rw/work || fatal "no tmpfs"
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot ||
  fatal "cannot mount the overlay root"
mkdir -p /newroot/xfer
mount -t 9p -o $P9 xfer /newroot/xfer || fatal "cannot mount the xfer share"
[ -f /newroot/xfer/init ] || fatal "no /xfer/init"
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /bin/bash /xfer/init
