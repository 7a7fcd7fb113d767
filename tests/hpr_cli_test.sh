#!/bin/bash
# SPDX-License-Identifier: MIT
# Test of the hpr command: every subcommand as root and as an unprivileged
# user, answers checked against the sysfs/procfs files they come from (by
# tests/hpr_cli_check.py, which parses them on its own). Runs in a private
# mount namespace under the system-state lock and restores the hugetlb pool.
#   hpr_cli_test.sh HPR HPR_HOLD
set -uo pipefail
HPR=$1
HOLD=$2
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="python3 $HERE/hpr_cli_check.py"

# shellcheck source=lib.sh
. "$HERE/lib.sh"
skip() { hpr_skip "$@"; }
[ "$(id -u)" = 0 ] || skip "needs root (mounts, hugetlb pool, unprivileged runs)"
command -v python3 >/dev/null || skip "needs python3"
[ -d /sys/kernel/mm/hugepages/hugepages-2048kB ] || skip "no 2 MiB hugetlb pool"

if [ -z "${HPR_CLI_IN_NS:-}" ]; then
	# serialize with the suites that change system state, then a private
	# mount namespace so our mounts vanish with us
	hpr_lock_system
	HPR_CLI_IN_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi

TMP=$(mktemp -d /tmp/hpr-cli.XXXXXX)
chmod 755 "$TMP"
POOL=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
OLD_POOL=$(cat $POOL)
HOLD_PID=
HOSTILE_PID=
MEMCG=
cleanup() {
	[ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2>/dev/null && wait "$HOLD_PID" 2>/dev/null
	[ -n "$HOSTILE_PID" ] && kill "$HOSTILE_PID" 2>/dev/null && wait "$HOSTILE_PID" 2>/dev/null
	[ -n "$MEMCG" ] && rmdir "$MEMCG" 2>/dev/null
	for m in $(grep -o " $TMP/[^ ]*" /proc/self/mountinfo | sort -r); do
		umount "$m" 2>/dev/null
	done
	echo "$OLD_POOL" > $POOL
	rm -rf "$TMP"
}
trap cleanup EXIT

FAILS=0
fail() {
	echo "FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}
# expect CODE CMD...: run, compare the exit code; output in $TMP/out, $TMP/err
expect() {
	local want=$1 got
	shift
	"$@" >"$TMP/out" 2>"$TMP/err"
	got=$?
	if [ "$got" != "$want" ]; then
		fail "'$*' exited $got, expected $want"
		sed 's/^/    /' "$TMP/err" >&2
	fi
}
has() { # has FILE PATTERN WHAT
	grep -q -- "$2" "$1" || { fail "$3: no '$2' in output"; sed 's/^/    /' "$1" >&2; }
}

# unprivileged copies: nobody may not reach the build tree
cp "$HPR" "$TMP/hpr"
chmod 755 "$TMP/hpr"
AS_NOBODY="setpriv --reuid=nobody --regid=nogroup --clear-groups"

echo "== bad arguments: usage and exit 2"
for args in "" "bogus" "probe --bogus" "probe --size 0" "probe --size 12Q" "probe extra" \
	"pool --set abc" "pool 3X" "pool --set 1 --min 2" "pool --node x" \
	"mount" "mount $TMP/x --huge sometimes" "mount $TMP/x --hugetlbfs --huge always" \
	"mount $TMP/x --pagesize 2M" "mount $TMP/x --mode 9" "stat" "stat abc" "stat 1 2"; do
	# shellcheck disable=SC2086
	expect 2 "$HPR" $args
	grep -q "usage:" "$TMP/err" || fail "'hpr $args': no usage message on stderr"
done
expect 1 "$HPR" stat 2147483647
has "$TMP/err" "no process" "stat of a missing pid"
expect 0 "$HPR" --help

echo "== probe (root)"
expect 0 "$HPR" probe
for s in "Transparent huge pages" "Hugetlb pools" "Cgroup limits" "mounts" "Kernel features"; do
	has "$TMP/out" "$s" "probe"
done
has "$TMP/out" "enabled $(grep -o '\[[^]]*\]' /sys/kernel/mm/transparent_hugepage/enabled | tr -d '[]')," \
	"probe THP enabled"
expect 0 "$HPR" probe --json
python3 -m json.tool "$TMP/out" >/dev/null || fail "probe --json is not valid JSON"
$CHECK probe "$TMP/out" || fail "probe --json disagrees with sysfs/procfs"

echo "== probe in a memory cgroup with a limit"
MEMCG=
memline=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup | head -1)
memmnt=$(awk '$9 == "cgroup" && $NF ~ /(^|,)memory(,|$)/ {print $5; exit}' /proc/self/mountinfo)
if [ -n "$memline" ] && [ -n "$memmnt" ]; then
	MEMCG=$memmnt${memline##*:}/hpr-cli-$$
	MEMCG=${MEMCG/\/\//\/}
	mkdir "$MEMCG" && echo $((512 << 20)) > "$MEMCG/memory.limit_in_bytes" || MEMCG=
fi
if [ -n "$MEMCG" ]; then
	bash -c "echo \$\$ > $MEMCG/cgroup.procs && exec $HPR probe --json" >"$TMP/cg.json" ||
		fail "probe in a memory cgroup"
	python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["cgroup"]["memory"]; assert m["limit"] == 512 << 20 and m["effective_limit"] == 512 << 20 and m["dir"] == sys.argv[2], m' \
		"$TMP/cg.json" "$MEMCG" || fail "memory cgroup limit not reported"
	bash -c "echo \$\$ > $MEMCG/cgroup.procs && exec $HPR probe" | grep -q "memory     512 MiB" ||
		fail "memory cgroup limit not in the text output"
	rmdir "$MEMCG" || fail "cannot remove $MEMCG"
	MEMCG=
else
	echo "   (no cgroup v1 memory controller: limit not exercised)"
fi

echo "== probe --size: verdicts, and the fixes it prints work"
echo 0 > $POOL
"$HPR" mount "$TMP/htlb" --hugetlbfs --pagesize 2M >/dev/null || fail "mount hugetlbfs"
expect 0 "$HPR" probe --json --size 16M   # no huge tmpfs, no pool: thp works
python3 -m json.tool "$TMP/out" >/dev/null || fail "probe --size --json is not valid JSON"
cp "$TMP/out" "$TMP/size1.json"
$CHECK size "$TMP/size1.json" "hugetlb 2 MiB memfd" fail || fail "hugetlb verdict with an empty pool"
$CHECK size "$TMP/size1.json" "thp" ok || fail "thp verdict"
$CHECK size "$TMP/size1.json" "hugetlb on $TMP/htlb" fail || fail "hugetlbfs verdict with an empty pool"
FIX=$($CHECK fix "$TMP/size1.json" "hugetlb 2 MiB memfd") || fail "no hugetlb fix"
echo "   fix: $FIX"
case "$FIX" in "echo "*" > /sys/kernel/mm/hugepages/"*) bash -c "$FIX" ;; *) fail "odd fix '$FIX'" ;; esac
[ "$(cat $POOL)" -ge 8 ] || fail "after the fix the pool has $(cat $POOL) pages, need 8"
FIX=$($CHECK fix "$TMP/size1.json" "shmem on DIR") || fail "no huge tmpfs fix"
echo "   fix: $FIX"
FIX=${FIX/DIR/$TMP/fixed}
case "$FIX" in "hpr mount $TMP/fixed "*) bash -c "${FIX/hpr/$HPR}" >/dev/null ;; *) fail "odd fix '$FIX'" ;; esac
"$HPR" mount "$TMP/huge" --size 64M >/dev/null || fail "mount huge tmpfs"
expect 0 "$HPR" probe --json --size 16M
cp "$TMP/out" "$TMP/size2.json"
$CHECK size "$TMP/size2.json" "hugetlb 2 MiB memfd" ok || fail "hugetlb after the fix"
$CHECK size "$TMP/size2.json" "hugetlb on $TMP/htlb" ok || fail "hugetlbfs after the fix"
$CHECK size "$TMP/size2.json" "shmem on $TMP/huge" ok || fail "shmem on a huge tmpfs"
$CHECK size "$TMP/size2.json" "shmem on $TMP/fixed" ok || fail "shmem on the tmpfs the fix mounted"
expect 0 "$HPR" probe --size 128M
has "$TMP/out" "shmem on $TMP/huge" "probe --size text"
has "$TMP/out" "size is too small\|NO:" "probe --size 128M on a 64M mount"

