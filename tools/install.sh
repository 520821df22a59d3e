#!/usr/bin/env bash
# Installs uscm under a prefix (default /usr/local):
#
#   PREFIX/bin/uscm, PREFIX/bin/uscmd
#   PREFIX/lib/uscm/librdmacm.so.1      the drop-in (api/librdmacm), in a directory of
#                                       its own: never over the system's librdmacm
#   PREFIX/lib/libuscm.so.0 (+ .so)     the uscm C API (api/c)
#   PREFIX/include/uscm/uscm_cma.h, uscm_device.h
#   PREFIX/lib/pkgconfig/uscm.pc        pkg-config --cflags --libs uscm
#
#   tools/install.sh [--prefix=DIR] [--no-build] [--from=DIR]
#
# It builds the binaries with `bazel build -c opt` first (tools/setup.sh installs
# Bazel), unless --no-build; --from=DIR takes them from DIR (a bazel-bin, or a
# test's runfiles) instead of bazel-bin. Then: DIR/bin/uscm exec -- rping -s
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
build=1
from=""
for a in "$@"; do
  case "$a" in
    --prefix=*) prefix="${a#--prefix=}" ;;
    --no-build) build=0 ;;
    --from=*) from="${a#--from=}"; build=0 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $a (try --help)" >&2; exit 2 ;;
  esac
done

TARGETS=(//tools:uscm //tools:uscmd //api/librdmacm:librdmacm.so.1 //api/c:libuscm.so.0)
if ((build)); then
  tools/setup.sh
  log=$(mktemp /tmp/uscm-install-build.XXXXXX.log)
  echo "install.sh: building ${TARGETS[*]} (log: $log)"
  if ! bazel build -c opt "${TARGETS[@]}" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "install.sh: the build failed; full log: $log" >&2
    exit 1
  fi
fi
[[ -n "$from" ]] || from=$(bazel info -c opt bazel-bin 2>/dev/null)

need() {
  [[ -f "$from/$1" ]] || { echo "install.sh: $from/$1 is missing (build it, or check --from)" >&2; exit 1; }
}
for f in tools/uscm tools/uscmd api/librdmacm/librdmacm.so.1 api/c/libuscm.so.0; do need "$f"; done

install -d "$prefix/bin" "$prefix/lib/uscm" "$prefix/lib/pkgconfig" "$prefix/include/uscm"
install -m 0755 "$from/tools/uscm" "$from/tools/uscmd" "$prefix/bin/"
install -m 0755 "$from/api/librdmacm/librdmacm.so.1" "$prefix/lib/uscm/"
install -m 0755 "$from/api/c/libuscm.so.0" "$prefix/lib/"
ln -sf libuscm.so.0 "$prefix/lib/libuscm.so"
# The headers: <uscm/uscm_cma.h>, <uscm/uscm_device.h> (which includes the first
# from its own directory).
install -m 0644 api/c/uscm_cma.h "$prefix/include/uscm/"
sed 's|#include "api/c/uscm_cma.h"|#include "uscm_cma.h"|' api/c/uscm_device.h >"$prefix/include/uscm/uscm_device.h"
chmod 0644 "$prefix/include/uscm/uscm_device.h"
cat >"$prefix/lib/pkgconfig/uscm.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include
dropindir=\${libdir}/uscm

Name: uscm
Description: user-space InfiniBand Communication Manager: the uscm C API (uscm_*)
Version: 0.1
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -luscm
Cflags: -I\${includedir}
EOF
echo "install.sh: installed under $prefix (bin/uscm, bin/uscmd, lib/uscm/librdmacm.so.1, lib/libuscm.so.0, include/uscm, lib/pkgconfig/uscm.pc)"
echo "install.sh: run a program on uscm: $prefix/bin/uscm exec -- rping -s"
