#!/usr/bin/env bash
# Installs every Debian 12 package uscm needs to build, test and run (idempotent).
# Called by tools/demo.sh and tests/run.sh; safe to run by hand as root.
set -euo pipefail
# shellcheck source=tools/quiet.sh
source "$(dirname "$0")/quiet.sh"

PACKAGES=(
  # build
  bazel-bootstrap g++ clang-14 libclang-rt-14-dev lld-14
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  # pcap / pcapng files and live netdev capture (uscm dump)
  libpcap-dev
  # rtnetlink (routes, neighbours) for rdma_cm's address resolution
  libnl-3-dev
  # RDMA userspace: verbs, umad, libibmad (benchmark baseline)
  rdma-core libibverbs-dev libibumad-dev libibmad-dev librdmacm-dev ibverbs-utils
  # simulated InfiniBand fabric with a real SA
  ibsim-utils libumad2sim0 opensm infiniband-diags
  # VM lane (tests/vm): qemu + busybox initramfs + the guest's RDMA tools
  qemu-system-x86 busybox-static cpio kmod iproute2 ibverbs-providers rdmacm-utils xz-utils
  # the drop-in librdmacm's VM groups: ib_send_bw -R (rdma_cm connection setup);
  # programs that link librdmacm (68-dropin-more): qperf, libfabric's fi_pingpong, UCX;
  # (68-dropin-fio): fio's rdma ioengine (pulls librados / librbd), pyverbs
  perftest qperf libfabric-bin ucx-utils fio python3-pyverbs
  # iSER (68-dropin-iser): libiscsi's tools; tgtd's libaio (tgt itself is only unpacked
  # by tests/vm/prepare.sh: installed, it would start tgtd as a daemon on this host);
  # qemu-io and QEMU's libiscsi block driver (blocks written and read back over iSER)
  libiscsi-bin libaio1 qemu-utils qemu-block-extra
  # DAPL (68-dropin-dapl): dtestcm and libdapl2's ofa-v2-cma-roe provider
  dapl2-utils
  # librpma (68-dropin-rpma): tests/vm/rpma's server and client link -lrpma
  librpma0 librpma-dev
  # independent decoder for the wire cross-check, plotting, misc
  tshark python3 gnuplot-nox valgrind
  # tools/install.sh test: a C program built with `pkg-config --cflags --libs uscm`
  pkg-config
  # tools/deb.sh (dpkg-shlibdeps computes the package's Depends) and its test
  # (man -l renders the uscm(1) / uscmd(8) pages)
  dpkg-dev man-db
  # the VM lane's 75-deb-install group checks the package with lintian
  lintian
  # JSON (tshark -T json in the wire cross-check)
  nlohmann-json3-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: ${#missing[@]} Debian packages to install: ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to install packages (run as root or: sudo $0)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt_install() { apt-get update && apt-get install -y --no-install-recommends "$@"; }
  quiet_step "$USCM_LOG_DIR/setup.log" "setup: apt-get install" apt_install "${missing[@]}"
fi