echo "== pool"
expect 0 "$HPR" pool
has "$TMP/out" "2 MiB" "pool table"
expect 0 "$HPR" pool --json
$CHECK pool "$TMP/out" || fail "pool --json disagrees with sysfs"
expect 0 "$HPR" pool 2M --set 6
[ "$(cat $POOL)" = 6 ] || fail "pool --set 6 left $(cat $POOL)"
expect 0 "$HPR" pool 2M --min 3
[ "$(cat $POOL)" = 6 ] || fail "pool --min 3 shrank the pool to $(cat $POOL)"
has "$TMP/out" "unchanged" "pool --min below"
expect 0 "$HPR" pool --min 10 --json
[ "$(cat $POOL)" = 10 ] || fail "pool --min 10 left $(cat $POOL)"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); m=j["min"]; assert m["before"]==6 and m["after"]==10 and m["ok"], m' \
	"$TMP/out" || fail "pool --min --json report"
NODE0=/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages
if [ -f $NODE0 ]; then
	expect 0 "$HPR" pool 2M --node 0 --set 4
	[ "$(cat $NODE0)" = 4 ] || fail "pool --node 0 --set 4 left $(cat $NODE0)"
	expect 0 "$HPR" pool --node 0 --json
	$CHECK pool "$TMP/out" || fail "pool --node 0 --json"
