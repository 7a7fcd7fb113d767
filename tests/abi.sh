#!/bin/bash
# The shared library exports exactly what src/hpregion.map lists as global
# (each with its version node), every function the public header marks
# HPR_API is in the map, and the SONAME is libhpregion.so.<ABI major>.
#   tests/abi.sh LIBHPREGION_SO SRC_DIR
set -euo pipefail
SO=${1:?usage: abi.sh LIBHPREGION_SO SRC_DIR}
SRC=${2:?usage: abi.sh LIBHPREGION_SO SRC_DIR}
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
[ $rc = 0 ] && echo "abi: $(wc -l <"$TMP/exported") symbols exported, as $MAP says; SONAME $soname"
exit $rc
