#!/bin/sh
# Fetches the ONNX Runtime C/C++ API headers (API version 21, ORT 1.21) from Debian's
# libonnxruntime-dev package and prints the directory holding onnxruntime_c_api.h.
#
# Why Debian: ORT's PyPI wheels ship no headers, and a custom-op library needs only the headers.
# The package comes from the `trixie` suite of the mirror apt already uses, through a private
# apt state directory, so the system's sources and package lists are left untouched.
#
# Usage: fetch_ort_headers.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/graphopt; a second call reuses the cache.
# Diagnostics go to stderr; the only stdout line is the include directory.
set -eu

suite=trixie
package=libonnxruntime-dev
cache_root=${1:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/graphopt}
dest="$cache_root/onnxruntime-headers-$suite"

fail() {
  echo "fetch_ort_headers: $*" >&2
  exit 1
}

if [ -f "$dest/onnxruntime/onnxruntime_c_api.h" ]; then
  echo "$dest/onnxruntime"
  exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: this fetch works on Debian-like systems only"
command -v dpkg >/dev/null 2>&1 || fail "dpkg not found: this fetch works on Debian-like systems only"

# The mirror apt already uses (deb822 sources first, then the one-line format).
mirror=
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' "$f")
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

work=$(mktemp -d "${TMPDIR:-/tmp}/graphopt-ort-headers.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb $mirror $suite main" >"$work/sources.list"
# A private state: own lists, own cache, no other sources. The download runs as the calling
# user (apt's _apt sandbox user cannot write into a private temporary directory).
set -- -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" \
  -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null \
  -o "APT::Sandbox::User=$(id -un)" -q

echo "fetch_ort_headers: downloading $package ($suite) from $mirror" >&2
apt-get "$@" update >"$work/log" 2>&1 || { cat "$work/log" >&2; fail "apt-get update failed for $mirror $suite"; }
(cd "$work" && apt-get "$@" download "$package") >>"$work/log" 2>&1 ||
  { cat "$work/log" >&2; fail "apt-get download $package failed"; }
deb=$(ls "$work"/${package}_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "no $package .deb was downloaded"
dpkg -x "$deb" "$work/root" || fail "dpkg -x $deb failed"
[ -f "$work/root/usr/include/onnxruntime/onnxruntime_c_api.h" ] ||
  fail "$deb holds no usr/include/onnxruntime/onnxruntime_c_api.h"

# Publish atomically so that an interrupted fetch never leaves a half-filled cache behind.
mkdir -p "$cache_root"
staging=$(mktemp -d "$cache_root/.staging.XXXXXX")
chmod 755 "$staging"
mv "$work/root/usr/include/onnxruntime" "$staging/onnxruntime"
basename "$deb" >"$staging/SOURCE"
if ! mv -T "$staging" "$dest" 2>/dev/null; then
  rm -rf "$staging"  # another build published the same headers first
  [ -f "$dest/onnxruntime/onnxruntime_c_api.h" ] || fail "could not move the headers into $dest"
fi
echo "$dest/onnxruntime"