fi
expect 1 "$HPR" pool 2M --node 63 --set 1
has "$TMP/err" "no NUMA node" "pool on a missing node"
expect 1 "$HPR" pool 1T --set 1
has "$TMP/err" "no hugetlb pool of" "pool of an unknown size"

echo "== mount"
expect 0 "$HPR" mount "$TMP/m1/deep" --size 32M
line=$(grep " $TMP/m1/deep " /proc/self/mountinfo)
case "$line" in *" - tmpfs "*huge=always*) ;; *) fail "tmpfs mount: $line" ;; esac
case "$line" in *nosuid*nodev*) ;; *) fail "tmpfs mount not nosuid,nodev: $line" ;; esac
[ "$(stat -c %a "$TMP/m1/deep")" = 700 ] || fail "mode $(stat -c %a "$TMP/m1/deep") != 700"
[ "$(stat -f -c %b "$TMP/m1/deep")" -gt 0 ] || fail "size= not applied"
expect 0 "$HPR" mount "$TMP/m2" --huge within_size --mode 1777
grep " $TMP/m2 " /proc/self/mountinfo | grep -q "huge=within_size" || fail "--huge within_size"
[ "$(stat -c %a "$TMP/m2")" = 1777 ] || fail "--mode 1777"
expect 0 "$HPR" mount "$TMP/m3" --hugetlbfs --pagesize 2M --size 8M --owner nobody
line=$(grep " $TMP/m3 " /proc/self/mountinfo)
case "$line" in *" - hugetlbfs "*pagesize=2M*) ;; *) fail "hugetlbfs mount: $line" ;; esac
[ "$(stat -c %U "$TMP/m3")" = nobody ] || fail "--owner nobody: $(stat -c %U "$TMP/m3")"
expect 1 "$HPR" mount "$TMP/m4" --owner no-such-user-hpr

echo "== mount refuses paths others control"
# a symlink planted where the mount should go (DIR -> /etc in the attack;
# here a scratch target), a directory another user owns, a parent others
# may write: refused, nothing mounted or created; an owned plain directory
# works (above), and --unsafe-path mounts on purpose
mkdir "$TMP/target"
ln -s "$TMP/target" "$TMP/planted"
expect 1 "$HPR" mount "$TMP/planted"
has "$TMP/err" "is a symlink" "mount on a symlink"
ln -s "$TMP/target" "$TMP/planted2"
expect 1 "$HPR" mount "$TMP/planted2/sub"
has "$TMP/err" "is a symlink" "mount under a symlinked parent"
[ -e "$TMP/target/sub" ] && fail "a refused mount created $TMP/target/sub"
mkdir "$TMP/theirs"
chown nobody "$TMP/theirs"
expect 1 "$HPR" mount "$TMP/theirs"
has "$TMP/err" "owned by nobody" "mount on another user's directory"
expect 1 "$HPR" mount "$TMP/theirs/sub"
has "$TMP/err" "owned by nobody" "mount under another user's directory"
[ -e "$TMP/theirs/sub" ] && fail "a refused mount created $TMP/theirs/sub"
mkdir -m 0777 "$TMP/open"
expect 1 "$HPR" mount "$TMP/open/sub"
has "$TMP/err" "writable by everyone" "mount under a world-writable parent"
[ -e "$TMP/open/sub" ] && fail "a refused mount created $TMP/open/sub"
for d in target theirs open/sub; do
	grep -q " $TMP/$d " /proc/self/mountinfo && fail "a refused mount mounted $TMP/$d"
