#!/bin/bash
# Checks of examples/cassandra-like (ctest label "example"):
#   1. correctness: a small run of workloads A, B, C, F and U, huge and base pages,
#      with flushes, compactions and cache evictions, where every read must
#      return the last acknowledged write (--verify), also after a reopen;
#   2. crash: kill -9 mid-load and mid-run, restart, no acknowledged write
#      lost (--acklog, then --check); the same with the log on a disk
#      (--log-dir);
#   3. bad input: missing data dir, data dir not on tmpfs, full tmpfs size=
#      (clean error, no half-written table, nothing acknowledged lost);
#   4. the standalone build: `make` in a copy of the directory against an
#      installed hpregion, found with pkg-config only;
#   5. fast restart (#17 part 2): kill -9 with the row cache and memtables
#      in kept regions (--keep), restart attaching to them (--check), and
#      --restart's warm vs cold report: nothing acknowledged lost, the kept
#      regions used, the warm cache hitting from the first 100 ms;
#   6. YCSB's measurement (#22): rows of 10 x 100 B with one-field updates;
#      a 1-record load timed below the old 100 ms quantum; --warmup's
#      operations not measured; --target paces, and a SIGSTOP stall shows in
#      the latency from the intended start;
#   7. the row cache image (#18 part 3, --cache-image): saved at a clean
#      close, loaded lazily at the reopen of --verify's full scan (every
#      read right); --restart --cache-image's warm, cold and image restarts
#      after clean shutdowns: nothing acknowledged lost, the image used.
# Needs root for its tmpfs mounts (runs in a private mount namespace);
# exits 77 otherwise.
#   cassandra.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN=$BUILD/examples/cassandra-like/cassandra-like

# shellcheck source=lib.sh
. "$SRC/tests/lib.sh"

if [ "$(id -u)" != 0 ]; then
	hpr_skip "needs root to mount tmpfs huge=always/never and size= limits"
fi
if [ -z "${CASS_TEST_NS:-}" ]; then
	exec unshare -m --propagation private env CASS_TEST_NS=1 "$0" "$@"
fi
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
# hpregion's root suites change THP modes under an exclusive lock
# (tests/hpr_env.h): share it so none does while we run
hpr_lock_system -s

