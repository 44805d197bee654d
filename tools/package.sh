#!/usr/bin/env bash
# Builds what a user without a Rust toolchain installs, then checks each as that user would
# use it (issue 37):
#   target/dist/accel_VERSION_ARCH.deb            for Debian and Ubuntu: /usr/bin/accel, the
#                                                  man page, bash/zsh/fish completions, the
#                                                  copyright; no mbuffer or pv link
#   target/dist/accel-VERSION-ARCH-unknown-linux-musl
#                                                  one static binary for a NAS or a backup box
# The .deb is staged here and put together by dpkg-deb: nothing to compile (cargo-deb would
# be one more tool to build in CI, for the same few files). The man page and the completions
# come from the packaged binary itself (`accel --generate`). Checking installs the package
# (`dpkg -i`, so as root), looks for every file where Debian's tools look, moves a stream with
# both binaries (the static one through --from/--to on loopback, a plain pipe, and as pv),
# then removes the package and sees that nothing is left.
#
# Usage: tools/package.sh [--no-check] [--no-static]      (CARGO_TARGET_DIR is honoured)
#   --no-check   build only (checking needs root)
#   --no-static  the .deb only, for a toolchain that cannot have the musl target
# Needs: the Debian packages dpkg-dev (dpkg-shlibdeps, for Depends), binutils, python3; for
# the static binary, Rust's ARCH-unknown-linux-musl target (rustup target add) and musl-tools
# (a C compiler for musl: aws-lc and blake3 compile C and assembly); for checking, man-db.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

check=1
static=$(uname -m)-unknown-linux-musl
for arg; do
  case $arg in
    --no-check) check=0 ;;
    --no-static) static= ;;
    *) echo "usage: tools/package.sh [--no-check] [--no-static]" >&2; exit 2 ;;
  esac
done

target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
dist=$target_dir/dist
host=$(rustc -vV | sed -n 's/^host: //p')        # x86_64-unknown-linux-gnu: what the .deb holds
arch=$(dpkg --print-architecture)                 # amd64
pkgid=$(cargo pkgid --locked)
version=${pkgid##*@}                              # ...#accel-buffer@0.1.0

say() { printf 'package: %s\n' "$*" >&2; }
fail() { printf 'package: FAILED: %s\n' "$*" >&2; exit 1; }
phase_start=$SECONDS
phase() { say "$* ($((SECONDS - phase_start)) s)"; phase_start=$SECONDS; }

missing=()
for tool in dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev strip:binutils readelf:binutils \
  python3:python3 ${static:+"$(uname -m)-linux-musl-gcc:musl-tools"}; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ "$check" = 1 ]; then
  command -v man >/dev/null || missing+=(man-db)
  [ "$(id -u)" = 0 ] || fail "checking installs the package (dpkg -i): run as root, or --no-check"