done
expect 0 "$HPR" mount "$TMP/planted" --unsafe-path --size 8M
grep -q " $TMP/target .* - tmpfs " /proc/self/mountinfo || fail "--unsafe-path: no mount on the target"
expect 0 "$HPR" mount "$TMP/theirs" --unsafe-path --size 8M
grep -q " $TMP/theirs .* - tmpfs " /proc/self/mountinfo || fail "--unsafe-path: no mount on nobody's dir"

echo "== stat escapes what other processes name"
$CHECK hostile > "$TMP/hostile.out" &
HOSTILE_PID=$!
for _ in $(seq 100); do grep -q ready "$TMP/hostile.out" && break; sleep 0.1; done
expect 0 "$HPR" stat $HOSTILE_PID
$CHECK clean "$TMP/out" || fail "hpr stat wrote control bytes to the terminal"
grep -q 'x1b\]0;pwned' "$TMP/out" || fail "hostile memfd not listed (escaped)"
expect 0 "$HPR" stat $HOSTILE_PID --json
$CHECK clean "$TMP/out" || fail "hpr stat --json wrote control bytes"
$CHECK hostile-json "$TMP/out" || fail "hpr stat --json lost the names"
kill $HOSTILE_PID
wait $HOSTILE_PID 2>/dev/null
HOSTILE_PID=

echo "== stat"
echo 32 > $POOL
"$HOLD" 8 thp:h-thp shmem:h-shm hugetlb:h-htlb "shmem:h-tf:$TMP/huge" "hugetlb:h-hf:$TMP/htlb" \
	> "$TMP/hold.out" 2>"$TMP/hold.err" &
HOLD_PID=$!
for _ in $(seq 100); do grep -q ready "$TMP/hold.out" && break; sleep 0.1; done
if ! grep -q ready "$TMP/hold.out"; then
	fail "hpr_hold did not start: $(cat "$TMP/hold.err")"
else
	expect 0 "$HPR" stat $HOLD_PID
	cat "$TMP/out"
	for n in h-shm h-htlb h-tf h-hf; do has "$TMP/out" "^$n " "stat lists $n"; done
	expect 0 "$HPR" stat $HOLD_PID --json
	python3 -m json.tool "$TMP/out" >/dev/null || fail "stat --json is not valid JSON"
	$CHECK stat "$TMP/out" "$TMP/hold.out" || fail "stat disagrees with the process's hpr_stats"
fi

echo "== unprivileged (nobody)"
expect 0 $AS_NOBODY "$TMP/hpr" probe
has "$TMP/out" "Hugetlb pools" "probe as nobody"
cat "$TMP/out" > "$TMP/probe-nobody.txt"
expect 0 $AS_NOBODY "$TMP/hpr" probe --json
$CHECK probe "$TMP/out" || fail "probe --json as nobody disagrees with sysfs/procfs"
expect 0 $AS_NOBODY "$TMP/hpr" probe --json --size 4M
$CHECK size "$TMP/out" "hugetlb 2 MiB memfd" ok || fail "hugetlb memfd as nobody"
$CHECK size "$TMP/out" "thp" ok || fail "thp as nobody"
$CHECK size "$TMP/out" "shmem on $TMP/huge" fail || fail "root-owned 0700 tmpfs as nobody"
before=$(cat $POOL)
expect 1 $AS_NOBODY "$TMP/hpr" pool 2M --set 1
has "$TMP/err" "needs root" "pool --set as nobody"
[ "$(cat $POOL)" = "$before" ] || fail "pool changed by nobody"
expect 0 $AS_NOBODY "$TMP/hpr" pool
expect 1 $AS_NOBODY "$TMP/hpr" mount "$TMP/m5"
has "$TMP/err" "needs root" "mount as nobody"
mkdir -m 1777 "$TMP/ww"
expect 1 $AS_NOBODY "$TMP/hpr" mount "$TMP/ww/a/b"
has "$TMP/err" "needs root" "mount as nobody in a writable dir"
[ -e "$TMP/ww/a" ] && fail "a failed mount left the directories it made"
if [ -n "$HOLD_PID" ]; then
	expect 1 $AS_NOBODY "$TMP/hpr" stat $HOLD_PID
	has "$TMP/err" "owner or as root" "stat of a root process as nobody"
fi

if [ $FAILS -ne 0 ]; then
	echo "hpr_cli: $FAILS checks failed" >&2
	exit 1
fi
echo "hpr_cli: all checks passed"
