#!/bin/bash
# The shared library exports exactly what src/hpregion.map lists as global
# (each with its version node), every function the public header marks
# HPR_API is in the map, and the SONAME is libhpregion.so.<ABI major>.
# Then the 0.1 ABI: a client built against the 0.1 header
# (tests/abi/hpregion-0.1.h, frozen from e490a55) runs against this library
# (tests/abi/old_client.c), and every 0.1 field and constant sits where the
# 0.1 header put it (tests/abi/layout.c built against both headers; a
# struct may only grow). See hpregion.h, "Versioned structs".
#   tests/abi.sh LIBHPREGION_SO SRC_DIR [CC]
set -euo pipefail
SO=${1:?usage: abi.sh LIBHPREGION_SO SRC_DIR [CC]}
SRC=${2:?usage: abi.sh LIBHPREGION_SO SRC_DIR [CC]}
CC=${3:-${CC:-cc}}
MAP=$SRC/src/hpregion.map
HDR=$SRC/include/hpregion/hpregion.h
TMP=$(mktemp -d /tmp/hpr-abi-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# map: "NODE {" opens a node, "global:"/"local:" switch sections
awk '
	/^[ \t]*[A-Za-z0-9_.]+[ \t]*\{/ { node = $1; sect = ""; next }
	/global:/ { sect = "g"; next }
	/local:/ { sect = "l"; next }
	/^[ \t]*\}/ { sect = ""; next }
	sect == "g" && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ {
		gsub(/[ \t;]/, ""); print $0 "@@" node
	}' "$MAP" | sort >"$TMP/map"
# the version nodes themselves show up as absolute symbols
awk '/^[ \t]*[A-Za-z0-9_.]+[ \t]*\{/ { print $1 }' "$MAP" | sort >"$TMP/nodes"

nm -D --defined-only "$SO" | awk '$2 != "A" { print $3 }' | sort >"$TMP/exported"
nm -D --defined-only "$SO" | awk '$2 == "A" { print $3 }' | sort >"$TMP/exported_nodes"

rc=0
if ! diff -u "$TMP/map" "$TMP/exported" >"$TMP/d1"; then
	echo "exported symbols differ from $MAP (- map, + exported):"
	cat "$TMP/d1"
	rc=1
fi
if ! diff -u "$TMP/nodes" "$TMP/exported_nodes" >"$TMP/d2"; then
	echo "version nodes differ from $MAP:"
	cat "$TMP/d2"
	rc=1
fi
# every HPR_API function in the header is in the map (an API the
# library forgot to export links for nobody)
sed -n 's/^HPR_API[^(]*[ *]\(hpr_[a-z0-9_]*\)(.*/\1/p' "$HDR" | sort -u >"$TMP/api"
sed 's/@@.*//' "$TMP/map" | sort -u >"$TMP/mapnames"
if ! diff -u "$TMP/api" "$TMP/mapnames" >"$TMP/d3"; then
	echo "HPR_API functions in $HDR differ from $MAP (- header, + map):"
	cat "$TMP/d3"
	rc=1
fi
[ -s "$TMP/api" ] || { echo "found no HPR_API functions in $HDR"; rc=1; }

major=$(sed -n 's/^#define HPR_VERSION_MAJOR \([0-9]*\).*/\1/p' "$HDR")
soname=$(objdump -p "$SO" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" != "libhpregion.so.$major" ]; then
	echo "SONAME is '$soname', want libhpregion.so.$major"
	rc=1
fi

# The 0.1 header's clients: same layout, and they work.
mkdir -p "$TMP/old/hpregion"
cp "$SRC/tests/abi/hpregion-0.1.h" "$TMP/old/hpregion/hpregion.h"
"$CC" -std=c11 -I"$TMP/old" -o "$TMP/layout-0.1" "$SRC/tests/abi/layout.c"
"$CC" -std=c11 -I"$SRC/include" -o "$TMP/layout-now" "$SRC/tests/abi/layout.c"
"$TMP/layout-0.1" >"$TMP/layout-0.1.txt"
"$TMP/layout-now" >"$TMP/layout-now.txt"
if ! diff -u <(grep -v '^sizeof ' "$TMP/layout-0.1.txt") \
	<(grep -v '^sizeof ' "$TMP/layout-now.txt") >"$TMP/d4"; then
	echo "a 0.1 field or constant moved (- 0.1 header, + current header):"
	cat "$TMP/d4"
	rc=1
fi
while read -r _ _ name old; do
	now=$(awk -v n="$name" '$1 == "sizeof" && $3 == n { print $4 }' "$TMP/layout-now.txt")
	if [ "${now:-0}" -lt "$old" ]; then
		echo "struct $name shrank from $old bytes (0.1) to ${now:-?}"
		rc=1
	fi
done < <(grep '^sizeof ' "$TMP/layout-0.1.txt")
"$CC" -std=c11 -I"$TMP/old" -o "$TMP/old_client" "$SRC/tests/abi/old_client.c" "$SO" \
	-Wl,-rpath,"$(dirname "$SO")"
if ! "$TMP/old_client"; then
	echo "a client built against the 0.1 header fails against $SO"
	rc=1
fi

[ $rc = 0 ] && echo "abi: $(wc -l <"$TMP/exported") symbols exported, as $MAP says; SONAME $soname; 0.1 layouts kept and a 0.1 client works"
exit $rc
