#!/bin/bash
# kvm-lite in the main job (scripts/run-examples.sh). Where this machine's
# /dev/kvm is usable (kvm-lite --probe opens it and creates a VM: kvm_intel,
# kvm_amd or kvm_pvm): one run with free page reporting and snapshot/restore
# on the huge tmpfs, one on hugetlb, the host x guest matrix, and --keep:
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
if probe=$("$K" --probe 2>&1); then
	echo "kvm-lite: /dev/kvm is usable here, running natively: ${probe#kvm-lite * on KVM: }"
	dir=()
	[ -n "${HPR_TMPFS:-}" ] && dir=(--shmem-dir "$HPR_TMPFS")
	snap=$(mktemp -d /tmp/kvm-lite-snap.XXXXXX)
	trap 'rm -rf "$snap"' EXIT
	"$K" -m 256M -b shmem-huge "${dir[@]}" -g 2m --fpr --snapshot "$snap/s"
	"$K" -m 256M -b hugetlb -g 4k --fpr
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