fi
[ ${#missing[@]} = 0 ] || fail "missing tools; install the Debian packages: ${missing[*]}"
if [ -n "$static" ] && ! ls "$(rustc --print target-libdir --target "$static")"/libstd-* \
  >/dev/null 2>&1; then
  fail "no Rust standard library for $static: rustup target add $static, or --no-static"
fi

# --- build --------------------------------------------------------------------------------
# One cargo run for both targets: its jobs fill both CPUs while either build's last, serial
# step (accel itself, one codegen unit with LTO) runs.
cargo build --locked --release --bin accel --target "$host" ${static:+--target "$static"}
phase "built accel for $host${static:+ and $static}"

rm -rf "$dist"
mkdir -p "$dist"
# As Debian's dh_strip does: no symbols, no compiler's notes.
strip_to() { strip --remove-section=.comment --remove-section=.note -o "$2" "$1"; }
binary=
if [ -n "$static" ]; then
  binary=$dist/accel-$version-$static
  strip_to "$target_dir/$static/release/accel" "$binary"
fi

# --- the Debian package -------------------------------------------------------------------
root=$dist/deb
deb=$dist/accel_${version}_$arch.deb
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" \
  "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d" "$root/usr/share/doc/accel"
strip_to "$target_dir/$host/release/accel" "$root/usr/bin/accel"
accel=$(realpath "$root/usr/bin/accel")
"$accel" --generate man | gzip -9n >"$root/usr/share/man/man1/accel.1.gz"
"$accel" --generate bash >"$root/usr/share/bash-completion/completions/accel"
"$accel" --generate zsh >"$root/usr/share/zsh/vendor-completions/_accel"
"$accel" --generate fish >"$root/usr/share/fish/vendor_completions.d/accel.fish"

# The copyright file (Debian's machine-readable format): accel's own license, then what the
# binary is linked from: the crates (their licenses as they declare them, from cargo tree's
# normal dependencies, proc macros left out: they run at build time only) and aws-lc's C,
# whose notices a binary must carry.
crates=$(cargo tree --locked --target "$host" -e normal,no-proc-macro --prefix none \
  -f '{p}: {l}' | sed -e 's/^\([^ ]* [^ ]*\) (\/[^)]*):/\1:/' -e 's/ (\*)$//' | sort -u)
awslc=$(sed -n 's/^\(aws-lc-sys\) v\([^:]*\):.*/\1-\2/p' <<<"$crates")
awslc_license=
for file in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"${awslc:-aws-lc-sys}"/LICENSE; do
  awslc_license=$file
done
[ -f "$awslc_license" ] || fail "aws-lc's notices: no LICENSE in the source of ${awslc:-aws-lc-sys}"
{
  cat <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: accel

Files: *
Copyright: the accel developers
License: MIT or Apache-2.0
Comment: The program is linked from these Rust crates, each under the license it declares:
EOF
  sed 's/^/ /' <<<"$crates"
  cat <<'EOF'

Files: aws-lc (in the crate aws-lc-sys)
Copyright: Amazon.com, Inc. or its affiliates; Google Inc.; the OpenSSL Project; others
License: aws-lc
 The notices of aws-lc as it ships them:
 .
EOF
  # Its full Apache-2.0 text is Debian's common one; the other licenses' texts stay.
  awk '/^Apache License 2\.0$/ { skip = 1; print "Apache License 2.0: see below."; next }
       /^ISC License$/ { skip = 0 }
       !skip { print }
       END { if (skip) exit 1 }' "$awslc_license" | sed -e 's/^[[:space:]]*$/./' -e 's/^/ /' ||
    fail "$awslc_license: no ISC License after the Apache License's text"
  cat <<'EOF'

License: MIT
 Permission is hereby granted, free of charge, to any person obtaining a copy of this
 software and associated documentation files (the "Software"), to deal in the Software
 without restriction, including without limitation the rights to use, copy, modify, merge,
 publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
 to whom the Software is furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in all copies or
 substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
 INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
 PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
 FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
 OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
 DEALINGS IN THE SOFTWARE.

License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0, is in
 /usr/share/common-licenses/Apache-2.0.
EOF
} >"$root/usr/share/doc/accel/copyright"

# A native package's changelog (Debian's tools look for one): the commit it was built from.
maintainer="accel maintainers <maintainers@users.noreply.a-seed-9ce3e8d7.example>"
printf 'accel (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
  "$version" "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$maintainer" \
  "$(git log -1 --format=%cD 2>/dev/null || date -R)" |
  gzip -9n >"$root/usr/share/doc/accel/changelog.gz"

# Depends as Debian computes it: the shared libraries the binary links (libc6, libgcc-s1)
# at the least versions its symbols need. dpkg-shlibdeps reads debian/control, so it gets one.
shlibs=$dist/shlibs
mkdir -p "$shlibs/debian"
printf 'Source: accel\n\nPackage: accel\nArchitecture: any\n' >"$shlibs/debian/control"
depends=$(cd "$shlibs" && dpkg-shlibdeps -O "$accel" | sed -n 's/^shlibs:Depends=//p')
rm -r "$shlibs"
[ -n "$depends" ] || fail "dpkg-shlibdeps found no Depends for usr/bin/accel"

# No maintainer scripts: the package makes no mbuffer or pv name for accel. Debian's mbuffer
# and pv ship theirs as plain files, which update-alternatives leaves in place ("not replacing
# /usr/bin/mbuffer with a link"): an alternatives entry would do nothing where the real one is
# installed, and take the name unasked where it is not. The README's one-liners make the
# links for whoever wants them.
cat >"$root/DEBIAN/control" <<EOF
Package: accel
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Section: utils
Priority: optional
Description: pipeline buffer that keeps both sides of a pipe moving
 In a pipeline (producer | accel | consumer), accel holds what the consumer has
 not taken yet, so that neither side waits on the other, with memory only as
 the backlog grows. It shows progress, names the bottleneck when the run ends,
 and delivers every byte in order or says what was lost. It carries a stream
 between hosts, encrypted (--to, --from), resuming after a dropped connection.
 Started under the name mbuffer or pv (a link: this package makes none), it
 reads their command lines.
EOF
(cd "$root" && find usr -type f -exec md5sum {} + | sort -k 2) >"$root/DEBIAN/md5sums"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
kib() { du -k "$1" | cut -f1; }
phase "made $deb ($(kib "$deb") KiB)${binary:+ and $binary ($(kib "$binary") KiB)}"

[ "$check" = 1 ] || exit 0

# --- checks -------------------------------------------------------------------------------
work=$(mktemp -d)
receiver=
ours=0 # the package installed by this check, removed however the check ends
cleanup() {
  [ -z "$receiver" ] || kill "$receiver" 2>/dev/null || true
  [ "$ours" = 0 ] || dpkg --purge accel >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A free port on loopback, for --from; the receiver says so at once if it was taken since.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
# send FROM-BINARY TO-BINARY: the input between the two over loopback, with the key.
send() {
  local port
  port=$(free_port)
  timeout 120 "$2" -q --from "127.0.0.1:$port" --key-file "$work/key" >"$work/out" &
  receiver=$!
  timeout 120 "$1" -q --to "127.0.0.1:$port" --key-file "$work/key" <"$work/in" ||
    fail "$1 --to $2 --from: sender's status $?"
  wait "$receiver" || fail "$1 --to $2 --from: receiver's status $?"
  receiver=
  cmp "$work/in" "$work/out" || fail "$1 --to $2 --from: the bytes differ"
}
head -c 64M /dev/urandom >"$work/in"
"$target_dir/$host/release/accel" --generate key "$work/key"

# The static binary: no interpreter, no shared library; it moves a stream as each of its
# uses does.
if [ -n "$binary" ]; then
  linked=$(ldd "$binary" 2>&1 || true)
  case "$linked" in
    *"not a dynamic executable"* | *"statically linked"*) ;;
    *) fail "ldd $binary: $linked" ;;
  esac
  [[ "$(readelf -d "$binary")" != *NEEDED* ]] || fail "$binary needs shared libraries"
  [[ "$(readelf -l "$binary")" != *INTERP* ]] || fail "$binary names a program interpreter"
  "$binary" -q <"$work/in" >"$work/out"
  cmp "$work/in" "$work/out" || fail "the static binary, stdin to stdout"
  "$binary" -q "$work/in" | cat >"$work/out"
  cmp "$work/in" "$work/out" || fail "the static binary, a FILE operand into a pipe"
  ln -s "$binary" "$work/pv"
  "$work/pv" -q "$work/in" >"$work/out"
  cmp "$work/in" "$work/out" || fail "the static binary run as pv"
  send "$binary" "$binary"
  phase "checked the static binary: ldd says ${linked//$'\t'/}; a pipe, a FILE, as pv, --to/--from"
fi

# The package: installed, found where Debian's tools look, removed without a trace.
case $(dpkg-query -W -f '${db:Status-Status}' accel 2>/dev/null || true) in
  "" | not-installed) ;;
  *) fail "a package accel is installed already; checking would replace it and remove it" ;;
