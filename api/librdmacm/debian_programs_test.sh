#!/bin/bash
# Debian's unmodified librdmacm programs (rdmacm-utils) on the drop-in ($1):
# the loader resolves librdmacm.so.1 to it (version needs RDMACM_1.x met,
# every symbol found), and each program ends on its own (no crash, no hang).
# Without an RDMA device they report it as they do on the system library
# ("No RDMA devices were detected"); rsocket programs report ENOSYS.
set -uo pipefail

lib="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
dir="$(dirname "$lib")"

# An ASan build of the library needs the sanitizer runtime loaded first.
preload=""
asan="$(ldd "$lib" | awk '/libasan/ { print $3 }')"
[[ -n "$asan" ]] && preload="$asan"
export ASAN_OPTIONS=detect_leaks=0  # the programs' own leaks at exit

failed=0
ran=0
run() {
  local prog="$1"; shift
  if ! command -v "$prog" > /dev/null; then
    echo "SKIP $prog: not installed (apt-get install rdmacm-utils)"
    return
  fi
  local resolved
  resolved="$(LD_LIBRARY_PATH="$dir" ldd "$(command -v "$prog")" | awk '/librdmacm.so.1/ { print $3 }')"
  if [[ "$resolved" != "$lib" ]]; then
    echo "FAIL $prog: librdmacm.so.1 resolves to '$resolved', not $lib"
    failed=1
    return
  fi
  local out rc
  out="$(LD_PRELOAD="$preload" LD_LIBRARY_PATH="$dir" timeout 20 "$prog" "$@" 2>&1 < /dev/null)"
  rc=$?
  ran=$((ran + 1))
  # 124: timeout; 128+N: killed by signal N. (255 is a program's "return -1".)
  if (( rc >= 124 && rc < 192 )) || grep -qE "symbol lookup error|version .RDMACM|cannot open shared|Sanitizer" <<< "$out"; then
    echo "FAIL $prog $* (exit $rc):"
    echo "$out" | head -20
    failed=1
    return
  fi
  echo "ok   $prog $* (exit $rc): $(head -1 <<< "$out")"
}

run rping -s
run ucmatose
run udaddy
run mckey -m 239.1.1.1
run cmtime
run rdma_server
run rdma_client -s 127.0.0.1
run rdma_xserver
run rdma_xclient -s 127.0.0.1
run rstream
run riostream
run rcopy /etc/hostname 127.0.0.1

if (( failed )); then exit 1; fi
echo "PASS: $ran programs"
