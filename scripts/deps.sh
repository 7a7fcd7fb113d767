#!/bin/sh
# Install the Debian packages hpregion needs to build, test and run its
# examples. Idempotent: does nothing when they are all there.
set -e
PKGS="build-essential g++ binutils cmake pkg-config libnuma-dev liburing-dev check numactl clang gnuplot-nox fio python3"
# man page check (groff-base, man-db), format check and fuzzers
# (clang-format, clang's libFuzzer runtime)
PKGS="$PKGS groff-base man-db clang-format libclang-rt-dev"
# the sanitizer builds (scripts/lib/builds.sh): clang 19, whose ASan locks
# its allocator around fork() (GCC 12's does not: a child forked while
# another thread was in malloc could wait for ever in the child's first
# malloc)
PKGS="$PKGS clang-19 libclang-rt-19-dev"
# copy tools the snapshot test makes sparse copies with (cp, tar: coreutils, tar)
PKGS="$PKGS rsync"
PKGS="$PKGS ${HPR_EXTRA_PKGS:-}"
missing=""
# kvm-lite runs on real KVM inside a qemu TCG guest (tests/kvmlite-vm.sh)
PKGS="$PKGS qemu-system-x86 busybox-static cpio"
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing -- run as root or: sudo apt-get install$missing" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
