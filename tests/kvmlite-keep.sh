#!/bin/sh
# kvm-lite --keep: a VM whose RAM is a kept hpregion region is killed with
# kill -9 at its checkpoint and a new kvm-lite resumes it with --snapshot,
# the RAM re-attached and never copied (examples/kvm-lite/keep.c). Checks:
#  - the guest RAM checksum the killed VMM printed at the checkpoint is the
#    one the new VMM recomputes after the re-attach, and the guest's own
#    checksum after the resume is the one it had before the stop; the new
#    VMM reads the whole vCPU back equal to the file and the guest finds
#    the MSRs, debug registers, TSC, CPUID, XCR0 and YMM it set before;
#  - nothing was copied or allocated: the kept file's st_blocks (stat, here,
#    and the VMM's own fstat) are unchanged; the resume, run in a memory
#    cgroup of its own, peaked at less than half the RAM (a copy would be
#    charged all of it), and on hugetlbfs ran under a hugetlb cgroup limit
#    of 0 pages; smaps has the whole RAM huge-mapped after the re-attach;
#  - refusals, exit 2 before /dev/kvm is opened: RAM another VMM still
#    holds, a guest that ran on past its checkpoint (RUNNING), another
#    RAM's vCPU file, another -m, kept RAM without a vCPU file (a VMM
#    killed mid-run before any checkpoint), a vCPU file without kept RAM, a
#    version 1 or 2 vCPU file, the vCPU file on hugetlbfs, DIR not a
#    tmpfs/hugetlbfs, --keep without --snapshot.
#
#   tests/kvmlite-keep.sh KVM_LITE                 (root) a private tmpfs
#       huge=always in a mount namespace of its own; the resume cycle where
#       kvm-lite --probe finds /dev/kvm usable, the refusals everywhere
#   tests/kvmlite-keep.sh KVM_LITE DIR [RAM]      on DIR as it is (a tmpfs
#       mounted huge= or hugetlbfs; tests/kvmlite-vm.sh runs both in its
#       nested guest, the only place hugetlbfs is covered: natively this
#       script never touches the hugetlb pool)
# POSIX sh: the nested guest runs it with busybox.
# $R is a list of options, split on purpose
# shellcheck disable=SC2086
set -u
K=$1
if [ $# -lt 2 ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: kvmlite-keep: needs root (a private mount)" >&2; exit 77; }
	if [ -z "${KL_KEEP_NS:-}" ]; then
		KL_KEEP_NS=1 exec unshare -m --propagation private "$0" "$@"
	fi
	T=$(mktemp -d /tmp/kvmlite-keep.XXXXXX)
	mkdir "$T/shmem" "$T/huge"
	mount -t tmpfs -o huge=always,size=1280M kvmlite-keep "$T/shmem" || exit 1
	# hugetlbfs only to see that a vCPU file is refused there: the mount
	# takes nothing from the pool, and no region is made on it here
	mount -t hugetlbfs kvmlite-keep "$T/huge" 2>/dev/null || rmdir "$T/huge"
	trap 'umount "$T/shmem"; [ -d "$T/huge" ] && umount "$T/huge"; rm -rf "$T"' EXIT
	DIR=$T/shmem
	RAM=256M
else
	DIR=$2
	RAM=${3:-64M}
	T=$(mktemp -d /tmp/kvmlite-keep.XXXXXX)
	trap 'rm -rf "$T"' EXIT
fi
ram_mib=${RAM%M}
# the vCPU files: next to the RAM on tmpfs, elsewhere on hugetlbfs (no write(2))
if [ "$(stat -f -c %t "$DIR")" = 958458f6 ]; then # hugetlbfs
	S=$T/snap
	FS=hugetlbfs
else
	S=$DIR/snap
	FS=tmpfs
fi
mkdir -p "$S"
R="-m $RAM --rand-iters 262144 --stride-reps 2"
fail=0
KL_TAG="kvmlite-keep ($FS)"
KL_GREP=-F
# shellcheck source=kvmlite-lib.sh
. "$(dirname "$0")/kvmlite-lib.sh"

# start NAME PAUSE args...: kvm-lite --keep DIR/NAME --snapshot S/NAME in the
# background with --checkpoint-pause PAUSE; waits for the pause line
start() {
	name=$1 pause=$2
	shift 2
	"$K" "$@" --keep "$DIR/$name" --snapshot "$S/$name" --checkpoint-pause "$pause" \
		>"$T/$name.out" 2>&1 &
	pid=$!
	i=0
	while ! grep -q "checkpoint: pausing" "$T/$name.out" 2>/dev/null; do
		if ! kill -0 $pid 2>/dev/null || [ $i -ge 1800 ]; then
			bad "$name never reached its checkpoint pause:"
			sed 's/^/    /' "$T/$name.out" >&2
			kill -9 $pid 2>/dev/null
			wait $pid 2>/dev/null
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
}

# -- refusals that need no KVM (exit 2 before /dev/kvm) ---------------------
expect 2 "--keep needs --snapshot PREFIX" $R --keep "$DIR/x"
expect 2 "--checkpoint-pause goes with --keep" $R --checkpoint-pause 1
expect 2 "is not a tmpfs or hugetlbfs" $R --keep /proc/x --snapshot "$S/x"
expect 2 "give DIR/NAME" $R --keep x --snapshot "$S/x"
: >"$DIR/orphan"
expect 2 "exists but $S/orphan.vcpu does not" $R --keep "$DIR/orphan" --snapshot "$S/orphan"
rm -f "$DIR/orphan"
printf 'KLVCPU01\001\000\000\000\000\000\000\000' >"$S/old.vcpu"
expect 2 "old.vcpu is format version 1, this kvm-lite reads version 3" \
	$R --keep "$DIR/old" --snapshot "$S/old"
# version 2 (regs, sregs and fpu only, the --keep checkpoints before 3)
printf 'KLVCPU01\002\000\000\000\000\000\000\000' >"$S/old.vcpu"
expect 2 "old.vcpu is format version 2, this kvm-lite reads version 3" \
	$R --keep "$DIR/old" --snapshot "$S/old"
rm -f "$S/old.vcpu"
H=""
[ $FS = hugetlbfs ] && H=$DIR
[ -n "${T:-}" ] && [ -d "$T/huge" ] && H=$T/huge
if [ -n "$H" ]; then
	expect 2 "whose files cannot be written with write(2)" \
		$R --keep "$DIR/h" --snapshot "$H/h"
	[ -e "$DIR/h" ] && bad "a refused start left $DIR/h"
fi

# a boot that finds no usable /dev/kvm (where there is one, /dev/null over
# it, in a mount namespace of its own; where there is none, as it is) exits
# 77 and leaves no kept file behind
if [ -n "${KL_KEEP_NS:-}" ]; then
	unshare -m --propagation private sh -c \
		'{ [ ! -e /dev/kvm ] || mount --bind /dev/null /dev/kvm; } && exec "$@"' \
		sh "$K" $R --keep "$DIR/nokvm" --snapshot "$S/nokvm" >"$T/out" 2>&1
	rc=$?
	if [ $rc = 77 ] && [ ! -e "$DIR/nokvm" ] && [ ! -e "$S/nokvm.vcpu" ]; then
		say "ok: rc 77 without /dev/kvm, no kept file left"
	else
		bad "no /dev/kvm: rc $rc (want 77), left: $(find "$DIR" "$S" | tr '\n' ' ')"
	fi
fi

if ! "$K" --probe >/dev/null 2>&1; then
	say "no usable /dev/kvm here: the kill -9 and resume cycle runs in the nested guest (kvmlite_vm)"
	exit $fail
fi

# -- kill -9 at the checkpoint, resume on the kept RAM ----------------------
# The resume runs in a memory cgroup of its own, made for it: a page the
# new VMM allocates is charged there, and pages already in the kept file
# (charged when the killed VMM faulted them) are not charged again when
# mapped. So the cgroup's peak is this one process's evidence: a copy of
# the RAM (into anonymous memory, another file, the same file's new pages)
# would charge all of it; re-attaching charges the VMM's own few MiB. On
# hugetlbfs the hugetlb controller's limit is 0 pages as well: a new huge
# page would fail the resume. Meminfo's counters, which kvm-lite prints,
# are the whole system's (a neighbour's tmpfs moves them), so they are
# shown, not judged.
CG_MNT="" CG_OWN="" CG="" CG_HCG="" CG_SUB=""
cg_find() { # TYPE CONTROLLER: the mount point of a hierarchy that has it
	while read -r _ mnt typ opts _; do
		[ "$typ" = "$1" ] || continue
		if [ "$1" = cgroup2 ]; then
			grep -qw "$2" "$mnt/cgroup.controllers" 2>/dev/null && { echo "$mnt"; return; }
		else
			case ",$opts," in *",$2,"*) echo "$mnt"; return ;; esac
		fi
	done </proc/mounts
}
# cg_make NAME: CG (memory), CG_PEAK, CG_HCG (hugetlb, on hugetlbfs) made
# fresh; 1 (said) when the kernel has no memory controller to make them in
cg_make() {
	v1=$(cg_find cgroup memory)
	if [ -n "$v1" ]; then
		CG=$v1/hpr-keep-$$-$1
		CG_PEAK=memory.max_usage_in_bytes
	else
		CG_MNT=$(cg_find cgroup2 memory)
		if [ -z "$CG_MNT" ] && ! grep -q ' cgroup2 ' /proc/mounts; then
			# the nested guest mounts no cgroup file system: mount the v2 one
			mkdir -p "$T/cg" && mount -t cgroup2 none "$T/cg" && CG_OWN=$T/cg &&
				CG_MNT=$(cg_find cgroup2 memory)
		fi
		[ -n "$CG_MNT" ] || { bad "no memory cgroup controller to measure the resume in"; return 1; }
		cg_enable memory hugetlb
		CG=$CG_MNT/hpr-keep-$$-$1
		CG_PEAK=memory.peak
	fi
	mkdir "$CG" || { bad "mkdir $CG"; return 1; }
	[ -e "$CG/$CG_PEAK" ] || { bad "$CG has no $CG_PEAK (kernel too old for this check)"; return 1; }
	[ $FS = hugetlbfs ] || return 0
	if [ -e "$CG/hugetlb.2MB.max" ]; then # v2: memory and hugetlb in one cgroup
		CG_HCG=$CG
		echo 0 >"$CG/hugetlb.2MB.max"
		[ -e "$CG/hugetlb.2MB.rsvd.max" ] && echo 0 >"$CG/hugetlb.2MB.rsvd.max"
	elif h=$(cg_find cgroup hugetlb) && [ -n "$h" ]; then # v1
		CG_HCG=$h/hpr-keep-$$-$1
		mkdir "$CG_HCG" && echo 0 >"$CG_HCG/hugetlb.2MB.limit_in_bytes"
	elif CG_MNT=$(cg_find cgroup2 hugetlb) && [ -n "$CG_MNT" ]; then # memory v1, hugetlb v2
		cg_enable hugetlb
		CG_HCG=$CG_MNT/hpr-keep-$$-$1
		mkdir "$CG_HCG" && echo 0 >"$CG_HCG/hugetlb.2MB.max"
	else
		bad "no hugetlb cgroup controller to limit the resume with"
		return 1
	fi
}
cg_enable() { # CONTROLLER...: on in CG_MNT's children, remembered in CG_SUB
	for c in "$@"; do
		grep -qw "$c" "$CG_MNT/cgroup.subtree_control" && continue
		grep -qw "$c" "$CG_MNT/cgroup.controllers" || continue
		echo "+$c" >"$CG_MNT/cgroup.subtree_control" && CG_SUB="$CG_SUB $c"
	done
}
cg_drop() {
	[ -n "$CG_HCG" ] && [ "$CG_HCG" != "$CG" ] && rmdir "$CG_HCG"
	[ -n "$CG" ] && rmdir "$CG"
	for c in $CG_SUB; do echo "-$c" >"$CG_MNT/cgroup.subtree_control"; done
	[ -n "$CG_OWN" ] && umount "$CG_OWN"
	CG="" CG_HCG="" CG_SUB="" CG_OWN=""
}
# in_cg CMD args...: CMD in the cgroup(s)
in_cg() {
	sh -c 'echo $$ >"$1/cgroup.procs" && { [ -z "$2" ] || [ "$2" = "$1" ] ||
		echo $$ >"$2/cgroup.procs"; } && shift 2 && exec "$@"' sh "$CG" "$CG_HCG" "$@"
}
cg_hugetlb_refused() { # v2: "max N" counts the allocations the limit refused
	if [ -e "$CG_HCG/hugetlb.2MB.events" ]; then
		sed -n 's/^max //p' "$CG_HCG/hugetlb.2MB.events"
	else
		cat "$CG_HCG/hugetlb.2MB.failcnt"
	fi
}
cg_peak_kib() { echo $(($(cat "$CG/$CG_PEAK") / 1024)); }
lim_kib=$((ram_mib * 1024 / 2)) # a copy of the RAM would be charged ram_mib

