#!/bin/bash
# tools/deb.sh from the built artifacts into TEST_TMPDIR, then what a Debian
# user gets: the control file declares the shared libraries the binaries link;
# unpacked into a temporary root (dpkg-deb -x), uscm demo runs from it, a C
# program builds against the packaged headers with pkg-config and runs, and the
# man pages name every command and option.
set -euo pipefail
src="$TEST_SRCDIR/${TEST_WORKSPACE:-uscm}"
out="$TEST_TMPDIR/out"
root="$TEST_TMPDIR/root"
fail() { echo "FAIL: $*"; exit 1; }

TMPDIR="$TEST_TMPDIR" "$src/tools/deb.sh" --out="$out" --from="$src" >"$TEST_TMPDIR/deb.log" ||
  { cat "$TEST_TMPDIR/deb.log"; fail "deb.sh"; }
debs=("$out"/uscm_*_"$(dpkg --print-architecture)".deb)
[[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] || fail "no single .deb in $out: ${debs[*]}"
deb="${debs[0]}"

# The control file: Depends names the packages of what the binaries link.
dpkg-deb -I "$deb" >"$TEST_TMPDIR/info.txt"
depends=$(sed -n 's/^ Depends: //p' "$TEST_TMPDIR/info.txt")
echo "Depends: $depends"
for p in libpcap0.8 libibumad3 libibverbs1 libabsl20220623 libc6 libstdc++6; do
  [[ ", $depends," == *", $p "* || ", $depends," == *", $p,"* ]] || fail "Depends lacks $p: $depends"
done
grep -q '^ Package: uscm$' "$TEST_TMPDIR/info.txt" || fail "Package is not uscm"

# Unpacked: the layout.
dpkg-deb -x "$deb" "$root"
for f in usr/bin/uscm usr/bin/uscmd usr/lib/uscm/librdmacm.so.1 usr/lib/libuscm.so.0 usr/lib/libuscm.so \
         usr/include/uscm/uscm_cma.h usr/include/uscm/uscm_device.h usr/lib/pkgconfig/uscm.pc \
         lib/systemd/system/uscmd.service lib/systemd/system/uscmd.socket usr/share/man/man1/uscm.1.gz usr/share/man/man8/uscmd.8.gz; do
  [[ -e "$root/$f" ]] || fail "$f not in the package"
done
[[ ! -e "$root/usr/lib/librdmacm.so.1" ]] || fail "the drop-in is beside system libraries"
grep -q '^prefix=/usr$' "$root/usr/lib/pkgconfig/uscm.pc" || fail "uscm.pc: $(head -1 "$root/usr/lib/pkgconfig/uscm.pc")"
grep -q '^ExecStart=/usr/bin/uscmd ' "$root/lib/systemd/system/uscmd.service" || fail "the unit does not run /usr/bin/uscmd"
grep -q '^ListenSequentialPacket=/run/uscmd/' "$root/lib/systemd/system/uscmd.socket" ||
  fail "uscmd.socket does not listen where uscmd.service serves"

# uscm demo from the unpacked root, on the simulated fabric (uscm does not
# link libuscm: no LD_LIBRARY_PATH).
(cd "$TEST_TMPDIR" && "$root/usr/bin/uscm" demo --capture=demo.pcap) >"$TEST_TMPDIR/demo.txt" 2>&1 ||
  { tail -20 "$TEST_TMPDIR/demo.txt"; fail "uscm demo"; }
for line in "host1 -> host2 +CM REQ" "host2 -> host1 +CM REP" "CM RTU" "CM REJ" "MCMemberRecord Set" \
    "CM DREQ" "CM DREP" "TIMEWAIT_EXIT" "^17 MADs, "; do
  grep -qE -- "$line" "$TEST_TMPDIR/demo.txt" || fail "uscm demo output lacks /$line/"
done

# A C program against the packaged headers and libuscm, flags from the
# packaged uscm.pc (sysroot: the unpacked root). Under --config=asan the
# packaged libuscm is instrumented: as in api/c:install_test the program then
# brings the sanitizer runtimes first (-fsanitize=address,undefined).
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
flags=$(PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root/usr/lib/pkgconfig" PKG_CONFIG_PATH="" \
        pkg-config --cflags --libs uscm)
echo "pkg-config: $flags"
[[ "$flags" == *"-I$root/usr/include"* && "$flags" == *"-L$root/usr/lib"* && "$flags" == *"-luscm"* ]] ||
  fail "pkg-config flags: $flags"
san=""
ldd "$root/usr/lib/libuscm.so.0" | grep -q libasan && san="-fsanitize=address,undefined"
gcc $san -o "$TEST_TMPDIR/prog" "$TEST_TMPDIR/prog.c" $flags
# pkg-config's sysroot points its -rpath into the root too (pkgconf 1.8);
# LD_LIBRARY_PATH makes the run not depend on that. Under --config=asan, inside
# Bazel's test sandbox only, ASan aborts with "ASan runtime does not come first
# in initial library list" although ldd lists libasan.so.8 first (the same
# program run by hand passes; cause not found): verify_asan_link_order=0 turns
# that check off, the program still runs instrumented.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" LD_LIBRARY_PATH="$root/usr/lib" "$TEST_TMPDIR/prog" | tee "$TEST_TMPDIR/prog.out"
grep -q "errno $(python3 -c 'import errno; print(errno.ENODEV)')" "$TEST_TMPDIR/prog.out" || fail "prog output"

# The man pages: every command of `uscm --help`, and each command's options
# (every --flag of `uscm <command> --help`); uscmd(8) every option of uscmd --help.
zcat "$root/usr/share/man/man1/uscm.1.gz" >"$TEST_TMPDIR/uscm.1"
zcat "$root/usr/share/man/man8/uscmd.8.gz" >"$TEST_TMPDIR/uscmd.8"
if command -v man >/dev/null; then
  MANWIDTH=200 man -l "$TEST_TMPDIR/uscm.1" 2>/dev/null >"$TEST_TMPDIR/uscm.txt" || fail "man -l uscm.1"
  MANWIDTH=200 man -l "$TEST_TMPDIR/uscmd.8" 2>/dev/null >"$TEST_TMPDIR/uscmd.txt" || fail "man -l uscmd.8"
else
  sed 's/\\e/\\/g; s/\\-/-/g; s/^\\&//' "$TEST_TMPDIR/uscm.1" >"$TEST_TMPDIR/uscm.txt"
  sed 's/\\e/\\/g; s/\\-/-/g; s/^\\&//' "$TEST_TMPDIR/uscmd.8" >"$TEST_TMPDIR/uscmd.txt"
fi
commands=$("$root/usr/bin/uscm" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
[[ $(echo "$commands" | wc -w) -ge 7 ]] || fail "commands: $commands"
n=0
for c in $commands; do
  grep -q "uscm $c\$" "$TEST_TMPDIR/uscm.txt" || fail "uscm(1) has no section for $c"
  for o in $("$root/usr/bin/uscm" "$c" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    grep -q -- "$o" "$TEST_TMPDIR/uscm.txt" || fail "uscm(1) lacks $c's $o"
    n=$((n + 1))
  done
done
for o in $("$root/usr/bin/uscmd" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
  grep -q -- "$o" "$TEST_TMPDIR/uscmd.txt" || fail "uscmd(8) lacks $o"
  n=$((n + 1))
done
echo "man pages: $(echo $commands | wc -w) commands, $n options"
echo "PASS"
