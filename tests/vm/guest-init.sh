#!/bin/bash
# PID 1 inside the VM once the initramfs has switched to the overlay root. boot.sh puts
# this file at /xfer/init and the settings in /xfer/env. It mounts the basics, binds the
# cached kernel modules, loads the RDMA modules, builds the Soft-RoCE link, runs the
# command, writes its exit status to /xfer/rc and powers off.
#
# Links (USCM_VM_LINK):
#   veth  (one VM)  rxe0 -- veth0 192.168.77.1/24 <=veth=> veth1 192.168.77.2/24 -- rxe1
#   nic   (pair)    rxe0 -- the VM's only NIC ($USCM_VM_IP); its peer is the other VM
#   none            no rxe device at all
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C

power_off() {
  sync; umount /xfer 2>/dev/null
  echo o > /proc/sysrq-trigger; sleep 10
  echo b > /proc/sysrq-trigger; sleep 10
}
log() { echo "uscm-vm: $*"; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
. /xfer/env || { log "no /xfer/env"; power_off; }

mkdir -p "/lib/modules/$(uname -r)"
mount --bind "$USCM_VM_MODDIR" "/lib/modules/$(uname -r)" || log "cannot bind the modules"
hostname "$USCM_VM_NAME"
ip link set lo up
if [ -n "${USCM_VM_SYNC:-}" ]; then
  mkdir -p "$USCM_VM_SYNC"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 sync "$USCM_VM_SYNC" ||
    log "cannot mount the sync share"
fi

# wait (up to ~10 s) until the port of each rxe device is ACTIVE and has its
# IPv4-mapped GID (GID 0 = fe80:: from the MAC, GID 1 = ::ffff:a.b.c.d, both RoCE v2)
wait_ports() {
  local d ok
  for _ in $(seq 100); do
    ok=1
    for d in "$@"; do
      grep -q ACTIVE "/sys/class/infiniband/$d/ports/1/state" 2>/dev/null || ok=0
      grep -qs ':0000:ffff:' /sys/class/infiniband/"$d"/ports/1/gids/[0-3] || ok=0
    done
    [ "$ok" = 1 ] && return 0
    sleep 0.1
  done
  log "rxe ports $* not ACTIVE with an IPv4 GID"; return 1
}

setup_link() {
  case $USCM_VM_LINK in
    none) return 0 ;;
    veth)
      modprobe -a veth rdma_rxe ib_uverbs ib_umad || return 1
      ip link add veth0 type veth peer name veth1
      ip addr add 192.168.77.1/24 dev veth0
      ip addr add 192.168.77.2/24 dev veth1
      # Both veth ends sit in one namespace. rxe routes with the output interface
      # pinned to its netdev, so packets do cross the veth, but the receiver then sees
      # ARP and IP from one of its own addresses: without accept_local it drops them as
      # martians and the destination MAC never resolves (modify QP to RTR fails).
      local s
      for s in all default veth0 veth1; do
        sysctl -qw "net.ipv4.conf.$s.accept_local=1" "net.ipv4.conf.$s.rp_filter=0"
      done
      ip link set veth0 up; ip link set veth1 up
      rdma link add rxe0 type rxe netdev veth0 && rdma link add rxe1 type rxe netdev veth1 &&
        wait_ports rxe0 rxe1
      ;;
    nic)
      modprobe -a virtio_net rdma_rxe ib_uverbs ib_umad || return 1
      local nic="" d
      for _ in $(seq 50); do
        for d in /sys/class/net/*; do
          [ "$(cat "$d/address" 2>/dev/null)" = "$USCM_VM_MAC" ] && nic=${d##*/}
        done
        [ -n "$nic" ] && break
        sleep 0.1
      done
      [ -n "$nic" ] || { log "no NIC with MAC $USCM_VM_MAC"; return 1; }
      ip addr add "$USCM_VM_IP/24" dev "$nic"; ip link set "$nic" up
      rdma link add rxe0 type rxe netdev "$nic" && wait_ports rxe0
      ;;
  esac
}

rc=0
if [ -n "$USCM_VM_MODULES" ]; then
  modprobe -a $USCM_VM_MODULES || { log "modprobe $USCM_VM_MODULES failed"; rc=1; }
fi
[ "$rc" != 0 ] || setup_link || { log "link setup ($USCM_VM_LINK) failed"; rc=1; }
if [ "$rc" = 0 ]; then
  cd "$USCM_VM_CWD" 2>/dev/null || cd /
  echo "=== uscm-vm: command start (uptime $(cut -d' ' -f1 /proc/uptime)s)"
  bash -c "$USCM_VM_CMD" < /dev/null 2>&1 | tee /xfer/output
  rc=${PIPESTATUS[0]}
  echo "=== uscm-vm: command end rc=$rc (uptime $(cut -d' ' -f1 /proc/uptime)s)"
fi
echo "$rc" > /xfer/rc
power_off