# the check can fail: a plain copy of a kept file, made in such a cgroup,
# is charged to it (a file on /tmp, a tmpfs in the nested guest)
src=$DIR/ctl
[ $FS = hugetlbfs ] && src=$T/ctl # no write(2) there: copy a file of /tmp
dd if=/dev/zero of="$src" bs=1M count="$ram_mib" 2>/dev/null
if cg_make ctl; then
	in_cg sh -c 'cat "$1" >"$2"' sh "$src" "$T/ctl.copy"
	peak=$(cg_peak_kib)
	rm -f "$T/ctl.copy"
	if [ "$peak" -ge "$lim_kib" ]; then
		say "ok: control: a copy of $ram_mib MiB made in a fresh cgroup peaked it at $peak KiB ($CG_PEAK)"
	else
		bad "control: a copy of $ram_mib MiB peaked its cgroup at only $peak KiB: the check below could not fail"
	fi
	if [ -n "$CG_HCG" ]; then # and a boot on hugetlbfs: refused by the limit
		in_cg "$K" $R -g 2m --keep "$DIR/ctl" --snapshot "$S/ctl" >"$T/out" 2>&1
		rc=$? ev=$(cg_hugetlb_refused)
		if [ $rc != 0 ] && [ "$ev" -gt 0 ]; then
			say "ok: control: a boot on hugetlbfs in it was refused $ev huge pages, rc $rc: $(grep -m1 -i 'hugetlb\|memory' "$T/out" | cut -c1-120)"
		else
			bad "control: a boot on hugetlbfs under a hugetlb limit of 0: rc $rc, $ev pages refused"
			sed 's/^/    /' "$T/out" >&2
		fi
		rm -f "$DIR/ctl" "$S/ctl.vcpu"
	fi
