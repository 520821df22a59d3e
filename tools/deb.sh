#!/usr/bin/env bash
# Builds a Debian package of uscm, uscm_<version>_<arch>.deb, with dpkg-deb:
#
#   /usr/bin/uscm, /usr/bin/uscmd
#   /usr/lib/uscm/librdmacm.so.1        the drop-in, in a directory of its own
#   /usr/lib/libuscm.so.0 (+ .so)       the uscm C API
#   /usr/include/uscm/*.h
#   /usr/lib/pkgconfig/uscm.pc          prefix=/usr
#   /lib/systemd/system/uscmd.service   the router for one port (not enabled)
#   /lib/systemd/system/uscmd.socket    its socket activation (not enabled)
#   /usr/share/man/man1/uscm.1.gz, /usr/share/man/man8/uscmd.8.gz
#   /usr/share/doc/uscm/copyright
#
#   tools/deb.sh [--out=DIR] [--from=DIR]
#
# The tree is tools/install.sh --prefix=/usr (--from=DIR: prebuilt artifacts, a
# bazel-bin or a test's runfiles; otherwise install.sh builds them). The man
# pages are generated from `uscm --help`, `uscm <command> --help` and
# `uscmd --help` of the packaged binaries. Depends: is computed by
# dpkg-shlibdeps from what the binaries link. Then: sudo apt install ./uscm_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."

out=.
from=""
for a in "$@"; do
  case "$a" in
    --out=*) out="${a#--out=}" ;;
    --from=*) from="${a#--from=}" ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "deb.sh: unknown option $a (try --help)" >&2; exit 2 ;;
  esac
done
for t in dpkg-deb dpkg-shlibdeps gzip strip md5sum; do
  command -v "$t" >/dev/null || { echo "deb.sh: $t is missing (tools/setup.sh installs dpkg-dev)" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/uscm-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"

# 1. The install.sh tree under /usr.
args=(--prefix="$root/usr")
[[ -n "$from" ]] && args+=(--from="$from")
tools/install.sh "${args[@]}" >"$work/install.log" || { cat "$work/install.log" >&2; exit 1; }
# install.sh wrote the staging prefix into uscm.pc: the package's is /usr.
sed -i "s|^prefix=.*|prefix=/usr|" "$root/usr/lib/pkgconfig/uscm.pc"
version=$(sed -n 's/^Version: *//p' "$root/usr/lib/pkgconfig/uscm.pc")
arch=$(dpkg --print-architecture)

# 2. The systemd units, pointing at the packaged binary: the service, and the
# socket that starts it on demand (socket activation; neither is enabled).
install -d "$root/lib/systemd/system"
sed 's|/usr/local/bin/uscmd|/usr/bin/uscmd|g' tools/uscmd.service >"$root/lib/systemd/system/uscmd.service"
install -m 0644 tools/uscmd.socket "$root/lib/systemd/system/uscmd.socket"
chmod 0644 "$root/lib/systemd/system/uscmd.service"

# 3. Man pages from the binaries' own --help (so every command and option is
# there, and they cannot drift from the code).
roff_text() {  # help text -> roff, verbatim (escape backslashes, leading . and ')
  sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"
}
date_str=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}" +%Y-%m-%d)
uscm="$root/usr/bin/uscm"
uscmd="$root/usr/bin/uscmd"
commands=$("$uscm" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
[[ -n "$commands" ]] || { echo "deb.sh: no commands in 'uscm --help'" >&2; exit 1; }
install -d "$root/usr/share/man/man1" "$root/usr/share/man/man8"
{
  echo ".TH USCM 1 \"$date_str\" \"uscm $version\" \"User Commands\""
  echo ".SH NAME"
  echo "uscm \\- user-space InfiniBand Communication Manager: demo, ping, saquery, sim, dump, exec, topo"
  echo ".SH SYNOPSIS"
  echo ".B uscm"
  echo ".I command"
  echo "[\\fIoptions\\fR]"
  echo ".SH DESCRIPTION"
  echo ".nf"
  "$uscm" --help | roff_text
  echo ".fi"
  echo ".SH COMMANDS"
  for c in $commands; do
    echo ".SS uscm $c"
    echo ".nf"
    "$uscm" "$c" --help 2>&1 | roff_text
    echo ".fi"
  done
  echo ".SH FILES"
  echo ".TP"
  echo "/usr/lib/uscm/librdmacm.so.1"
  echo "the drop-in librdmacm that \\fBuscm exec\\fR puts first on the library path"
  echo ".SH SEE ALSO"
  echo ".BR uscmd (8),"
  echo ".BR pkg-config (1)"
} >"$work/uscm.1"
{
  echo ".TH USCMD 8 \"$date_str\" \"uscm $version\" \"System Administration\""
  echo ".SH NAME"
  echo "uscmd \\- the uscm MAD router: shares one port's QP1 CM/SA agents among local processes"
  echo ".SH SYNOPSIS"
  echo ".B uscmd"
  echo "[\\fIoptions\\fR]"
  echo ".SH DESCRIPTION"
  echo ".nf"
  "$uscmd" --help | roff_text
  echo ".fi"
  echo ".SH FILES"
  echo ".TP"
  echo "/lib/systemd/system/uscmd.service"
  echo "runs uscmd for one port (USCMD_CA, USCMD_PORT; default mlx5_0 port 1) with its"
  echo "socket in /run/uscmd: systemctl edit uscmd; systemctl enable \\-\\-now uscmd"
  echo ".TP"
  echo "/lib/systemd/system/uscmd.socket"
  echo "socket activation: systemd listens and starts uscmd on the first connection"
  echo "(set USCMD_IDLE_EXIT to let it exit when idle): systemctl enable \\-\\-now uscmd.socket"
  echo ".SH SEE ALSO"
  echo ".BR uscm (1)"
} >"$work/uscmd.8"
gzip -9n <"$work/uscm.1" >"$root/usr/share/man/man1/uscm.1.gz"
gzip -9n <"$work/uscmd.8" >"$root/usr/share/man/man8/uscmd.8.gz"
chmod 0644 "$root/usr/share/man/man1/uscm.1.gz" "$root/usr/share/man/man8/uscmd.8.gz"
install -d "$root/usr/share/doc/uscm"
maintainer="${DEBFULLNAME:-uscm developers} <${DEBEMAIL:-uscm@users.noreply.github.com}>"
{
  echo "uscm: a user-space InfiniBand Communication Manager."
  echo "Built from the uscm source tree by tools/deb.sh."
  echo
  echo "Copyright: $(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y 2>/dev/null || date +%Y) the uscm developers."
} >"$root/usr/share/doc/uscm/copyright"
# A native package's changelog (lintian: no-changelog): one entry for this build.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "uscm ($version) unstable; urgency=medium"
  echo
  echo "  * Built from the uscm source tree (commit $commit) by tools/deb.sh."
  echo
  echo " -- $maintainer  $(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n >"$root/usr/share/doc/uscm/changelog.gz"
chmod 0644 "$root/usr/share/doc/uscm/copyright" "$root/usr/share/doc/uscm/changelog.gz"

# Stripped as dh_strip does (lintian: unstripped-binary-or-object); shared
# libraries are not executable (shared-library-is-executable).
for f in "$root/usr/bin/uscm" "$root/usr/bin/uscmd"; do
  strip --remove-section=.comment --remove-section=.note "$f"
done
for f in "$root/usr/lib/libuscm.so.0" "$root/usr/lib/uscm/librdmacm.so.1"; do
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
  chmod 0644 "$f"
done

# 4. Depends: from the binaries' NEEDED sonames (dpkg-shlibdeps wants a
# debian/control; libuscm.so.0 is found in the package itself with -l).
mkdir -p "$work/src/debian"
printf 'Source: uscm\n\nPackage: uscm\nArchitecture: any\n' >"$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O -l"$root/usr/lib" -l"$root/usr/lib/uscm" \
            "$root/usr/bin/uscm" "$root/usr/bin/uscmd" \
            "$root/usr/lib/libuscm.so.0" "$root/usr/lib/uscm/librdmacm.so.1" 2>"$work/shlibdeps.log" |
          sed -n 's/^shlibs:Depends=//p') ||
  { cat "$work/shlibdeps.log" >&2; echo "deb.sh: dpkg-shlibdeps failed" >&2; exit 1; }
