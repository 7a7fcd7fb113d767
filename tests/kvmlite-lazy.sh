#!/bin/sh
# kvm-lite --restore-lazy (issue 18, part 2) on a usable /dev/kvm:
# natively (tests/kvmlite-native.sh runs it with the hugetlb pool raised)
# and in the nested guest on kvm_amd (tests/kvmlite-vm.sh,
# KVMLITE_VM_ONLY=lazy for just these). Each run snapshots its guest at
# the checkpoint and restores it with hpr_load(HPR_SNAP_LAZY): the vCPU
# runs while the RAM is still being loaded, and KVM's own accesses to
# pages not loaded yet must be served through userfaultfd.
#  - on a huge tmpfs, a shmem memfd (4 KiB guest pages, free page
#    reporting first), THP and hugetlb: the guest's checksum after the
#    restore equals the one before, the load ran on demand (hpr_stats
#    lazy_load uffd), the guest demanded pages (> 0: after the resume it
#    reads its data top down, against the fill's file order) and the load
#    completed; the RAM ends huge-mapped (hpr_stats, from smaps);
#  - the eager fallback: with /dev/userfaultfd bound over by /dev/null in
#    a private mount namespace and CAP_SYS_PTRACE dropped (util-linux
#    setpriv; vm.unprivileged_userfaultfd must be 0), hpregion cannot
#    have a userfaultfd: the restore is eager, says why (-EPERM), and the
#    guest's checksum is still the one before.
#
#   tests/kvmlite-lazy.sh KVM_LITE
# SETPRIV: a util-linux setpriv (busybox's has no --bounding-set).
# Exit 77 when kvm-lite --probe finds no usable /dev/kvm; a case this
# machine cannot run (hugetlb pool too small, no setpriv, the sysctl at 1)
# is said, and fails the script under HPR_TEST_NO_SKIP. POSIX sh: the
# nested guest runs it with busybox.
# $R is a list of options, split on purpose
# shellcheck disable=SC2086
set -u
K=$1
SETPRIV=${SETPRIV:-setpriv}
# shellcheck source=kvmlite-lib.sh
. "$(dirname "$0")/kvmlite-lib.sh"
kl_begin kvmlite-lazy "$K"
MB=64
R="-m ${MB}M --rand-iters 65536 --stride-reps 1"
notrun=0
not_run() {
	echo "kvmlite-lazy: NOT RUN: $*" >&2
	notrun=$((notrun + 1))
}
# has TEXT: a line of the last run's output
has() {
	grep -q -- "$1" "$T/out"
}
show() {
	grep -E "^(restore|lazy load|snapshot:|host coverage)" "$T/out" | sed 's/^/    /'
}

# lazy WHAT HUGE args...: a restore on demand that must work; HUGE 1: the
# RAM must end all huge-mapped
lazy() {
	what=$1 huge=$2
	shift 2
	"$K" $R "$@" --snapshot "$T/s" --restore-lazy >"$T/out" 2>&1
	rc=$?
	n=$(sed -n 's/.* MiB (\([0-9]*\) pages) in all.*/\1/p' "$T/out")
	if [ $rc != 0 ]; then
		bad "$what: kvm-lite $* --restore-lazy -> rc $rc"
	elif ! has "identical to before the snapshot"; then
		bad "$what: the guest's checksum after the lazy restore differs"
	elif ! has "^restore (lazy, userfaultfd): first guest exit"; then
		bad "$what: the restore did not run on demand"
	elif ! has "lazy load (hpr_stats lazy_load uffd): .*: completed$"; then
		bad "$what: the lazy load did not complete"
	elif [ -z "$n" ] || [ "$n" -le 0 ]; then
		bad "$what: the guest demanded no page (${n:-?})"
	elif [ "$huge" = 1 ] && ! has "host coverage: $MB of $MB MiB huge-mapped (100%)"; then
		bad "$what: the RAM is not all huge-mapped after the lazy load"
	else
		echo "kvmlite-lazy: ok: $what: $n pages demanded, checksum identical"
		show
		return
	fi
	sed 's/^/    /' "$T/out" >&2
}

lazy "huge tmpfs" 1 -b shmem-huge -g 2m
lazy "shmem memfd, 4 KiB guest pages, after free page reporting" 1 -b shmem -g 4k --fpr
lazy "THP" 1 -b thp -g 2m
free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
if [ "${free:-0}" -ge $((MB / 2 + 8)) ]; then
	lazy "hugetlb" 1 -b hugetlb -g 2m
else
	not_run "hugetlb: the pool has ${free:-0} free 2 MiB pages, the guest needs $((MB / 2)) (tests/kvmlite-native.sh raises it)"
fi

# The eager fallback, for real: no userfaultfd for this process. Root
# opens /dev/userfaultfd (its owner) and may call userfaultfd(2) with
# CAP_SYS_PTRACE; take both away.
sysctl=$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null || echo 0)
if ! "$SETPRIV" --help 2>&1 | grep -q -- --bounding-set; then
	not_run "eager fallback: no util-linux setpriv ($SETPRIV) to drop CAP_SYS_PTRACE"
elif [ "$sysctl" != 0 ]; then
	not_run "eager fallback: vm.unprivileged_userfaultfd is $sysctl, so anyone may have a userfaultfd"
else
	# shellcheck disable=SC2016
	unshare -m sh -c '[ ! -e /dev/userfaultfd ] || mount -o bind /dev/null /dev/userfaultfd &&
		exec "$@"' sh "$SETPRIV" --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace \
		"$K" $R -b shmem-huge --snapshot "$T/s" --restore-lazy >"$T/out" 2>&1
	rc=$?
	if [ $rc = 0 ] && has "identical to before the snapshot" &&
		has "^restore (lazy asked, eager ran)" &&
		has "fell back to an eager load: .*lazy_fallback_err -1 (Operation not permitted)"; then
		echo "kvmlite-lazy: ok: eager fallback without userfaultfd, checksum identical"
		show
	else
		bad "eager fallback: rc $rc, or not restored eagerly and correctly"
		sed 's/^/    /' "$T/out" >&2
	fi
fi

if [ $notrun != 0 ] && [ -n "${HPR_TEST_NO_SKIP:-}" ]; then
	echo "kvmlite-lazy: $notrun cases not run, and HPR_TEST_NO_SKIP is set" >&2
	fail=1
fi
[ $fail = 0 ] && echo "kvmlite-lazy: all run cases passed ($notrun not run)"
exit $fail
