#!/bin/bash
# Build hpregion and run every test suite: a -Werror build, the same suites
# under ASan+UBSan, the concurrency suites under TSan, and the extra checks
# that tests/*.cmake register (consumer build, fuzzers, examples), and the
# kernel and NUMA matrix (tests/vm/run.sh --quick: qemu guests, label vm).
# Needs root: the suites mount tmpfs/hugetlbfs in private mount namespaces
# and set the hugetlb pool, restoring it afterwards. Run by a user, it runs
# itself again through sudo.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the plain build only
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib/builds.sh
need_root "$@"
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

scripts/deps.sh

echo "== build (warnings are errors) and test"
build plain
suites plain -LE 'install|example|vm'
# label "install" (consumer build against the installed tree, ABI check):
# only here, the sanitizer builds' artefacts are not what we ship
suites plain -L install
echo "== examples (correctness, crash replay, bad input, standalone build)"
suites plain -L example

echo "== benchmarks, quick mode (they run; their timings are not judged)"
bench/run --quick --build build-test --out build-test/bench-report

echo "== kernel and NUMA matrix: qemu guests, Debian 6.1 kernel: one node, two nodes, 1 GiB pages + cgroup v2 hugetlb"
suites plain -L vm

if [ $QUICK = 0 ]; then
	echo "== ASan + UBSan"
	build asan
	suites asan -L unit
	suites asan -L concurrency
	suites asan -L soak

	echo "== TSan (concurrency suites)"
	build tsan
	suites tsan -L concurrency
fi
echo "== all tests passed"
