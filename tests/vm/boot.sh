#!/usr/bin/env bash
# tests/vm/boot.sh - run ONE shell command in a throw-away QEMU VM with a real kernel
# RDMA stack (Debian's kernel: rdma_rxe Soft-RoCE, ib_uverbs, ib_umad; the kernel CM
# ib_cm/rdma_cm/rdma_ucm only with --cm), then power it off. Exit status: the command's;
# 124 = timeout, 125 = the VM ended without reporting a status.
#
# usage: tests/vm/boot.sh [options] [--] 'COMMAND'
#   --cm              load ib_cm rdma_cm rdma_ucm before the command
#   --modules 'M ..'  load these modules too
#   --no-rxe          no Soft-RoCE device (and no veth): "no RDMA device"
#   --env NAME=VALUE  export to the command (repeatable)
#   --timeout S       stop the VM after S seconds (default 300)
#   --out DIR         keep console.log, output, rc in DIR
#   --mem MiB (1024)  --smp N (2)  --accel tcg|kvm (tcg; USCM_VM_ACCEL)
# Two-VM mode (pair.sh):
#   --nic listen:PORT|connect:PORT   one virtio-net NIC on a qemu socket netdev on
#                     127.0.0.1:PORT (the other VM's NIC, nothing else); replaces the veth
#   --mac MAC  --ip A.B.C.D (the NIC's /24 address)  --sync DIR (host DIR at /sync, rw)
#   --name NAME  --prefix STR (before every console line)  --capture FILE (pcap of the NIC)
#
# The guest's / is this machine's /, read-only over virtio-9p with a tmpfs overlay: the
# repository and bazel-bin are at the same paths; guest writes are dropped at power-off.
# The command runs as root in the current directory with stdin /dev/null.
# KVM is not the default: on hosts without VT-x (nested PVM) a stock kernel does not boot
# under it; TCG with one host thread boots to the command in ~7 s on 2 cores.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

MODULES="" LINK=veth ENVS=() TIMEOUT=300 OUT="" MEM=1024 SMP=2 ACCEL=${USCM_VM_ACCEL:-tcg}
NIC="" MAC=52:54:00:55:00:01 IP=192.168.78.1 SYNC="" NAME=uscm-vm PREFIX="" CAPTURE=""
while [ $# -gt 0 ]; do
  case $1 in
    --cm) MODULES+=" ib_cm rdma_cm rdma_ucm"; shift ;;
    --modules) MODULES+=" $2"; shift 2 ;;
    --no-rxe) LINK=none; shift ;;
    --env) ENVS+=("$2"); shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --smp) SMP=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --nic) NIC=$2; [ "$LINK" = none ] || LINK=nic; shift 2 ;;
    --mac) MAC=$2; shift 2 ;;
    --ip) IP=$2; shift 2 ;;
    --sync) SYNC=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --capture) CAPTURE=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "boot.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: boot.sh [options] 'COMMAND'" >&2; exit 2; }
CMD="$*"
case $NIC in ""|listen:[0-9]*|connect:[0-9]*) ;; *) echo "boot.sh: --nic listen:PORT|connect:PORT" >&2; exit 2 ;; esac

eval "${USCM_VM_PREP:-$("$HERE/prepare.sh")}"   # pair.sh prepares once for both VMs

if [ -n "$OUT" ]; then
  mkdir -p "$OUT"; XFER=$(cd "$OUT" && pwd -P); rm -f "$XFER"/{rc,output,console.log,env,init}
else
  XFER=$(mktemp -d "${TMPDIR:-/tmp}/uscm-vm.XXXXXX")
fi
QPID=""
finish() {
  local p
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
    kill -TERM "$QPID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$QPID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$QPID" 2>/dev/null || true
  fi
  p=$(cat "$XFER/qemu.pid" 2>/dev/null || true)   # qemu's own pidfile, checked by name
  if [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = qemu-system-x86 ]; then
    kill -KILL "$p" 2>/dev/null || true
  fi
  [ -n "$OUT" ] || rm -rf "$XFER"
}
trap finish EXIT
trap 'echo "${PREFIX}boot.sh: stopped by a signal" >&2; exit 143' TERM INT HUP

