#!/bin/bash
# The cassandra-like demo (a main-job step): load a small LSM store and run
# YCSB workloads A, B and the seed's update-heavy mix twice -- on huge pages
# (data dir on a tmpfs huge=always, memtable and row cache in hpregion
# regions) and on base pages (tmpfs huge=never, plain 4 KiB-page memory) --
# and print both side by side: a table row per run, then the summary table.
# Every result (p99.9, engine counters, ...) goes to a JSON file whose path
# it prints (cassandra-like.json in the build dir). About 1-2 minutes on 2
# cores.
#
# Environment (set by scripts/run-examples.sh; all optional):
#   HPR_BUILD   build dir holding examples/cassandra-like/cassandra-like
#   HPR_TMPFS   a tmpfs huge=always dir ("" when not root); this script
#               mounts its own pair of tmpfs anyway when it is root
#   CASS_ARGS   extra driver options, e.g. "--records 400000 --seconds 30"
# Usage: run.sh [--bench | --restart | --restart-image]
#   --restart: the fast-restart demo (~1-2 minutes, root only): the store is
#   killed with -9 mid-run and started again on the same data, warm (row
#   cache and memtables in kept regions, attached) and cold (fresh regions),
#   three times each; ops/s per 100 ms and per second after each restart,
#   the time to 90 % of steady ops/s, and acknowledged writes lost (0).
#   --restart-image: the same after a clean shutdown, with the row cache
#   image (--cache-image) on a disk ($WORK, under /tmp): warm (kept regions
#   attached), cold (kept regions and image gone) and image (kept regions
#   gone, as after a reboot, the image's page cache dropped: the cache is
#   loaded lazily from the disk), three times each.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${HPR_BUILD:-$ROOT/build}
BIN=$BUILD/examples/cassandra-like/cassandra-like
if [ ! -x "$BIN" ]; then
	cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$BUILD" -j"$(nproc)" --target cassandra-like >/dev/null
fi

# as root: a private mount namespace so our mounts vanish with us
if [ "$(id -u)" = 0 ] && [ -z "${HPR_IN_NS:-}" ] && [ -z "${CASS_IN_NS:-}" ]; then
	exec unshare -m --propagation private env CASS_IN_NS=1 "$0" "$@"
fi

# Demo: the data (200k records x 10 fields x 100 B = 190 MiB, plus the
# tables' copies during compaction) is ~25x the 4 KiB-page TLB reach of a
# 2048-entry STLB (8 MiB) and well inside its 2 MiB-page reach (4 GiB).
ARGS=(--records 200000 --fieldlen 100 --threads 20 --workloads a,b,u --seconds 8
	--status 0 --cache-mb 128 --memtable-mb 32 --dist zipfian)
# --bench: the benchmark (~7 minutes): 760 MiB of data, a 512 MiB row
# cache, each workload three times per page size, interleaved.
if [ "${1:-}" = --bench ]; then
	ARGS=(--records 800000 --fieldlen 100 --threads 20 --workloads a,b,u --seconds 15
		--repeat 3 --status 5 --cache-mb 512 --memtable-mb 64 --dist zipfian)
fi
ARGS+=(--json "$BUILD/cassandra-like.json")
# --restart: 400k records (381 MiB of data), a 256 MiB row cache, 2 x 32 MiB
# memtables, workload B (95 % read); 5 s after each restart
if [ "${1:-}" = --restart ] || [ "${1:-}" = --restart-image ]; then
	ARGS=(--restart --records 400000 --fieldlen 100 --threads 20 --workloads b --seconds 5
		--repeat 3 --status 0 --cache-mb 256 --memtable-mb 32 --dist zipfian)
fi

# hpregion's root test suites change THP modes under an exclusive lock
# (tests/lib.sh): share it, so none does mid-run on a machine that runs
# both. Not root: no lock (a root run's leftover cannot get in the way)
# shellcheck source=../../tests/lib.sh
. "$ROOT/tests/lib.sh"
hpr_lock_system -s

WORK=$(mktemp -d /tmp/cassandra-like.XXXXXX)
if [ "${1:-}" = --restart-image ]; then
	ARGS+=(--cache-image "$WORK/rowcache.img")
fi
if [ "${1:-}" = --restart ] || [ "${1:-}" = --restart-image ]; then
	# kept regions are files on a tmpfs huge= mount, which needs root
	if [ "$(id -u)" != 0 ]; then
		rm -rf "$WORK"
		echo "cassandra-like --restart: needs root to mount a tmpfs huge=always for the kept regions"
		exit 77
	fi
	mkdir "$WORK/huge"
	mount -t tmpfs -o huge=always,size=2g none "$WORK/huge"
	trap 'umount "$WORK/huge" 2>/dev/null; rm -rf "$WORK"' EXIT
	if [ "${1:-}" = --restart-image ]; then
		echo "cassandra-like: restart after a clean shutdown, data and kept regions on tmpfs huge=always ($WORK/huge), row cache image on $(df --output=source "$WORK" | tail -1) ($WORK/rowcache.img)"
	else
		echo "cassandra-like: restart after kill -9, data and kept regions on tmpfs huge=always ($WORK/huge)"
	fi
	"$BIN" --data "$WORK/huge" "${ARGS[@]}" ${CASS_ARGS:-}
	exit
fi
if [ "$(id -u)" = 0 ]; then
	mkdir "$WORK/huge" "$WORK/base"
	mount -t tmpfs -o huge=always,size=6g none "$WORK/huge"
	mount -t tmpfs -o huge=never,size=6g none "$WORK/base"
	trap 'umount "$WORK/huge" "$WORK/base" 2>/dev/null; rm -rf "$WORK"' EXIT
	echo "cassandra-like: data on tmpfs huge=always ($WORK/huge) vs tmpfs huge=never ($WORK/base)"
	"$BIN" --data "$WORK/huge" --base-data "$WORK/base" "${ARGS[@]}" ${CASS_ARGS:-}
else
	# No mounts without root: the tables live in a plain directory (disk,
	# --allow-disk), the row cache on a memfd (hpregion collapses it into
	# huge pages) and the memtable on THP.
	mkdir "$WORK/huge" "$WORK/base"
	trap 'rm -rf "$WORK"' EXIT
	echo "cassandra-like: not root, so no tmpfs huge= mount: tables on $WORK (disk)," \
		"row cache on a memfd, memtable on THP; base run on plain 4 KiB-page memory"
	"$BIN" --data "$WORK/huge" --base-data "$WORK/base" --allow-disk \
		--cache-backend memfd --memtable-backend thp "${ARGS[@]}" ${CASS_ARGS:-}
fi
