#!/bin/bash
# Build hpregion and run every test suite: a -Werror build, the same suites
# under ASan+UBSan, the concurrency suites under TSan, and the extra checks
# that tests/*.cmake register (consumer build, fuzzers, examples), and the
# kernel and NUMA matrix (tests/vm/run.sh --quick: qemu guests, label vm).
# Run as root: the suites mount tmpfs/hugetlbfs in private mount namespaces
# and set the hugetlb pool, restoring it afterwards.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the plain build only
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

scripts/deps.sh

JOBS=$(nproc)
run_ctest() { # builddir [ctest args...]
	local b=$1
	shift
	(cd "$b" && ctest --output-on-failure -j1 "$@")
}

build() { # dir [cmake args...]
	local b=$1
	shift
	cmake -S "$ROOT" -B "$b" -DHPR_WERROR=ON "$@" >/dev/null
	cmake --build "$b" -j"$JOBS" >/dev/null
}

echo "== build (warnings are errors) and test"
build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_ctest build-test -LE 'install|example|vm'
# label "install" (consumer build against the installed tree, ABI check):
# only here, the sanitizer builds' artefacts are not what we ship
run_ctest build-test -L install
echo "== examples (correctness, crash replay, bad input, standalone build)"
run_ctest build-test -L example

echo "== benchmarks, quick mode (they run; their timings are not judged)"
bench/run --quick --build build-test --out build-test/bench-report

echo "== kernel and NUMA matrix: qemu guests, Debian 6.1 kernel, one node and two nodes"
run_ctest build-test -L vm

if [ $QUICK = 0 ]; then
	echo "== ASan + UBSan"
	build build-asan -DCMAKE_BUILD_TYPE=Debug -DHPR_SANITIZE=address,undefined \
		-DHPR_BUILD_EXAMPLES=OFF -DHPR_BUILD_BENCH=OFF
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_ctest build-asan -L unit
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_ctest build-asan -L concurrency
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_ctest build-asan -L soak

	echo "== TSan (concurrency suites)"
	build build-tsan -DCMAKE_BUILD_TYPE=Debug -DHPR_SANITIZE=thread \
		-DHPR_BUILD_EXAMPLES=OFF -DHPR_BUILD_BENCH=OFF -DHPR_BUILD_TOOLS=OFF
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_ctest build-tsan -L concurrency
fi
echo "== all tests passed"