T=$(mktemp -d /tmp/cass-test.XXXXXX)
cleanup() {
	for m in "$T"/m*; do umount "$m" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
PASS=0 FAIL=0
ok() { echo "ok: $*"; PASS=$((PASS + 1)); }
bad() { echo "FAIL: $*"; FAIL=$((FAIL + 1)); }
mnt() { # dir options
	mkdir -p "$1"
	mount -t tmpfs -o "$2" none "$1"
}
# sum of a numeric JSON field over the runs (--json FILE: one line)
jsum() { grep -o "\"$2\":[0-9]*" "$1" | awk -F: '{s += $2} END {print s + 0}'; }

# a directory on a disk file system: /var/tmp, else the build dir
disk_dir() {
	local d
	d=$(mktemp -d /var/tmp/cass-disk.XXXXXX)
	if [ "$(stat -f -c %T "$d")" = tmpfs ]; then
		rm -rf "$d"
		d=$(mktemp -d "$BUILD/cass-disk.XXXXXX")
	fi
	echo "$d"
}

SMALL=(--records 4000 --threads 8 --ops 15000 --cache-mb 8 --memtable-mb 2 --status 1)

# ---- 1. correctness ----
mnt "$T/m1" huge=always,size=512m
mnt "$T/m2" huge=never,size=512m
if "$BIN" --data "$T/m1" --base-data "$T/m2" "${SMALL[@]}" --workloads a,b,c,f,u --verify \
	--json "$T/verify.json" >"$T/verify.log" 2>&1; then
	ok "verify run exits 0"
else
	bad "verify run failed (exit $?)"; tail -20 "$T/verify.log"
fi
if grep -q '"verify":{"enabled":true,"reads":[1-9][0-9]*,"errors":0}' "$T/verify.json"; then
	ok "every read returned the last acknowledged write ($(grep -o '"reads":[0-9]*' "$T/verify.json"))"
else
	bad "verify summary: $(grep -o '"verify":{[^}]*}' "$T/verify.json")"
fi
grep -q "every result, in JSON: $T/verify.json" "$T/verify.log" &&
	ok "the JSON goes to --json's file, and the terminal says where" ||
	bad "no 'every result, in JSON' line: $(tail -3 "$T/verify.log" | cut -c1-160)"
grep -q '^{' "$T/verify.log" && bad "JSON on the terminal: $(grep -m1 -o '^{.\{0,80\}' "$T/verify.log")" ||
	ok "no JSON on the terminal"
for f in flushes compactions cache_evictions; do
	n=$(jsum "$T/verify.json" $f)
	[ "$n" -gt 0 ] && ok "the run exercised $f ($n)" || bad "no $f happened: the test is too small"
done
grep -q 'huge-page coverage, huge run.*row cache 100%, memtables 100%' "$T/verify.log" &&
	ok "huge run is huge-mapped (smaps)" || bad "huge run coverage: $(grep 'coverage, huge' "$T/verify.log")"
grep -q 'huge-page coverage, base run.*row cache 0%, memtables 0%, table mappings 0%' "$T/verify.log" &&
	ok "base run is on 4 KiB pages (smaps)" || bad "base run coverage: $(grep 'coverage, base' "$T/verify.log")"

# ---- 2. crash: kill -9, restart, nothing acknowledged lost ----
# The kill must hit a live store that has acknowledged at least the
# threshold's writes: a store that died on its own (or was killed too soon)
# proves nothing about replay, so each of those is a failure.
crash() { # name delay_lines [options for the run and the check]
	local d=$T/m3/$1 a=$T/$1.acklog pid n=0 alive st name=$1 lines=$2
	shift 2
	mkdir -p "$d"
	"$BIN" --data "$d" --records 20000 --threads 8 --seconds 60 --workloads u \
		--cache-mb 8 --memtable-mb 2 --acklog "$a" "$@" >"$T/$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		n=0
		[ -f "$a" ] && n=$(wc -l <"$a")
		[ "$n" -ge "$lines" ] && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.05
	done
	alive=yes
	kill -9 $pid 2>/dev/null || alive=no
	st=0
	wait $pid 2>/dev/null || st=$?
	n=0
	[ -f "$a" ] && n=$(wc -l <"$a")
	if [ $alive != yes ] || [ $st != 137 ]; then
		bad "kill -9 ($name): the store was not alive at the kill (wait status $st, want 137)"
		tail -5 "$T/$name.log"
		return
	fi
	if [ "$n" -lt "$lines" ]; then
		bad "kill -9 ($name): only $n acknowledged writes at the kill, want >= $lines"
		return
	fi
	if "$BIN" --data "$d" --records 20000 --check "$a" "$@" >"$T/$name.check" 2>&1 &&
		grep -q " 0 lost" "$T/$name.check"; then
		ok "kill -9 after $n acknowledged writes ($name): $(grep -o 'acklog check.*' "$T/$name.check")"
	else
		bad "after kill -9 ($name):"; cat "$T/$name.check"
	fi
}
mnt "$T/m3" huge=always,size=512m
crash mid-load 5000
crash mid-run 30000

# the commit log on a disk (--log-dir): the same crash, the log's segments
# in LOGDIR/huge and none in the data dir; a reopen with no --log-dir is
# refused, never silently missing the log's writes
LOGD=$(disk_dir)
crash log-dir 5000 --log-dir "$LOGD"
ls "$LOGD"/huge/commitlog-*.log >/dev/null 2>&1 && ! ls "$T"/m3/log-dir/commitlog-* >/dev/null 2>&1 &&
	ok "--log-dir: the commit log is in $LOGD/huge ($(stat -f -c %T "$LOGD")), not in the data dir" ||
	bad "--log-dir: log segments: $(ls "$LOGD"/huge "$T"/m3/log-dir | tr '\n' ' ')"
out=$("$BIN" --data "$T/m3/log-dir" --records 20000 --check "$T/log-dir.acklog" 2>&1) && rc=0 ||
	rc=$?
[ $rc = 2 ] && grep -q "the commit log of .* is in $LOGD/huge" <<<"$out" &&
	ok "--log-dir: a reopen without it is refused: $(tail -1 <<<"$out" | cut -c1-160)" ||
	bad "--log-dir: a reopen without it: rc $rc: $out"
rm -rf "$LOGD"

# ---- 3. bad input ----
out=$("$BIN" --data "$T/does-not-exist" --records 100 --ops 10 2>&1) && rc=0 || rc=$?
[ $rc = 2 ] && grep -q "does-not-exist: No such file or directory: create it on a tmpfs" <<<"$out" &&
	ok "missing data dir: $(head -1 <<<"$out")" || bad "missing data dir: rc $rc: $out"

DISK=$(disk_dir)
out=$("$BIN" --data "$DISK" --records 100 --ops 10 2>&1) && rc=0 || rc=$?
if [ "$(stat -f -c %T "$DISK")" = tmpfs ]; then
	bad "found no directory on a disk file system for the not-on-tmpfs case"
else
	[ $rc = 2 ] && grep -q "not tmpfs" <<<"$out" && ok "data dir on disk: $(head -1 <<<"$out")" ||
		bad "data dir on disk: rc $rc: $out"
	out=$("$BIN" --data "$DISK" --allow-disk --records 200 --ops 100 --threads 2 2>&1) &&
		grep -q "warning: data directory is on" <<<"$out" &&
		ok "--allow-disk runs with a warning" || bad "--allow-disk: $out"
fi
rm -rf "$DISK"

# full tmpfs: regions on THP so only the log and the tables fill the mount
# (20 fields: 38 MiB of rows against 24 MiB)
mnt "$T/m4" huge=always,size=24m
out=$("$BIN" --data "$T/m4" --records 20000 --fieldcount 20 --threads 4 --ops 10 --memtable-mb 4 \
	--cache-backend thp --acklog "$T/full.acklog" 2>&1) && rc=0 || rc=$?
if [ $rc = 3 ] && grep -q "No space left on device (the tmpfs is full: raise its size=" <<<"$out"; then
	ok "full tmpfs: clean error: $(grep -m1 -o 'kv.*No space left.*' <<<"$out" | cut -c1-160)"
else
	bad "full tmpfs: rc $rc: $(tail -5 <<<"$out")"
fi
# the client's own error carries the hint, not only the background thread's
grep -q "UPDATE of key [0-9]* failed: .*No space left on device (the tmpfs is full: raise its size=" \
	<<<"$out" && ok "full tmpfs: the client's error names the fix" ||
	bad "full tmpfs: the client's error: $(grep -m1 'failed:' <<<"$out" | cut -c1-200)"

ls "$T/m4"/*.tmp >/dev/null 2>&1 && bad "a half-written table was left: $(ls "$T/m4")" ||
	ok "no half-written table left behind"
mount -o remount,size=256m "$T/m4"
if "$BIN" --data "$T/m4" --records 20000 --fieldcount 20 --cache-backend thp --memtable-mb 4 \
	--check "$T/full.acklog" >"$T/full.check" 2>&1 && grep -q " 0 lost" "$T/full.check"; then
	ok "after raising size=: $(grep -o 'acklog check.*' "$T/full.check")"
else
	bad "after the full tmpfs:"; cat "$T/full.check"
fi

out=$("$BIN" --data "$T/m1" --bogus 2>&1) && rc=0 || rc=$?
[ $rc = 2 ] && grep -q usage <<<"$out" && ok "bad option: usage" || bad "bad option: rc $rc"
# a bad number: a message that names the option and exit 2 (they used to
# exit 3 with no message, or be taken as 0)
for a in "--threads -1" "--threads 100000" "--records 0" "--repeat x" "--seconds -3"; do
	# shellcheck disable=SC2086 # $a is an option and its value
	out=$("$BIN" --data "$T/m1" $a 2>&1) && rc=0 || rc=$?
	[ $rc = 2 ] && grep -q "^cassandra-like: $a: want" <<<"$out" && ok "$a: $out" ||
		bad "$a: rc $rc: $out"
done
out=$("$BIN" --data "$T/m1" --readallfields=maybe 2>&1) && rc=0 || rc=$?
[ $rc = 2 ] && grep -q "^cassandra-like: --readallfields=maybe: want" <<<"$out" &&
	ok "--readallfields=maybe: $out" || bad "--readallfields=maybe: rc $rc: $out"
out=$("$BIN" --data "$T/m1" --dist bogus 2>&1) && rc=0 || rc=$?
[ $rc = 2 ] && grep -q "^cassandra-like: --dist bogus: want zipfian" <<<"$out" &&
	ok "--dist bogus: $out" || bad "--dist bogus: rc $rc: $out"
# `bench` with no --data gets as far as its own mounts (here: refused, not
# root), not the usage message
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -u HPR_TEST_NO_SKIP "$BIN" bench \
	--quick 2>&1) && rc=0 || rc=$?
[ $rc = 77 ] && grep -q "cassandra-like bench: skipped: needs root" <<<"$out" &&
	ok "bench without --data reaches its mounts" || bad "bench without --data: rc $rc: $out"
# more runs than the driver keeps: refused up front, never silently dropped
# (--repeat 12 used to run 63 of 74); exactly as many as it keeps: all run
out=$("$BIN" --data "$T/m1" --base-data "$T/m2" --workloads a,b,u --repeat 12 2>&1) && rc=0 ||
	rc=$?
[ $rc = 2 ] && grep -q "make 74 runs, at most 64" <<<"$out" && ok "--repeat 12: $out" ||
	bad "--repeat 12: rc $rc: $out"
mkdir -p "$T/m1/runs"
if "$BIN" --data "$T/m1/runs" --pages base --workloads a --repeat 63 --ops 10 --records 100 \
	--threads 1 --status 0 --cache-mb 4 --memtable-mb 1 --json "$T/runs.json" >"$T/runs.log" 2>&1 &&
	[ "$(grep -o '"pages":' "$T/runs.json" | wc -l)" = 64 ]; then
	ok "the load + --repeat 63: all 64 runs ran and are reported"
else
	bad "64 runs: $(grep -o '"pages":' "$T/runs.json" | wc -l) reported"; tail -3 "$T/runs.log"
fi

# ---- 4. standalone build with pkg-config only ----
# Staged install (DESTDIR) + PKG_CONFIG_SYSROOT_DIR: what a packager does;
# the copied directory is built with nothing but its Makefile.
if DESTDIR="$T/root" cmake --install "$BUILD" >"$T/install.log" 2>&1; then
	cp -r "$SRC/examples/cassandra-like" "$T/copy"
	rm -f "$T/copy/cassandra-like" "$T/copy"/*.o
	PC=$(dirname "$(find "$T/root" -name hpregion.pc | head -1)")
	LIB=$(dirname "$(find "$T/root" -name 'libhpregion.so*' | head -1)")
	if PKG_CONFIG_PATH=$PC PKG_CONFIG_SYSROOT_DIR=$T/root make -C "$T/copy" >"$T/make.log" 2>&1 &&
		LD_LIBRARY_PATH=$LIB "$T/copy/cassandra-like" --data "$T/m1" --records 500 --ops 500 \
			--threads 2 --cache-mb 4 --memtable-mb 1 --verify >"$T/standalone.log" 2>&1; then
		ok "standalone make (pkg-config hpregion) builds and runs"
	else
		bad "standalone build:"; tail -n 20 "$T/make.log" "$T/standalone.log"
	fi
else
	bad "cmake --install failed"; tail -n 20 "$T/install.log"
fi

# ---- 5. fast restart: kept regions after kill -9 ----
# the crash of section 2 with --keep: the check attaches to the kept row
# cache and memtables, reconciles them with the log, and loses nothing
# (with the run's sizes: kept regions of other sizes are not attached)
crash keep-mid-run 30000 --keep --cache-mb 8 --memtable-mb 2
grep -q "kept memtables: .* records kept" "$T/keep-mid-run.check" &&
	ok "--keep: the restart used the kept memtables: $(grep -o 'kept memtables: [0-9]* records kept[^;]*' "$T/keep-mid-run.check" | head -1)" ||
	bad "--keep: the kept memtables were not used: $(grep -m1 'kept' "$T/keep-mid-run.check" | cut -c1-200)"
grep -q "kept row cache: attached, warm" "$T/keep-mid-run.check" &&
	ok "--keep: the restart attached the kept row cache warm" ||
	bad "--keep: the kept row cache: $(grep -m1 'kept row cache' "$T/keep-mid-run.check" | cut -c1-200)"
# --restart: prime, warm and cold restarts, a final check of every key
# (100k records x 10 x 100 B, 97 MiB, against a 48 MiB cache: big enough that a cold
# cache is still far from warm after 100 ms)
# restart_run NAME DIR [options]: that run into $T/NAME.log; it exits 0
# and loses nothing acknowledged, with no wrong read
restart_run() {
	local name=$1 d=$2
	shift 2
	mnt "$d" huge=always,size=1g
	if "$BIN" --data "$d" --restart --records 100000 --threads 8 --seconds 2 --cache-mb 48 \
		--memtable-mb 4 --workloads b --repeat 1 "$@" >"$T/$name.log" 2>&1; then
		ok "--restart $* exits 0"
	else
		bad "--restart $* failed (exit $?)"; tail -20 "$T/$name.log"
	fi
	grep -q "^acknowledged writes lost: 0 (.* 0 wrong reads" "$T/$name.log" &&
		ok "--restart $*: $(grep -o '^acknowledged writes lost.*' "$T/$name.log")" ||
		bad "--restart $*: $(grep 'lost' "$T/$name.log" | tail -3)"
}
restart_run restart "$T/m5"
grep -q "^\[warm 1\] kv_open .* row cache warm .* memtables kept" "$T/restart.log" &&
	grep -q "^\[cold 1\] kv_open .* row cache new" "$T/restart.log" &&
	ok "--restart: warm attached both kept regions, cold started fresh" ||
	bad "--restart: $(grep '^\[\(warm\|cold\) 1\] kv_open' "$T/restart.log" | cut -c1-200)"
# the hit rate of the first 100 ms (the summary's third column): warm > cold
hw=$(awk '$1 == "warm" && $2 == "1" {print int($4)}' "$T/restart.log")
hc=$(awk '$1 == "cold" && $2 == "1" {print int($4)}' "$T/restart.log")
[ -n "$hw" ] && [ -n "$hc" ] && [ "$hw" -gt "$hc" ] &&
	ok "--restart: cache hit rate in the first 100 ms, warm $hw % > cold $hc %" ||
	bad "--restart: first 100 ms hit rates warm '$hw' cold '$hc'"

# ---- 6. YCSB's measurement (#22 items 2, 3) ----
# Counts and relations only, with wide margins: no assertion on how fast
# this machine is.
# YCSB's row: 10 fields x 100 B, updates of one field, reads of all
# (tests/cass_fields.c checks that the other nine stay as they were,
# tests/cass_readfields.c what --readallfields=false reads)
grep -q '"fields":10,"fieldlen":100,"writeallfields":false,"readallfields":true' "$T/verify.json" &&
	ok "rows of 10 x 100 B, one-field updates, reads of every field (YCSB's defaults)" ||
	bad "row format: $(grep -o '"fields":[^,]*,"fieldlen":[^,]*,"writeallfields":[^,]*,"readallfields":[^,]*' "$T/verify.json")"
# a run of workload W's JSON object, up to its update histogram
# (|| true: a missing field is an empty string for the check to report,
# not the end of the script under set -e)
jrun() { grep -o "\"workload\":\"$2\",\"ops\":[^{]*\"read\":{[^}]*},\"update\":{[^}]*}" "$1" | head -1 || true; }
jnum() { grep -o "\"$2\":[0-9.]*" <<<"$1" | head -1 | cut -d: -f2 || true; }
jsub() { grep -o "\"$2\":{[^}]*}" <<<"$1" | head -1 || true; }
# a load of one record: its time from the clients' clocks, not rounded up
# to the driver's 100 ms polling (it reported "10 ops/s"). Three tries, as
# a scheduler may hold one back 100 ms; it used to be >= 100 ms every time.
mnt "$T/m6" huge=always,size=256m
tiny=""
for i in 1 2 3; do
	rm -rf "${T:?}/m6/"*
	"$BIN" --data "$T/m6" --records 1 --threads 1 --ops 1 --workloads c --status 0 \
		--cache-mb 8 --memtable-mb 2 --json "$T/tiny.json" >"$T/tiny.log" 2>&1 || continue
	r=$(jrun "$T/tiny.json" L)
	secs=$(jnum "$r" secs)
	max=$(jnum "$(jsub "$r" update)" max_us)
	tiny="$tiny $secs s (insert $max us);"
	awk -v s="$secs" -v m="$max" 'BEGIN {exit !(s > 0 && s < 0.095 && s * 1e6 >= m)}' &&
		{ tiny=ok; break; }
done
[ "$tiny" = ok ] && ok "a 1-record load: $secs s, >= its insert's $max us, < 0.1 s" ||
	bad "a 1-record load's time:$tiny"
# --warmup: its operations run but are not measured; --ops counts the
# measured ones
rm -rf "${T:?}/m6/"*
if "$BIN" --data "$T/m6" --records 1000 --threads 2 --workloads c --warmup 1 --ops 2000 \
	--target 1000 --status 0 --cache-mb 8 --memtable-mb 2 --json "$T/warm.json" \
	>"$T/warm.log" 2>&1; then
	r=$(jrun "$T/warm.json" C)
	n=$(jnum "$r" ops) w=$(jnum "$r" warmup_ops)
	c=$(jnum "$(jsub "$r" read)" count)
	[ "$n" = 2000 ] && [ "$c" = 2000 ] && [ "${w:-0}" -ge 100 ] &&
		ok "--warmup 1: $w operations not measured, the $c measured are --ops 2000" ||
		bad "--warmup: ops $n, read count $c, warm-up ops $w"
else
	bad "--warmup run failed"; tail -5 "$T/warm.log"
fi
# --target: paced at the rate; a 1 s stall (SIGSTOP) mid-run shows in the
# latency from the intended start, not in the service time of most operations
rm -rf "${T:?}/m6/"*
"$BIN" --data "$T/m6" --records 1000 --threads 4 --workloads c --target 1000 --seconds 5 \
	--status 1 --cache-mb 8 --memtable-mb 2 --json "$T/target.json" >"$T/target.log" 2>&1 &
pid=$!
for _ in $(seq 600); do # until the run has gone 1 s past the load's row
	awk '/^huge  load/ {l = 1} l && /^\[huge\] [0-9]+ sec:/ {f = 1} END {exit !f}' \
		"$T/target.log" && break
	sleep 0.1
done
kill -STOP $pid || true
sleep 1
kill -CONT $pid || true
if wait $pid; then
	r=$(jrun "$T/target.json" C)
	i=$(grep -o '"intended_read":{[^}]*}' "$T/target.json" | sed -n 2p || true)
	n=$(jnum "$r" ops) ops=$(jnum "$r" ops_per_sec)
	sp=$(jnum "$(jsub "$r" read)" p99_us)
	ip=$(jnum "$i" p99_us) ic=$(jnum "$i" count)
	awk -v o="$ops" 'BEGIN {exit !(o > 300 && o <= 1100)}' &&
		ok "--target 1000: $ops ops/s ($n operations)" || bad "--target 1000: $ops ops/s"
	[ "$ic" = "$n" ] && awk -v s="$sp" -v i="$ip" 'BEGIN {exit !(i >= s && i >= 200000)}' &&
		ok "1 s stall: read p99 from the intended start $ip us >= service time's $sp us" ||
		bad "1 s stall: intended p99 $ip us (count $ic), service p99 $sp us (ops $n)"
else
	bad "--target run failed"; tail -5 "$T/target.log"
fi
grep -q "intended" "$T/target.log" && ok "--target: the table shows the intended-start latency" ||
	bad "--target: no intended-start row in the table"

# ---- 7. the row cache image (#18 part 3) ----
# --verify closes and reopens: the close saves the image, the reopen loads
# it lazily and the full scan reads every key while it arrives
mnt "$T/m7" huge=always,size=512m
if "$BIN" --data "$T/m7" "${SMALL[@]}" --workloads b,a --verify --cache-image rowcache.img \
	--json "$T/image.json" >"$T/image.log" 2>&1; then
	ok "--cache-image: verify run exits 0"
else
	bad "--cache-image: verify run failed (exit $?)"; tail -20 "$T/image.log"
fi
grep -q "row cache image: loading lazily, serving already ([1-9][0-9]* rows" "$T/image.log" &&
	ok "--cache-image: the reopen loads the image: $(grep -o 'row cache image: loading.*' "$T/image.log" | cut -c1-160)" ||
	bad "--cache-image: the reopen did not load the image: $(grep 'row cache image' "$T/image.log" | tail -1 | cut -c1-200)"
grep -q '"verify":{"enabled":true,"reads":[1-9][0-9]*,"errors":0}' "$T/image.json" &&
	ok "--cache-image: every read right, the full scan from the image too ($(grep -o '"reads":[0-9]*' "$T/image.json"))" ||
	bad "--cache-image: verify summary: $(grep -o '"verify":{[^}]*}' "$T/image.json")"
# --restart --cache-image: clean shutdowns; warm, cold and image restarts
restart_run restart-image "$T/m8" --cache-image "$T/rowcache.img"
grep -q "^\[image 1\] kv_open .* row cache new from the image ([1-9][0-9]* rows" "$T/restart-image.log" &&
	grep -q "^\[warm 1\] kv_open .* row cache warm" "$T/restart-image.log" &&
	grep -q "^\[cold 1\] kv_open .* row cache new;" "$T/restart-image.log" &&
	ok "--restart --cache-image: warm attached, cold started empty, image loaded the image" ||
	bad "--restart --cache-image: $(grep '^\[\(warm\|cold\|image\) 1\] kv_open' "$T/restart-image.log" | cut -c1-200)"

echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ]