fi
[ -n "$CG" ] && cg_drop
rm -f "$src"
started=0
if start k 600 $R -g 2m && started=1 && cg_make resume; then
	started=0
	sum=$(sed -n 's/^checkpoint 1: .*guest RAM checksum \(0x[0-9a-f]*\).*/\1/p' "$T/k.out")
	blocks=$(stat -c %b "$DIR/k")
	# the stopped VMM still holds its RAM: a second one is refused
	expect 2 "held by another process" $R -g 2m --keep "$DIR/k" --snapshot "$S/k"
	kill -9 $pid
	wait $pid 2>/dev/null
	say "killed kvm-lite (pid $pid) at checkpoint 1: guest RAM checksum $sum, kept file $blocks blocks"
	in_cg "$K" $R -g 2m --keep "$DIR/k" --snapshot "$S/k" >"$T/r.out" 2>&1
	rc=$?
	sed 's/^/    /' "$T/r.out" | grep -E "re-attach|kept RAM"
	[ $rc = 0 ] || { bad "resume -> rc $rc"; sed 's/^/    /' "$T/r.out" >&2; }
	grep -q "re-attach: guest RAM checksum $sum equals checkpoint 1's" "$T/r.out" ||
		bad "the RAM checksum after the re-attach is not $sum"
	grep -q "identical to before the stop" "$T/r.out" ||
		bad "the guest's checksum after the resume differs from before the stop"
	# the whole vCPU came back from the file of the killed VMM: read back
	# by the new one, and the guest's own checks of what it had set
	grep -q "vCPU restored and read back equal: regs sregs fpu" "$T/r.out" ||
		bad "the new VMM did not read the vCPU back equal to the file"
	grep -q "guest after the restore: .* equal to before the checkpoint" "$T/r.out" ||
		bad "the guest found its vCPU state changed after the resume"
	grep -q "kept file blocks $blocks before, $blocks after (checkpoint $blocks), unchanged" \
		"$T/r.out" || bad "the kept file's blocks changed (stat said $blocks)"
	after=$(stat -c %b "$DIR/k")
	[ "$after" = "$blocks" ] || bad "stat: $blocks blocks before, $after after"
	grep -q "re-attach: huge-mapped $ram_mib of $ram_mib MiB" "$T/r.out" ||
		bad "not all of the RAM is huge-mapped after the re-attach"
	peak=$(cg_peak_kib)
	if [ "$peak" -lt "$lim_kib" ]; then
		say "ok: the resume's cgroup peaked at $peak KiB ($CG_PEAK; limit $lim_kib, a copy of the RAM would be $((ram_mib * 1024)))"
	else
		bad "the resume's cgroup peaked at $peak KiB ($CG_PEAK, limit $lim_kib): a copy of the $ram_mib MiB RAM?"
	fi
	if [ -n "$CG_HCG" ]; then
		ev=$(cg_hugetlb_refused)
		if [ "$ev" = 0 ]; then
			say "ok: the resume ran under a hugetlb cgroup limit of 0 pages, none refused"
		else
			bad "the resume asked for $ev huge pages beyond its hugetlb cgroup limit of 0"
		fi
	fi
	say "meminfo (whole system, not judged): $(grep -o 'ShmemHugePages [-+][0-9]* kB\|pages free [-+][0-9]*' "$T/r.out" | head -1)"
	# it ran on past its checkpoint: the same command is refused now
	expect 2 "its guest ran on past checkpoint 1 (state RUNNING" $R -g 2m --keep "$DIR/k" \
		--snapshot "$S/k"
	expect 2 "is for $ram_mib MiB of RAM" -m $((ram_mib * 2))M --keep "$DIR/k" \
		--snapshot "$S/k"