install -m 755 "$HERE/guest-init.sh" "$XFER/init"
{
  printf 'USCM_VM_CMD=%q\nUSCM_VM_CWD=%q\nUSCM_VM_MODDIR=%q\n' "$CMD" "$PWD" "$USCM_VM_MODDIR"
  printf 'USCM_VM_MODULES=%q\nUSCM_VM_LINK=%q\nUSCM_VM_NAME=%q\n' "$MODULES" "$LINK" "$NAME"
  printf 'USCM_VM_MAC=%q\nUSCM_VM_IP=%q\n' "$MAC" "$IP"
  [ -z "$SYNC" ] || echo 'USCM_VM_SYNC=/sync'
  printf 'export USCM_VM_DIR=%q USCM_VM_NAME USCM_VM_IP USCM_VM_LINK\n' "$HERE"
  printf 'export USCM_VM_TGT=%q\n' "${USCM_VM_TGT:-}"   # tgtd, tgtadm (prepare.sh)
  [ -z "$SYNC" ] || echo 'export USCM_VM_SYNC'
  for e in "${ENVS[@]+"${ENVS[@]}"}"; do printf 'export %q\n' "$e"; done
} > "$XFER/env"

case $ACCEL in
  tcg) ACCEL_ARGS=(-accel tcg,thread=single -cpu max) ;;   # MTTCG starves 9p on 2 cores
  kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
  *) echo "boot.sh: --accel tcg|kvm" >&2; exit 2 ;;
esac
# no_timer_check: on a loaded host a TCG guest can miss the ticks the kernel
# counts to verify the IO-APIC timer, and panics at boot ("IO-APIC + timer
# doesn't work!"; seen at load average 13); cloud images boot with it too.
QEMU=(qemu-system-x86_64 "${ACCEL_ARGS[@]}" -machine pc -m "$MEM" -smp "$SMP"
  -nodefaults -no-user-config -nic none -display none -serial stdio -no-reboot
  -kernel "$USCM_VM_KERNEL" -initrd "$USCM_VM_INITRD"
  -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off no_timer_check"
  -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
  -fsdev "local,id=xfer,path=${XFER//,/,,},security_model=none"
  -device virtio-9p-pci,fsdev=xfer,mount_tag=xfer
  -pidfile "$XFER/qemu.pid")
if [ -n "$SYNC" ]; then
  SYNC=$(cd "$SYNC" && pwd -P)
  QEMU+=(-fsdev "local,id=sync,path=${SYNC//,/,,},security_model=none"
         -device virtio-9p-pci,fsdev=sync,mount_tag=sync)
fi
if [ -n "$NIC" ]; then
  # qemu's socket netdev: raw Ethernet frames over one loopback TCP connection between
  # the two qemu processes. Nothing else is on this link.
  QEMU+=(-netdev "socket,id=link,${NIC%%:*}=127.0.0.1:${NIC#*:}"
         -device "virtio-net-pci,netdev=link,mac=$MAC")
  [ -z "$CAPTURE" ] || QEMU+=(-object "filter-dump,id=cap,netdev=link,file=${CAPTURE//,/,,}")
fi

echo "${PREFIX}boot.sh: $USCM_VM_KVER, $ACCEL, link $LINK${NIC:+ $NIC $IP}" >&2
t0=$EPOCHREALTIME
# The file exists before tail opens it: qemu's redirection happens in the
# background child, and on a loaded host tail could come first, find no file
# and stream nothing (a VM that ran with none of its lines in the group's log).
: > "$XFER/serial"
timeout -k 5 "$TIMEOUT" "${QEMU[@]}" < /dev/null >> "$XFER/serial" 2>&1 &
QPID=$!
# stream the console (prefixed, escape sequences and CRs dropped) while qemu runs
tail -n +1 --pid="$QPID" -f "$XFER/serial" 2>/dev/null |
  sed -u -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e "s|^|${PREFIX//|/\\|}|" &
TPID=$!
set +e; wait "$QPID"; qrc=$?; set -e
wait "$TPID" 2>/dev/null || true
QPID=""
sed -e 's/\r//g' "$XFER/serial" > "$XFER/console.log"
secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
  echo "${PREFIX}boot.sh: TIMEOUT after ${TIMEOUT}s" >&2; exit 124
fi
[ -s "$XFER/rc" ] || { echo "${PREFIX}boot.sh: the VM ended without a status (qemu rc $qrc)" >&2; exit 125; }
echo "${PREFIX}boot.sh: rc $(cat "$XFER/rc") after ${secs}s" >&2
exit "$(cat "$XFER/rc")"
