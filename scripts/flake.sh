#!/bin/bash
# Is any suite flaky? Runs the unit and concurrency suites (ctest labels
# "unit" and "concurrency") N times in the builds scripts/test.sh uses --
# plain and ASan+UBSan, and the concurrency suites under TSan -- and prints
# how many of the runs of each suite failed. Exits 1 if any run failed.
# A suite that fails even once is a bug to fix, not a run to retry.
# Interrupted (Ctrl-C, SIGTERM), it prints the table of the runs it finished.
# Needs root like test.sh (run by a user, it runs itself again through sudo).
#   scripts/flake.sh N
# Logs of the failed runs: build-test/flake/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib/builds.sh
need_root "$@"
N=${1:-}
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/flake.sh N   (runs per suite)" >&2; exit 2; }

LOGS=$ROOT/build-test/flake
BUILDS=(plain asan tsan)
declare -A LABELS=([plain]='unit|concurrency' [asan]='unit|concurrency' [tsan]=concurrency)
declare -A runs fails skips

# count LOG BUILD: add one ctest run's results to the tallies; keep the log
# only if something failed. ctest's result lines look like
#   " 3/15 Test  #3: test_collapse ......   Passed   18.89 sec"
#   " 6/15 Test  #6: test_fallback ......***Failed    0.86 sec"
count() {
	local name result bad=0
	while read -r name result; do
		runs[$name,$2]=$((${runs[$name,$2]:-0} + 1))
		case $result in
		Passed) ;;
		Skipped) skips[$name,$2]=$((${skips[$name,$2]:-0} + 1)) ;;
		*) fails[$name,$2]=$((${fails[$name,$2]:-0} + 1)) bad=1 ;;
		esac
	done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+[* ]*([A-Za-z]+).*/\1 \2/p' "$1")
	[ $bad = 1 ] || rm -f "$1"
}

# report: the table; exit 0 if nothing failed, else 1 after the failures' messages
report() {
	local name b f s cell total=0
	echo
	echo "== failed runs / runs, per suite and build (sK: also skipped K times; -: not run there)"
	printf '%-22s' suite
	printf ' %10s' "${BUILDS[@]}"
	echo
	for name in $(printf '%s\n' "${!runs[@]}" | cut -d, -f1 | sort -u); do
		printf '%-22s' "$name"
		for b in "${BUILDS[@]}"; do
			f=${fails[$name,$b]:-0} s=${skips[$name,$b]:-0}
			total=$((total + f))
			cell="$f/${runs[$name,$b]:-0}"
			[ "${runs[$name,$b]:-0}" != 0 ] || cell=-
			[ "$s" = 0 ] || cell="$cell s$s"
			printf ' %10s' "$cell"
		done
		echo
	done
	if [ $total = 0 ]; then
		echo "no failures"
		exit 0
	fi
	echo "$total failed runs; their logs, with each failure's message:"
	for log in "$LOGS"/*.log; do
		echo "-- $log"
		grep -E 'Assertion|:F:|:E:|FAIL|Failed|Timeout|ERROR: .*Sanitizer' "$log" | head -20
	done
	exit 1
}

scripts/deps.sh
for b in "${BUILDS[@]}"; do
	echo "== build $b"
	build "$b"
done
rm -rf "$LOGS"
mkdir -p "$LOGS"
# the trap can run while a run's output goes to its log: report on fd 3
exec 3>&1
trap '{ echo; echo "interrupted: the runs finished so far"; report; } >&3 2>&3' INT TERM
# The whole run holds the system lock; its suites inherit it
# (HPR_SYSTEM_LOCK_FD, tests/hpr_env.h). Other root runs on the machine
# wait until it ends: taken and given back around every suite, or every
# round, it went to the other runs' suites each time (a waiter woken at the
# release wins against the fork and exec of the next flock), and a 30-round
# run crawled at 5 to 20 min a round behind them.
. tests/lib.sh
exec 8>>"$HPR_SYSTEM_LOCK"
flock -n 8 || { echo "waiting for the other root runs to finish ($HPR_SYSTEM_LOCK)"; flock 8; }
export HPR_SYSTEM_LOCK_FD=8
for i in $(seq "$N"); do
	for b in "${BUILDS[@]}"; do
		t0=$SECONDS
		suites "$b" -L "${LABELS[$b]}" >"$LOGS/$b-$i.log" 2>&1 || true
		count "$LOGS/$b-$i.log" "$b"
		echo "round $i/$N, $b: $((SECONDS - t0)) s"
	done
done
report
