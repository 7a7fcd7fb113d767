#!/bin/bash
# The main job: build hpregion and run its examples against a tmpfs huge=
# mount this script makes (as root, in a private mount namespace, with a
# hugetlbfs mount and a hugetlb pool it restores). Without root it runs
# them on a memfd and THP and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

if [ "$(id -u)" = 0 ] && [ -z "${HPR_IN_NS:-}" ]; then
	exec unshare -m --propagation private env HPR_IN_NS=1 "$0" "$@"
fi
TMPFS="" HTLB=""
if [ "$(id -u)" = 0 ]; then
	TMPFS=$(mktemp -d /tmp/hpr-tmpfs.XXXXXX)
	HTLB=$(mktemp -d /tmp/hpr-hugetlbfs.XXXXXX)
	mount -t tmpfs -o huge=always,size=4g none "$TMPFS"
	mount -t hugetlbfs none "$HTLB"
	POOL=/proc/sys/vm/nr_hugepages
	OLD=$(cat $POOL)
	trap 'echo "$OLD" > '$POOL'; umount "$TMPFS" "$HTLB"; rmdir "$TMPFS" "$HTLB"' EXIT
	echo $((OLD + 256)) > $POOL
	echo "main job: tmpfs huge=always at $TMPFS, hugetlbfs at $HTLB, pool $(cat $POOL) pages"
else
	echo "main job: not root, so no tmpfs huge= mount and no hugetlb pool: running on memfd and THP"
fi
"$ROOT"/build/examples/hpr-demo "$TMPFS" "$HTLB" 256
for ex in "$ROOT"/examples/*/run.sh; do
	[ -x "$ex" ] || continue
	echo "== $(basename "$(dirname "$ex")")"
	HPR_TMPFS="$TMPFS" HPR_HUGETLBFS="$HTLB" HPR_BUILD="$ROOT/build" "$ex"
done
