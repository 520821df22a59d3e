#!/usr/bin/env bash
# targets: //tests/vm:uscm_peer
# Errors a user meets on a real stack, with the message uscm prints: no permission on
# the umad / uverbs devices, the kernel's ib_cm owning the CM class, no RDMA device.
. "$(dirname "$0")/../lib.sh"
vm_boot

PEER=$USCM_VM_BIN/tests/vm/uscm_peer
open_as() { # USER TRANSPORT: open the transport and the RC resources on rxe0
  local who=$1 tr=$2
  if [ "$who" = root ]; then "$PEER" --role open --transport "$tr" --device rxe0 --ip 192.168.77.1
  else setpriv --reuid=65534 --regid=65534 --clear-groups "$PEER" --role open --transport "$tr" \
         --device rxe0 --ip 192.168.77.1; fi
}

check errors-root-opens-umad open_as root umad
# the SA agent: user RMPP (umad_register2 + UMAD_USER_RMPP) is what kAuto picks on a real kernel
check_output errors-umad-sa-user-rmpp 'sa_rmpp=user' \
  "$PEER" --role open --transport umad --device rxe0 --ip 192.168.77.1 --sa-rmpp auto
check_output errors-umad-sa-kernel-rmpp 'sa_rmpp=kernel' \
  "$PEER" --role open --transport umad --device rxe0 --ip 192.168.77.1 --sa-rmpp kernel
check errors-root-opens-ud open_as root ud

# not root, device files at their default mode (0600 root)
check_output errors-no-permission-umad \
  'PERMISSION_DENIED: cannot open the umad device of rxe0:1 .*run as root, or give a group access' \
  open_as nobody umad
# uverbs* are 0666 by default (the kernel's devnode mode); close them as an admin might
chmod 600 /dev/infiniband/uverbs0
check_output errors-no-permission-uverbs-ud \
  'PERMISSION_DENIED: .*run as root, or give a group access to /dev/infiniband/uverbs\*' \
  open_as nobody ud
# umad opened up (chmod), uverbs still closed: the RC resources name uverbs and the fix
chmod 666 /dev/infiniband/umad0
check_output errors-no-permission-uverbs-rc \
  'PERMISSION_DENIED: cannot open rxe0: no permission on /dev/infiniband/uverbs\*.*rdma group' \
  open_as nobody umad
chmod 600 /dev/infiniband/umad0
chmod 666 /dev/infiniband/uverbs0

# the kernel CM owns the CM class on the port: umad_register fails with EINVAL
modprobe ib_cm
check_output errors-ib-cm-loaded \
  'ib_cm already owns the CM class on that port\. Unload it: modprobe -r rdma_ucm rdma_cm ib_cm' \
  open_as root umad
modprobe -r ib_cm
check errors-ib-cm-unloaded-opens-again open_as root umad

# no RDMA device at all
rdma link delete rxe0 && rdma link delete rxe1
check_output errors-no-device-umad 'NOT_FOUND: no InfiniBand device found \(libibumad sees no CA' \
  open_as root umad
check_output errors-no-device-ud 'NOT_FOUND: .*no RDMA device' open_as root ud
group_end
