# shellcheck shell=sh disable=SC2034 # fail, T: the caller reads them
# What the kvm-lite suites that also run in the nested guest share
# (kvmlite-guest.sh, kvmlite-keep.sh, kvmlite-lazy.sh), sourced by each from
# its own directory. POSIX sh: the nested guest runs them with busybox, and
# tests/kvmlite-vm.sh ships this file beside them.
#   kl_begin TAG KVM_LITE  exit 77 without a usable /dev/kvm, else say which
#                          KVM; sets K, KL_TAG, fail=0 and $T, a directory
#                          removed at exit
# A caller that does not call kl_begin sets K, T, KL_TAG (its lines' prefix)
# and fail=0 itself. KL_GREP=-F makes expect's TEXT a fixed string (empty:
# a basic regular expression).

kl_begin() {
	KL_TAG=$1 K=$2
	if ! probe=$("$K" --probe 2>&1); then
		echo "SKIP: $KL_TAG: no usable /dev/kvm: $probe" >&2
		exit 77
	fi
	echo "$KL_TAG: $probe"
	T=$(mktemp -d "/tmp/$KL_TAG.XXXXXX")
	trap 'rm -rf "$T"' EXIT
	fail=0
}

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
