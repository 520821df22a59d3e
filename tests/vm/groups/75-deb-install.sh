#!/usr/bin/env bash
# The Debian package installed for real (issue 15): on the host tools/deb.sh packs the
# binaries run.sh built and lintian checks the .deb (only the tags docs/TOOLS.md lists as
# accepted may remain); then in one VM (the host's / read-only under a tmpfs overlay, so
# nothing changes on the host; no network) `apt-get install ./uscm_*.deb` with the
# dependencies already installed, and what a user does next: dpkg's and apt's view, the
# files' checksums, uscm demo from /usr/bin, man uscm / man uscmd, a C program built with
# pkg-config against /usr/include that loads /usr/lib/libuscm.so.0, the uscmd unit
# checked by systemd-analyze verify (no systemd running), then apt-get purge.
# targets: //tools:uscm //tools:uscmd //api/librdmacm:librdmacm.so.1 //api/c:libuscm.so.0
. "$(dirname "$0")/../lib.sh"
# lintian tags accepted for a locally built package (why: docs/TOOLS.md)
ACCEPTED='pkg-config-unavailable-for-cross-compilation|package-name-doesnt-match-sonames|'\
'link-to-shared-library-in-wrong-package|no-symbols-control-file|hardening-no-fortify-functions|'\
'package-supports-alternative-init-but-no-init.d-script'

if ! in_vm; then
  DEB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/uscm-vm-deb.XXXXXX")
  trap 'rm -rf "$DEB_DIR"' EXIT
  chmod 0755 "$DEB_DIR"
  check deb-built "$VM_DIR/../../tools/deb.sh" --out="$DEB_DIR" --from="$USCM_VM_BIN"
  printf '%s\n' "$OUT" | sed 's/^/  = /'
  deb=$(ls "$DEB_DIR"/uscm_*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || group_end   # nothing to check or install
  if command -v lintian >/dev/null; then
    lintian --display-info --display-experimental --pedantic "$deb" > "$DEB_DIR/lintian.txt" 2>&1
    check lintian-only-accepted-tags bash -c "grep -E '^[EWIXP]: ' '$DEB_DIR/lintian.txt' |
      grep -vE ': ($ACCEPTED)( |$)'; test \$? = 1"
    echo "  = $(grep -cE '^[EWIXP]: ' "$DEB_DIR/lintian.txt") lintian tags, all accepted:" \
      "$(grep -oE '^[EWIXP]: uscm: [a-z0-9.-]+' "$DEB_DIR/lintian.txt" | sed 's/.*: //' | sort -u | tr '\n' ' ')"
  else
    fail lintian-only-accepted-tags "lintian is not installed (tools/setup.sh installs it)"
  fi
  vm_boot --no-rxe --timeout 600 --env "USCM_DEB=$deb"
fi

T=120
# apt reads only dpkg's status and the .deb: no package lists (there is no network, and
# parsing the host's lists over 9p under TCG takes minutes), no cache files written.
mkdir -p /tmp/apt-lists/partial
# man-db's dpkg trigger rebuilds the whole man index (minutes under TCG); man finds the
# new pages without it. Its switch is this file (Debian's man-db postinst).
rm -f /var/lib/man-db/auto-update
APT=(apt-get -o Dir::State::Lists=/tmp/apt-lists -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
check_output apt-install-offline 'Setting up uscm \(0\.1\)' \
  timeout 300 "${APT[@]}" install -y "$USCM_DEB"
printf '%s\n' "$OUT" | grep -E '^(Processing triggers|[0-9]+ upgraded)' | sed 's/^/  = /'
check_output dpkg-says-installed '^install ok installed 0.1$' \
  dpkg-query -W -f='${Status} ${Version}\n' uscm
check apt-get-check-dependencies "${APT[@]}" check
check dpkg-verify-checksums bash -c 'out=$(dpkg -V uscm) && [ -z "$out" ] && dpkg -L uscm | wc -l'
check_output uscm-on-path '^/usr/bin/uscm$' command -v uscm
check uscm-demo-from-usr-bin bash -c 'cd "$(mktemp -d)" && uscm demo --capture=demo.pcap > demo.txt &&
  grep -E "^17 MADs, " demo.txt && grep -qE "host2 -> host1 +CM REP" demo.txt &&
  uscm dump demo.pcap | tail -n 1'
check man-uscm bash -c 'MANWIDTH=100 man uscm 2>/dev/null | grep -E "^ +uscm (demo|ping|saquery|sim|dump|exec|topo)$" | wc -l | grep -qx 7'
check man-uscmd bash -c 'MANWIDTH=100 man 8 uscmd 2>/dev/null | grep -q -- "--socket"'
cat > /tmp/prog.c <<'C'
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
check c-program-with-pkg-config bash -c 'gcc -o /tmp/prog /tmp/prog.c $(pkg-config --cflags --libs uscm) &&
  ldd /tmp/prog | grep -F "libuscm.so.0 => /usr/lib/libuscm.so.0" && /tmp/prog'
check unit-verifies systemd-analyze verify /lib/systemd/system/uscmd.service
check unit-runs-packaged-uscmd bash -c 'grep -E "^ExecStart=/usr/bin/uscmd --ca \S+ --port \S+ --socket " \
  /lib/systemd/system/uscmd.service && uscmd --help | grep -q -- --socket'
check apt-purge bash -c "timeout 300 ${APT[*]} purge -y uscm > /dev/null &&
  ! dpkg-query -W -f='\${Status}' uscm 2>/dev/null | grep -q installed &&
  ! test -e /usr/bin/uscm && ! test -e /usr/lib/libuscm.so.0 && ! ldconfig -p | grep -q libuscm"
group_end