esac
dpkg-deb --info "$deb" | sed 's/^/  /' >&2
ours=1
dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb"
installed=$(dpkg -L accel | sort)
for file in /usr/bin/accel /usr/share/man/man1/accel.1.gz \
  /usr/share/bash-completion/completions/accel /usr/share/zsh/vendor-completions/_accel \
  /usr/share/fish/vendor_completions.d/accel.fish /usr/share/doc/accel/copyright; do
  grep -qx "$file" <<<"$installed" || fail "the package does not install $file"
  [ -s "$file" ] || fail "$file is missing or empty after dpkg -i"
done
grep -E '/(mbuffer|pv)$' <<<"$installed" && fail "the package installs an mbuffer or pv name"
[ "$(command -v accel)" = /usr/bin/accel ] || fail "accel on PATH is $(command -v accel)"
[ "$(man -w accel)" = /usr/share/man/man1/accel.1.gz ] || fail "man -w accel: $(man -w accel)"
[[ "$(man accel 2>/dev/null)" == *"EXIT STATUS"* ]] || fail "man accel does not show the page"
# The bash completion as bash calls it: `accel --gen<TAB>`, then `accel --generate <TAB>`.
words=$(bash -c '. /usr/share/bash-completion/completions/accel
  COMP_WORDS=(accel --gen); COMP_CWORD=1
  _accel accel --gen accel; echo "${COMPREPLY[*]}"
  COMP_WORDS=(accel --generate ""); COMP_CWORD=2
  _accel accel "" --generate; echo "${COMPREPLY[*]}"')
[ "$words" = $'--generate\nman bash zsh fish key' ] || fail "bash completion gave: $words"
[ "$(head -1 /usr/share/zsh/vendor-completions/_accel)" = '#compdef accel' ] ||
  fail "_accel is not a zsh completion for accel"
grep -q '^complete -c accel ' /usr/share/fish/vendor_completions.d/accel.fish ||
  fail "accel.fish is not a fish completion for accel"
# The two builds speak the same protocol: the packaged accel sends to the static one and back.
send /usr/bin/accel "${binary:-/usr/bin/accel}"
send "${binary:-/usr/bin/accel}" /usr/bin/accel
dpkg --purge accel >/dev/null
ours=0
for file in $installed; do
  [ -d "$file" ] || [ ! -e "$file" ] || fail "$file is left after dpkg --purge"
done
[ ! -e /usr/share/doc/accel ] || fail "/usr/share/doc/accel is left after dpkg --purge"
phase "checked $deb: installs, man -w accel, completions," \
  "--to/--from${binary:+ with the static binary}, purges"
