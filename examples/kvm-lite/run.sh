#!/bin/bash
# kvm-lite in the main job (scripts/run-examples.sh). With /dev/kvm: one run
# with free page reporting and snapshot/restore on the huge tmpfs, one on
# hugetlb, then the host x guest matrix. Without /dev/kvm (the build machine
# is a kvm-pvm guest itself, docs/kvm-lite-nested.md): the same inside a
# nested guest under qemu TCG with kvm-amd, where timings are TCG's, not
# the TLB's.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${HPR_BUILD:-$ROOT/build}
K=$BUILD/examples/kvm-lite/kvm-lite
if [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	dir=()
	[ -n "${HPR_TMPFS:-}" ] && dir=(--shmem-dir "$HPR_TMPFS")
	snap=$(mktemp -d /tmp/kvm-lite-snap.XXXXXX)
	trap 'rm -rf "$snap"' EXIT
	"$K" -m 256M -b shmem-huge "${dir[@]}" -g 2m --fpr --snapshot "$snap/s"
	"$K" -m 256M -b hugetlb -g 4k --fpr
	"$K" -m 256M "${dir[@]}" --matrix --repeat 3
else
	echo "kvm-lite: no usable /dev/kvm here: running it on real KVM in a nested guest"
	KVMLITE_VM_ARGS="-m 128M -b shmem-huge -g 2m --fpr --snapshot /tmp/s" \
		"$ROOT/tests/kvmlite-vm.sh" "$BUILD" "$BUILD/kvmlite-vm-main"
	KVMLITE_VM_ARGS="-m 128M --matrix --repeat 3" KVMLITE_VM_TIMEOUT=1800 \
		"$ROOT/tests/kvmlite-vm.sh" "$BUILD" "$BUILD/kvmlite-vm-main"
fi
