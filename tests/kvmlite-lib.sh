# shellcheck shell=sh disable=SC2034 # fail: the caller reads it
# What tests/kvmlite-guest.sh and tests/kvmlite-keep.sh share, sourced by
# both from their own directory. POSIX sh: the nested guest runs them with
# busybox, and tests/kvmlite-vm.sh ships this file beside them.
# The caller sets K (kvm-lite), T (a scratch dir), KL_TAG (its lines'
# prefix), fail=0, and KL_GREP=-F where expect's TEXT is a fixed string
# (empty: a basic regular expression).

say() { echo "$KL_TAG: $*"; }

bad() {
	echo "$KL_TAG: FAIL: $*" >&2
	fail=1
}

# expect WANT_RC TEXT args...: kvm-lite's exit code and a line of its output
# (in $T/out for the caller's further checks)
expect() {
	want=$1 text=$2
	shift 2
	"$K" "$@" >"$T/out" 2>&1
	rc=$?
	# shellcheck disable=SC2086 # KL_GREP: one option or none
	if [ "$rc" = "$want" ] && grep -q ${KL_GREP:-} -- "$text" "$T/out"; then
		# shellcheck disable=SC2086
		say "ok: rc $rc: $(grep ${KL_GREP:-} -- "$text" "$T/out" | head -1 | cut -c1-160)"
	else
		bad "kvm-lite $* -> rc $rc (want $want, and '$text'):"
		sed 's/^/    /' "$T/out" >&2
	fi
}
