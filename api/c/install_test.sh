#!/bin/bash
# tools/install.sh into a temporary prefix from the built artifacts, then what
# a user does with it: a C program built with pkg-config against the installed
# headers and libuscm runs; uscm exec puts the installed librdmacm.so.1 first.
set -euo pipefail
root="$TEST_SRCDIR/${TEST_WORKSPACE:-uscm}"
prefix="$TEST_TMPDIR/prefix"
"$root/tools/install.sh" --prefix="$prefix" --from="$root" >"$TEST_TMPDIR/install.log"
for f in bin/uscm bin/uscmd lib/uscm/librdmacm.so.1 lib/libuscm.so.0 lib/libuscm.so \
         include/uscm/uscm_cma.h include/uscm/uscm_device.h lib/pkgconfig/uscm.pc; do
  [[ -e "$prefix/$f" ]] || { echo "FAIL: $f not installed"; exit 1; }
done
[[ ! -e "$prefix/lib/librdmacm.so.1" ]] || { echo "FAIL: the drop-in is beside system libraries"; exit 1; }

# A C program against the installed API (no uscm source tree on its path).
cat >"$TEST_TMPDIR/prog.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <uscm/uscm_device.h>
int main(void) {
  struct uscm_device *dev = uscm_device_open("no_such_ca", 1);
  if (dev != NULL) return 3;
  printf("open: errno %d: %s\n", errno, uscm_last_error());
  return errno == ENODEV ? 0 : 4;
}
C
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs uscm)
# Under --config=asan the installed library is instrumented: the program
# must bring the sanitizer runtimes first.
san=""
ldd "$prefix/lib/libuscm.so.0" | grep -q libasan && san="-fsanitize=address,undefined"
gcc $san -o "$TEST_TMPDIR/prog" "$TEST_TMPDIR/prog.c" $flags
# verify_asan_link_order=0: in Bazel's test sandbox ASan aborts ("ASan runtime
# does not come first in initial library list") although ldd lists libasan
# first; the same program run by hand passes (see tools/deb_test.sh).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TEST_TMPDIR/prog" | tee "$TEST_TMPDIR/prog.out"
grep -q "errno $(python3 -c 'import errno; print(errno.ENODEV)')" "$TEST_TMPDIR/prog.out"

# uscm exec from the installed tree finds the installed drop-in.
out=$("$prefix/bin/uscm" exec --no-uscmd -- sh -c 'echo "$LD_LIBRARY_PATH"')
[[ "$out" == "$prefix/lib/uscm"* ]] || { echo "FAIL: LD_LIBRARY_PATH=$out"; exit 1; }
# --no-uscmd tells the drop-in not to start a uscmd by itself either.
out=$("$prefix/bin/uscm" exec --no-uscmd -- sh -c 'echo "$USCM_NO_USCMD"')
[[ "$out" == "1" ]] || { echo "FAIL: --no-uscmd gave USCM_NO_USCMD=$out"; exit 1; }
# --device names the port the drop-in serves (USCM_DEVICE); a malformed one is refused.
out=$("$prefix/bin/uscm" exec --no-uscmd --device rxe1:1 -- sh -c 'echo "$USCM_DEVICE"')
[[ "$out" == "rxe1:1" ]] || { echo "FAIL: --device rxe1:1 gave USCM_DEVICE=$out"; exit 1; }
rc=0; err=$("$prefix/bin/uscm" exec --no-uscmd --device rxe1:x -- true 2>&1) || rc=$?
[[ $rc == 2 && "$err" == *"USCM_DEVICE=rxe1:x: the port is not a number"* ]] ||
  { echo "FAIL: --device rxe1:x: exit $rc, $err"; exit 1; }
if [[ -x /usr/bin/rping ]]; then
  loaded=$("$prefix/bin/uscm" exec --no-uscmd -- ldd /usr/bin/rping | grep "librdmacm.so.1 =>" || true)
  [[ "$loaded" == *"=> $prefix/lib/uscm/librdmacm.so.1 "* ]] ||
    { echo "FAIL: rping does not load the installed drop-in: $loaded"; exit 1; }
fi
echo "PASS"
