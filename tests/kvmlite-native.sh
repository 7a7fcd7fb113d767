#!/bin/bash
# kvm-lite on this machine's own /dev/kvm, when it is usable (kvm-lite
# --probe opens it and creates a VM: kvm_intel, kvm_amd or kvm_pvm): a
# plain run, free page reporting, snapshot/restore on a huge tmpfs and
# hugetlb, the same restored on demand (--restore-lazy, kvmlite-lazy.sh),
# and the quick host x guest matrix. Where /dev/kvm is not usable
# it says so and passes: kvm-lite then runs on real KVM only in the nested
# guest (kvmlite_vm, label vm), which runs on every machine. Run as root
# (hugetlb pool, private mount namespace for the tmpfs).
#   tests/kvmlite-native.sh path/to/kvm-lite
set -uo pipefail
K=$1
if ! probe=$("$K" --probe 2>&1); then
	echo "kvmlite-native: not run natively, no usable /dev/kvm here: $probe"
	echo "kvmlite-native: kvm-lite runs on real KVM in the nested guest only (kvmlite_vm)"
	exit 0
fi
echo "kvmlite-native: $probe"

# The hugetlb runs need a pool; other suites resize it under this lock.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
hpr_lock_system
P=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
old=$(cat $P)
snap=$(mktemp -d /tmp/kvmlite-native.XXXXXX)
trap 'echo "$old" > $P; rm -rf "$snap"' EXIT
echo $((old + 64)) > $P

fail=0
run() { # what args...
	local what=$1 out rc
	shift
	out=$("$K" "$@" 2>&1)
	rc=$?
	if [ $rc != 0 ] || grep -q "unavailable" <<<"$out"; then
		echo "FAIL: $what: kvm-lite $* -> $rc" >&2
		echo "$out" >&2
		fail=1
	else
		echo "ok: $what: kvm-lite $*"
		grep -E "checksum|snapshot|free page reporting" <<<"$out" | sed 's/^/    /'
	fi
}
run "plain" -m 64M -b thp
run "hugetlb, 4 KiB guest pages" -m 64M -b hugetlb -g 4k
run "free page reporting" -m 64M -b thp --fpr
run "snapshot/restore on a huge tmpfs" -m 64M -b shmem-huge --fpr --snapshot "$snap/s"
run "snapshot/restore on hugetlb" -m 64M -b hugetlb --snapshot "$snap/h"
# --restore-lazy on each backing (hugetlb from the pool raised above) and
# the eager fallback without userfaultfd
if sh "$(dirname "$0")/kvmlite-lazy.sh" "$K"; then
	echo "ok: --restore-lazy (tests/kvmlite-lazy.sh)"
else
	echo "FAIL: --restore-lazy (tests/kvmlite-lazy.sh)" >&2
	fail=1
fi
run "matrix" -m 32M --matrix --quick --fpr
# the guest's exception path (IDT, TSS.rsp0) still reports to the VMM
out=$("$K" -m 16M --test-guest-fault 2>&1)
if [ $? = 1 ] && grep -q "guest exception 6 (#UD) at CPL 3" <<<"$out"; then
	echo "ok: a #UD at CPL 3 reaches the VMM through the guest's IDT"
else
	echo "FAIL: --test-guest-fault: $out" >&2
	fail=1
fi
exit $fail
