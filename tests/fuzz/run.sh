#!/bin/bash
# SPDX-License-Identifier: MIT
# Build the libFuzzer targets of src/parse.c with clang (separately from the
# gcc build: libFuzzer needs clang) and run each for a bounded time from
# its seed corpus (tests/fuzz/corpus/<target>, real files of a Linux 6.18
# machine). The working corpus and any crash inputs go to OUT; the seeds in
# the tree are never modified.
#   run.sh SRC_DIR OUT_DIR [SECONDS_PER_TARGET]   (default 20, or $HPR_FUZZ_TIME)
set -euo pipefail
SRC=$1
OUT=$2
SECS=${3:-${HPR_FUZZ_TIME:-20}}
CC=${HPR_FUZZ_CC:-}
for c in $CC clang clang-14; do
	if command -v "$c" >/dev/null; then CC=$c; break; fi
done
if [ -z "$CC" ] || ! command -v "$CC" >/dev/null; then
	# shellcheck source=../lib.sh
	. "$(dirname "$0")/../lib.sh"
	hpr_skip "no clang (apt-get install clang libclang-rt-dev)"
fi
mkdir -p "$OUT"
CFLAGS="-g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
	-fno-omit-frame-pointer -Wall -Wextra -Werror -Wno-unused-parameter -I$SRC/src"
fails=0
for t in smaps meminfo sysfs mountinfo opts; do
	bin=$OUT/fuzz_$t
	# shellcheck disable=SC2086
	$CC $CFLAGS "$SRC/tests/fuzz/fuzz_$t.c" "$SRC/src/parse.c" -o "$bin"
	rm -rf "$OUT/corpus_$t"
	mkdir -p "$OUT/corpus_$t" "$OUT/crash_$t"
	echo "== fuzz_$t for ${SECS}s"
	if ! (cd "$OUT/crash_$t" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$bin" -max_total_time="$SECS" -max_len=8192 -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 "$OUT/corpus_$t" "$SRC/tests/fuzz/corpus/$t" \
		>"$OUT/fuzz_$t.log" 2>&1); then
		echo "FAIL: fuzz_$t found a bug; log $OUT/fuzz_$t.log, inputs in $OUT/crash_$t" >&2
		tail -40 "$OUT/fuzz_$t.log" >&2
		fails=$((fails + 1))
	else
		grep -E "stat::number_of_executed_units|cov:" "$OUT/fuzz_$t.log" | tail -2
	fi
done
[ $fails = 0 ] || exit 1
echo "fuzz: all targets ran ${SECS}s without a finding"
