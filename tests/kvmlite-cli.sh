#!/bin/bash
# kvm-lite refuses bad input with a clear message and exit 2 BEFORE it opens
# /dev/kvm, so this runs on machines without KVM too: RAM not a multiple of
# the page size, more RAM than the hugetlb pool or the tmpfs holds, bad
# options. A good configuration gets past the checks (0 with a usable KVM,
# 77 without). Run as root (private mount namespace for the tmpfs case).
#   tests/kvmlite-cli.sh path/to/kvm-lite
set -uo pipefail
K=$1
fail=0
expect() { # want_rc want_text args...
	local want=$1 text=$2 out rc
	shift 2
	out=$("$K" "$@" 2>&1)
	rc=$?
	if [ "$rc" != "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
		echo "FAIL: kvm-lite $*: rc $rc (want $want), output: $out" >&2
		echo "      wanted text: $text" >&2
		fail=1
	else
		echo "ok: kvm-lite $* -> $rc: $(head -1 <<<"$out")"
	fi
}
expect 2 "guest RAM 65 MiB is not a multiple of the 2 MiB page size (thp backing, 2 MiB guest pages): use a multiple of 2 MiB" -m 65M
expect 2 "not a multiple of the 2 MiB page size (4k backing, 4 KiB guest pages)" -b 4k -g 4k -m 65M
expect 2 "not a multiple of the 2 MiB page size" --matrix -m 100001K
expect 2 "out of range: use 8 MiB to 3 GiB" -m 4M
expect 2 "out of range" -m 4G
expect 2 "bad RAM size" -m 12Q
expect 2 "unknown backend 'ept'" -b ept
expect 2 "use 4k or 2m" -g 1g
expect 2 "bad number '0' for --repeat" --matrix --repeat 0
expect 2 "unexpected argument" extra
expect 2 "--json and --quick go with --matrix" --json /tmp/kl.json
expect 2 "--json and --quick go with --matrix" -b thp --quick
expect 2 "--restore-lazy goes with --snapshot PREFIX" --restore-lazy
expect 2 "--restore-lazy goes with --snapshot PREFIX" --restore-lazy --matrix --snapshot /tmp/kl
expect 2 "--restore-lazy goes with --snapshot PREFIX (not --keep" --restore-lazy \
	--keep /dev/shm/kl --snapshot /tmp/kl

# More RAM than the hugetlb pool holds. Other suites resize the pool under
# the system lock (tests/lib.sh); hold it so the pool can't change under us.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
hpr_lock_system
P=/sys/kernel/mm/hugepages/hugepages-2048kB
if [ -d $P ]; then
	free=$(cat $P/free_hugepages)
	need=$((free + 8))
	[ $need -lt 4 ] && need=4
	if [ $need -le 1536 ]; then
		expect 2 "hugetlb pool has $free free 2 MiB pages" -b hugetlb -m $((need * 2))M
		expect 2 "raise the 2 MiB pool (echo" -b hugetlb -m $((need * 2))M
	else
		echo "FAIL: hugetlb pool has $free free pages; cannot ask for more than 3 GiB" >&2
		fail=1
	fi
else
	echo "FAIL: no 2 MiB hugetlb size on this machine" >&2
	fail=1
fi
hpr_unlock_system

# More RAM than a huge tmpfs holds (its size= is what the kernel reports).
out=$(unshare -m sh -c 'mount --make-rprivate / && d=$(mktemp -d) &&
	mount -t tmpfs -o huge=always,size=16M kl "$d" && df -k --output=avail "$d" | tail -1 &&
	'"$K"' -b shmem-huge --shmem-dir "$d" -m 64M; echo "rc=$?"; umount "$d"; rmdir "$d"' 2>&1)
if grep -q "rc=2" <<<"$out" && grep -q "has 16 MiB free, region needs 64 MiB" <<<"$out"; then
	echo "ok: shmem-huge on a 16M tmpfs -> 2: $(grep tmpfs <<<"$out")"
else
	echo "FAIL: shmem-huge on a 16M tmpfs: $out" >&2
	fail=1
fi

# Good input passes the checks: runs (0) where /dev/kvm is usable (kvm-lite
# --probe opens it and creates a VM), 77 with a /dev/kvm message where it is
# not; never 2.
usable=0
"$K" --probe >/dev/null 2>&1 && usable=1
out=$("$K" -m 16M -b thp 2>&1)
rc=$?
case $rc,$usable in
0,1) echo "ok: good input ran the guest" ;;
77,0) grep -q "/dev/kvm" <<<"$out" && echo "ok: good input -> 77 (no usable KVM): $out" ||
	{ echo "FAIL: 77 without a /dev/kvm message: $out" >&2; fail=1; } ;;
*) echo "FAIL: good input -> $rc (/dev/kvm usable: $usable): $out" >&2; fail=1 ;;
esac
exit $fail
