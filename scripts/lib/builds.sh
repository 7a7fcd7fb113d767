# Sourced by scripts/test.sh and scripts/flake.sh: the three builds the test
# suites run in, and how each runs them. Expects ROOT (the source tree).
#   build plain|asan|tsan      configure and build it (warnings are errors)
#   suites plain|asan|tsan ARGS...
#                              ctest ARGS in that build, one suite at a time,
#                              with its sanitizer's options
# plain: build-test, RelWithDebInfo; asan: build-asan, ASan+UBSan, Debug;
# tsan: build-tsan, TSan, Debug (only the concurrency suites are meant for it).
# The sanitizer builds use clang 19 (scripts/deps.sh installs it): its
# sanitizer runtimes lock their allocators around fork(), which the suites
# that fork threaded processes need; GCC 12's ASan does not, and a child
# forked while another thread held its allocator's lock hung in its first
# malloc (test_conc_fork under GCC's ASan: 1 hang in 9 runs).
# Also brings need_root (scripts/lib/root.sh): the suites need root.
. "$ROOT/scripts/lib/root.sh"
build_dir() {
	case $1 in
	plain) echo "$ROOT/build-test" ;;
	asan) echo "$ROOT/build-asan" ;;
	tsan) echo "$ROOT/build-tsan" ;;
	*) echo "builds.sh: unknown build '$1'" >&2; return 1 ;;
	esac
}

build() { # plain|asan|tsan
	local args=(-DCMAKE_BUILD_TYPE=Debug -DHPR_BUILD_EXAMPLES=OFF -DHPR_BUILD_BENCH=OFF)
	case $1 in
	plain) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
	asan) args+=(-DHPR_SANITIZE=address,undefined) ;;
	tsan) args+=(-DHPR_SANITIZE=thread -DHPR_BUILD_TOOLS=OFF) ;;
	esac
	[ "$1" = plain ] || args+=(-DCMAKE_C_COMPILER=clang-19)
	local b
	b=$(build_dir "$1")
	cmake -S "$ROOT" -B "$b" -DHPR_WERROR=ON "${args[@]}" >/dev/null
	cmake --build "$b" -j"$(nproc)" >/dev/null
}

suites() { # plain|asan|tsan [ctest args...]
	local b
	b=$(build_dir "$1")
	shift
	(
		cd "$b"
		export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
		export UBSAN_OPTIONS=print_stacktrace=1
		# die_after_fork=0: the fork suites' children start threads
		# after a fork of a threaded process (what hpregion(7) allows);
		# clang 19's TSan locks its state around fork() and follows them
		export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0"
		ctest --output-on-failure -j1 "$@"
	)
}
