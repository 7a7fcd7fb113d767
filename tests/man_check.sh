#!/bin/bash
# SPDX-License-Identifier: MIT
# Every symbol libhpregion.so exports (nm -D --defined-only) and every
# global of src/hpregion.map has docs/man/<symbol>.3, plus hpr_config_init.3
# (an inline wrapper), the hpr(1) pages and hpregion(7); no page documents
# a function that does not exist; every page renders without a groff
# warning.
#   man_check.sh LIBHPREGION_SO SOURCE_DIR
set -uo pipefail
LIB=$1
SRC=$2
MAN=$SRC/docs/man
fails=0
bad() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}
for t in nm groff; do
	command -v $t >/dev/null || { echo "man_check: $t missing (scripts/deps.sh)" >&2; exit 1; }
done

syms=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TWi]$/ {sub(/@.*/, "", $3); print $3}' | sort -u)
[ -n "$syms" ] || bad "no exported symbols found in $LIB"
mapsyms=$(sed -n '/global:/,/local:/p' "$SRC/src/hpregion.map" | grep -o 'hpr_[a-z0-9_]*' | sort -u)
want=$(printf '%s\n' $syms $mapsyms hpr_config_init | sort -u)
for s in $want; do
	p=$MAN/$s.3
	if [ ! -f "$p" ]; then
		bad "exported symbol $s has no man page docs/man/$s.3"
		continue
	fi
	grep -q "^$s \\\\-" "$p" || bad "$s.3: NAME section does not name $s"
	grep -q "$s(" "$p" || bad "$s.3: SYNOPSIS has no prototype of $s"
done
for p in "$MAN"/*.3; do
	s=$(basename "$p" .3)
	printf '%s\n' $want | grep -qx "$s" || bad "docs/man/$s.3 documents $s, which is not exported"
done
for p in hpr.1 hpr-probe.1 hpr-pool.1 hpr-mount.1 hpr-stat.1 hpregion.7; do
	[ -f "$MAN/$p" ] || bad "docs/man/$p is missing"
done
n=0
for p in "$MAN"/*.[137]; do
	out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$p" 2>&1)
	[ -z "$out" ] || bad "$(basename "$p") does not render cleanly: $out"
	if command -v man >/dev/null; then
		MANWIDTH=80 man -l "$p" >/dev/null 2>&1 || bad "man -l $(basename "$p") failed"
	fi
	n=$((n + 1))
done
[ $fails = 0 ] || { echo "man_check: $fails problems" >&2; exit 1; }
echo "man_check: $(printf '%s\n' $want | wc -l) symbols documented, $n pages render"