[[ -n "$depends" ]] || { cat "$work/shlibdeps.log" >&2; echo "deb.sh: no Depends computed" >&2; exit 1; }

# 5. Control files and the package.
install -d "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: uscm
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Recommends: ibverbs-providers
Suggests: ibsim-utils, opensm, libumad2sim0, gnuplot-nox
Section: net
Priority: optional
Description: user-space InfiniBand Communication Manager
 uscm is an InfiniBand Communication Manager, SA client and MAD transport in
 user space, without the kernel's ib_cm, ib_sa and rdma_ucm. This package has
 the uscm command (demo, ping, saquery, sim, dump, exec, topo), the uscmd MAD
 router with its systemd unit (not enabled), the drop-in librdmacm.so.1 in
 /usr/lib/uscm (uscm exec -- PROGRAM), and the uscm C API (libuscm.so.0,
 headers, pkg-config file uscm.pc).
EOF
# systemd learns about the unit; it is not enabled (it needs the CA and port).
for s in postinst postrm; do
  cat >"$root/DEBIAN/$s" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
EOF
  chmod 0755 "$root/DEBIAN/$s"
done
# libuscm.so.0 is in the linker's default path: dpkg runs ldconfig through the
# trigger, and shlibs tells dpkg-shlibdeps of programs linking it which package
# provides it. (The drop-in in /usr/lib/uscm is found by path, not by ldconfig.)
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
echo "libuscm 0 uscm (>= $version)" >"$root/DEBIAN/shlibs"
chmod 0644 "$root/DEBIAN/triggers" "$root/DEBIAN/shlibs"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
  xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/md5sums"
deb="$out/uscm_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "deb.sh: $deb"
echo "deb.sh: Depends: $depends"
echo "deb.sh: install it with: sudo apt install $deb"
