#!/bin/sh
# build-ucx.sh builds a UCX release from its source tarball and installs it
# under a cache directory, once; it prints the install prefix (later calls
# print it at once). make test-ucx and make golden-addresses use it.
#
#   scripts/build-ucx.sh VERSION [TARBALL]
#
# TARBALL is the release's source tarball, anywhere; without it,
# $UCX_SRC_DIR/ucx-VERSION.tar.gz (an optional cache of tarballs, default
# ../shared/ucx). Either the release asset (ucx-VERSION.tar.gz from
# https://github.com/openucx/ucx/releases) or a git archive of the tag
# (then autogen.sh runs first). UCX_PREFIX_ROOT is the cache root (default
# ~/.cache/ucxnet-ucx). Needs gcc, make, and for a git archive autoconf,
# automake and libtool. About 10 minutes on 2 CPUs; the log goes to
# PREFIX.log.
set -eu
v=${1:-}
[ -n "$v" ] || { echo "usage: $0 VERSION [TARBALL]" >&2; exit 2; }
tarball=${2:-${UCX_SRC_DIR:-../shared/ucx}/ucx-$v.tar.gz}
root=${UCX_PREFIX_ROOT:-$HOME/.cache/ucxnet-ucx}
prefix=$root/$v
if [ -f "$prefix/.built" ]; then
	echo "$prefix"
	exit 0
fi
if [ ! -f "$tarball" ]; then
	cat >&2 <<MSG
build-ucx.sh: no UCX $v source tarball at $tarball.
Download ucx-$v.tar.gz from UCX's releases:
  https://github.com/openucx/ucx/releases/download/v$v/ucx-$v.tar.gz
and name it: make test-ucx UCX_VERSION=$v UCX_TARBALL=/path/to/ucx-$v.tar.gz
(or put it in ${UCX_SRC_DIR:-../shared/ucx}/, the optional cache UCX_SRC_DIR names).
MSG
	exit 2
fi
case $tarball in /*) ;; *) tarball=$(pwd)/$tarball ;; esac
for t in make gcc tar; do
	command -v "$t" >/dev/null || { echo "build-ucx.sh: $t not found" >&2; exit 2; }
done
mkdir -p "$root"
work=$(mktemp -d "$root/build-$v.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$prefix.log
echo "build-ucx.sh: building UCX $v from $tarball into $prefix (log: $log)" >&2
{
	tar -C "$work" -xzf "$tarball"
	cd "$work"/ucx-*
	[ -x configure ] || ./autogen.sh
	./configure --prefix="$prefix" --enable-mt --without-java --without-go --disable-doxygen-doc
	make -j"$(nproc)"
	make install
} >"$log" 2>&1 || { echo "build-ucx.sh: UCX $v failed to build; see $log" >&2; exit 1; }
touch "$prefix/.built"
echo "$prefix"
