#!/bin/bash
# Is any suite flaky? Runs the unit and concurrency suites (ctest labels
# "unit" and "concurrency") N times in the builds scripts/test.sh uses --
# plain and ASan+UBSan, and the concurrency suites under TSan -- and prints
# how many of the N runs of each suite failed. Exits 1 if any run failed.
# A suite that fails even once is a bug to fix, not a run to retry.
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

scripts/deps.sh
LOGS=$ROOT/build-test/flake
BUILDS=(plain asan tsan)
LABELS_plain='unit|concurrency' LABELS_asan='unit|concurrency' LABELS_tsan=concurrency
declare -A runs fails skips
for b in "${BUILDS[@]}"; do
	echo "== build $b"
	build "$b"
done
rm -rf "$LOGS"
mkdir -p "$LOGS"

for i in $(seq "$N"); do
	for b in "${BUILDS[@]}"; do
		labels=LABELS_$b
		log=$LOGS/$b-$i.log
		t0=$SECONDS
		suites "$b" -L "${!labels}" >"$log" 2>&1 || true
		bad=0
		# ctest's result lines: " 3/15 Test  #3: test_collapse ....   Passed   18.89 sec"
		while read -r name result; do
			runs[$name,$b]=$((${runs[$name,$b]:-0} + 1))
			case $result in
			Passed) ;;
			Skipped) skips[$name,$b]=$((${skips[$name,$b]:-0} + 1)) ;;
			*) fails[$name,$b]=$((${fails[$name,$b]:-0} + 1)) bad=1 ;;
			esac
		done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+[* ]*([A-Za-z]+).*/\1 \2/p' "$log")
		[ $bad = 1 ] || rm -f "$log"
		echo "run $i/$N $b: $((SECONDS - t0)) s"
	done
done

echo
echo "== failed runs / runs, per suite and build (sK: skipped K times; -: not run in that build)"
printf '%-22s' suite
printf ' %10s' "${BUILDS[@]}"
echo
total=0
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
