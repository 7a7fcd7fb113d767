#!/bin/bash
# Install a built hpregion into a temporary prefix and build consumers
# against the installed tree only:
#  1. C and C++ programs compiled with nothing but
#     `pkg-config --cflags --libs hpregion` (plus an rpath to find the .so),
#     where pkg-config sees no other .pc file (liburing's development files
#     are not needed to build against the shared library), and a static C
#     program with `pkg-config --static --libs hpregion`;
#  2. the same programs through CMake's find_package(hpregion) and the
#     hpregion::hpregion / hpregion::hpregion_static targets.
# Each program runs and must exit 0, and the shared ones must have loaded
# the installed library, not the build tree's.
#   tests/consumer/run.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/hpr-consumer-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
CC=${CC:-cc}
CXX=${CXX:-c++}

echo "== install $BUILD into $TMP"
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
PC=$(dirname "$(find "$TMP/prefix" -name hpregion.pc | head -1)")
[ -n "$PC" ] || { echo "hpregion.pc was not installed" >&2; exit 1; }
# only the installed hpregion.pc: a machine without liburing.pc
export PKG_CONFIG_LIBDIR=$PC PKG_CONFIG_PATH=
for q in --cflags --libs "--static --libs"; do
	# shellcheck disable=SC2086 # q is a word list by design
	pkg-config $q hpregion >/dev/null || {
		echo "pkg-config $q hpregion fails with only hpregion.pc in the search path" >&2
		exit 1
	}
done
FLAGS=$(pkg-config --cflags --libs hpregion)
LIBDIR=$(pkg-config --variable=libdir hpregion)
echo "pkg-config --cflags --libs hpregion: $FLAGS"
case "$FLAGS" in
*"$TMP/prefix"*) ;;
*) echo "hpregion.pc does not point into the install prefix" >&2; exit 1 ;;
esac

uses_installed() { # binary
	local so
	so=$(ldd "$1" | awk '/libhpregion/ {print $3}')
	if [ "$(readlink -f "$so")" != "$(readlink -f "$LIBDIR/$(basename "$so")")" ]; then
		echo "$1 loads $so, not the installed library in $LIBDIR" >&2
		return 1
	fi
}

echo "== pkg-config build"
# shellcheck disable=SC2086 # FLAGS is a word list by design
"$CC" -std=c11 -Wall -Wextra -Werror -o "$TMP/consumer_c" "$SRC/consumer.c" $FLAGS \
	-Wl,-rpath,"$LIBDIR"
# shellcheck disable=SC2086
"$CXX" -std=c++17 -Wall -Wextra -Werror -o "$TMP/consumer_cxx" "$SRC/consumer.cpp" $FLAGS \
	-Wl,-rpath,"$LIBDIR"
for b in consumer_c consumer_cxx; do
	uses_installed "$TMP/$b"
	"$TMP/$b"
done

echo "== pkg-config static build"
# the archive in place of -lhpregion; its dependencies from Libs.private
STATIC=$(pkg-config --static --libs hpregion)
STATIC=${STATIC/-lhpregion/$LIBDIR/libhpregion.a}
echo "pkg-config --static --libs hpregion: $STATIC"
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -Werror -o "$TMP/consumer_static_pc" "$SRC/consumer.c" \
	$(pkg-config --cflags hpregion) $STATIC
if ldd "$TMP/consumer_static_pc" | grep -q libhpregion; then
	echo "consumer_static_pc links libhpregion.so, not the archive" >&2
	exit 1
fi
"$TMP/consumer_static_pc"

# CMake's package config finds liburing through the system's pkg-config
unset PKG_CONFIG_LIBDIR PKG_CONFIG_PATH

echo "== CMake find_package build"
cmake -S "$SRC" -B "$TMP/build" -DCMAKE_PREFIX_PATH="$TMP/prefix" \
	-DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$TMP/build" >/dev/null
for b in consumer_c consumer_cxx; do
	uses_installed "$TMP/build/$b"
	"$TMP/build/$b"
done
if ldd "$TMP/build/consumer_static" | grep -q libhpregion; then
	echo "consumer_static links libhpregion.so, not the archive" >&2
	exit 1
fi
"$TMP/build/consumer_static"
echo "== consumer builds passed"