fi
[ -n "$CG" ] && cg_drop
if [ $started = 1 ]; then # no cgroup to resume in: stop the paused VMM
	kill -9 $pid
	wait $pid 2>/dev/null
fi
rm -f "$DIR/k" "$S/k.vcpu"

# -- two kept RAMs stopped cleanly: their vCPU files are not interchangeable
if start a 0 $R && wait $pid && start b 0 $R && wait $pid; then
	expect 2 "the vCPU file belongs to other kept RAM" $R --keep "$DIR/a" --snapshot "$S/b"
	expect 0 "identical to before the stop" $R --keep "$DIR/a" --snapshot "$S/a"
else
	bad "a clean stop at the checkpoint did not exit 0"
fi
rm -f "$DIR/a" "$DIR/b" "$S/b.vcpu"
expect 2 "no kept guest RAM $DIR/a" $R --keep "$DIR/a" --snapshot "$S/a"
rm -f "$S/a.vcpu"

# -- killed mid-run, before any checkpoint: kept RAM, no vCPU file ---------
"$K" -m "$RAM" --rand-iters 20000000000 --keep "$DIR/c" --snapshot "$S/c" >"$T/c.out" 2>&1 &
pid=$!
i=0
while [ ! -e "$DIR/c" ] && [ $i -lt 600 ]; do # made: it runs within a second
	sleep 0.1
	i=$((i + 1))
done
sleep 2
kill -9 $pid
wait $pid 2>/dev/null
expect 2 "exists but $S/c.vcpu does not" -m "$RAM" --keep "$DIR/c" --snapshot "$S/c"
rm -f "$DIR/c"

# -- no pause: stopped, re-attached and resumed in one process -------------
expect 0 "stopped, re-attached and resumed the vCPU" $R -g 4k --keep "$DIR/d" --snapshot "$S/d"
rm -f "$DIR/d" "$S/d.vcpu"

[ $fail = 0 ] && say "all passed"
exit $fail
