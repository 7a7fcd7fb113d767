#!/bin/bash
# The main job: build hpregion and run its examples, printed as a report --
# what each backend gave (demo), cassandra-like on huge vs base pages (its
# full results go to a JSON file whose path it prints), kvm-lite.
# As root it makes a tmpfs huge= mount and a hugetlbfs mount in a private
# mount namespace and grows the hugetlb pool, restoring it at the end. Run
# by a user it runs itself again through sudo. With --user, or as a user on
# a machine without sudo, it runs as that user: memfd and THP, no mounts,
# no pool, and says so.
#   scripts/run-examples.sh [--user]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib/root.sh
if [ "${1:-}" != --user ] && ! as_root "$@"; then
	echo "main job: not root and there is no sudo: running as $(id -un)"
fi
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

if [ "$(id -u)" = 0 ] && [ -z "${HPR_IN_NS:-}" ]; then
	exec unshare -m --propagation private env HPR_IN_NS=1 "$0" "$@"
fi
TMPFS="" HTLB=""
if [ "$(id -u)" = 0 ]; then
	# The root test suites set the hugetlb pool and THP modes under an
	# exclusive lock (tests/lib.sh): hold it shared while our pool is
	# raised, so none runs meanwhile and none has its pool reset under it
	# by our restore (cassandra-like/run.sh shares it too)
	# shellcheck source=../tests/lib.sh
	. "$ROOT/tests/lib.sh"
	exec 9>>"$HPR_SYSTEM_LOCK"
	flock -n -s 9 || {
		echo "main job: waiting for a root test suite to finish ($HPR_SYSTEM_LOCK)"
		flock -s 9
	}
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
echo
echo "== demo: a 256 MiB region on each backend, faulted in by the workers (huge-mapped: from smaps)"
"$ROOT"/build/examples/hpr-demo "$TMPFS" "$HTLB" 256
for ex in "$ROOT"/examples/*/run.sh; do
	[ -x "$ex" ] || continue
	echo
	echo "== $(basename "$(dirname "$ex")")"
	HPR_TMPFS="$TMPFS" HPR_HUGETLBFS="$HTLB" HPR_BUILD="$ROOT/build" "$ex"
done
