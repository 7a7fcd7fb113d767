#!/bin/bash
# kvm-lite in the main job (scripts/run-examples.sh). Where this machine's
# /dev/kvm is usable (kvm-lite --probe opens it and creates a VM: kvm_intel,
# kvm_amd or kvm_pvm): one run with free page reporting and snapshot/restore
# on the huge tmpfs, one on hugetlb, restore eager vs lazy side by side
# (below), the host x guest matrix, and --keep:
# a VM killed with kill -9 at its checkpoint and resumed on its kept RAM,
# nothing copied (tests/kvmlite-keep.sh, a private huge tmpfs), and what a
# guest can do to its VMM (tests/kvmlite-guest.sh). On every
# machine, usable /dev/kvm or not: kvm-lite on real KVM (kvm-amd) inside a
# nested guest under qemu TCG, where timings are TCG's, not the TLB's
# (docs/kvm-lite-nested.md); without a usable /dev/kvm that is all it runs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${HPR_BUILD:-$ROOT/build}
K=$BUILD/examples/kvm-lite/kvm-lite
# Restore from a snapshot, eager (hpr_load) and lazy (--restore-lazy:
# hpr_load HPR_SNAP_LAZY, the vCPU resumed at once), alternating, the same
# guest and snapshot file each time: from the restore's start to the
# guest's first exit after the resume, to every saved page resident, to
# the guest's checksum of all its data, and the pages it demanded.
# KVMLITE_RESTORE_RAM (default 1G), _ROUNDS (3), _BACKINGS.
restore_side_by_side() {
	local ram=${KVMLITE_RESTORE_RAM:-1G} rounds=${KVMLITE_RESTORE_ROUNDS:-3} b i mode out lz
	echo "kvm-lite: restore eager vs lazy, $ram of guest RAM, snapshot in $snap (ms from the restore's start)"
	printf '%-11s %-5s %5s %10s %12s %11s %11s %9s\n' backing mode round hpr_load first-exit resident \
		guest-sum demanded
	for b in ${KVMLITE_RESTORE_BACKINGS:-shmem-huge thp}; do
		for i in $(seq "$rounds"); do
			for mode in eager lazy; do
				lz=()
				[ $mode = lazy ] && lz=(--restore-lazy)
				out=$("$K" -m "$ram" -b "$b" "${dir[@]}" --rand-iters 262144 --stride-reps 1 \
					--snapshot "$snap/r" "${lz[@]}" 2>&1) ||
					{ echo "$out" >&2; return 1; }
				grep -q "identical to before the snapshot" <<<"$out" ||
					{ echo "$out" >&2; return 1; }
				sed -n 's/^restore ([^)]*): first guest exit \([0-9.]*\) ms .*hpr_load returned \([0-9.]*\),.*resident at \([0-9.]*\) ms.*data at \([0-9.]*\) ms$/\2 \1 \3 \4/p' <<<"$out" |
					{ read -r l f r c; printf '%-11s %-5s %5s %10s %12s %11s %11s %9s\n' "$b" "$mode" "$i" \
						"$l" "$f" "$r" "$c" "$(sed -n 's/.* MiB (\([0-9]*\) pages) in all.*/\1/p' <<<"$out" | grep . || echo -)"; }
			done
		done
	done
	rm -f "$snap"/r.*
}

if [ "${1:-}" = restore ]; then
	# only the side by side: examples/kvm-lite/run.sh restore
	probe=$("$K" --probe 2>&1) || { echo "$probe" >&2; exit 77; }
	dir=()
	[ -n "${HPR_TMPFS:-}" ] && dir=(--shmem-dir "$HPR_TMPFS")
	snap=$(mktemp -d /tmp/kvm-lite-snap.XXXXXX)
	trap 'rm -rf "$snap"' EXIT
	echo "${probe#kvm-lite * on KVM: }"
	restore_side_by_side
	exit
fi
if probe=$("$K" --probe 2>&1); then
	echo "kvm-lite: /dev/kvm is usable here, running natively: ${probe#kvm-lite * on KVM: }"
	dir=()
	[ -n "${HPR_TMPFS:-}" ] && dir=(--shmem-dir "$HPR_TMPFS")
	snap=$(mktemp -d /tmp/kvm-lite-snap.XXXXXX)
	trap 'rm -rf "$snap"' EXIT
	"$K" -m 256M -b shmem-huge "${dir[@]}" -g 2m --fpr --snapshot "$snap/s"
	"$K" -m 256M -b hugetlb -g 4k --fpr
	restore_side_by_side
	"$K" -m 256M "${dir[@]}" --matrix --repeat 3
	echo "kvm-lite: --keep: kill -9 at the checkpoint, resume on the kept RAM"
	"$ROOT/tests/kvmlite-keep.sh" "$K"
	echo "kvm-lite: the whole vCPU through a snapshot, a hostile guest, watchdog and signals"
	"$ROOT/tests/kvmlite-guest.sh" "$K"
	echo "kvm-lite: and on real KVM in a nested guest (qemu TCG, kvm-amd)"
else
	echo "${probe#kvm-lite: SKIP: }"
	echo "kvm-lite: so it runs on real KVM in a nested guest only"
fi
KVMLITE_VM_ARGS="-m 128M -b shmem-huge -g 2m --fpr --snapshot /tmp/s" \
	"$ROOT/tests/kvmlite-vm.sh" "$BUILD" "$BUILD/kvmlite-vm-main"
# --keep on a huge tmpfs and on hugetlbfs (the guest's own pool)
KVMLITE_VM_ONLY=keep "$ROOT/tests/kvmlite-vm.sh" "$BUILD" "$BUILD/kvmlite-vm-main"
# the whole vCPU, a hostile guest, watchdog and signals on kvm_amd
KVMLITE_VM_ONLY=guest "$ROOT/tests/kvmlite-vm.sh" "$BUILD" "$BUILD/kvmlite-vm-main"
if [ -z "${snap:-}" ]; then
	KVMLITE_VM_ARGS="-m 128M --matrix --repeat 3" KVMLITE_VM_TIMEOUT=1800 \
		"$ROOT/tests/kvmlite-vm.sh" "$BUILD" "$BUILD/kvmlite-vm-main"
fi
