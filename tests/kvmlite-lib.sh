# shellcheck shell=sh
# What the kvm-lite suites that also run in the nested guest share
# (kvmlite-guest.sh, kvmlite-lazy.sh; POSIX sh: busybox runs them there,
# with this file copied next to them). Source it, then:
#   kl_begin NAME KVM_LITE  exit 77 without a usable /dev/kvm, else say
#                           which KVM; $T is a directory removed at exit,
#                           fail=0
#   bad WHAT...             say NAME: FAIL: WHAT, and fail=1
kl_begin() {
	KL_NAME=$1
	if ! probe=$("$2" --probe 2>&1); then
		echo "SKIP: $KL_NAME: no usable /dev/kvm: $probe" >&2
		exit 77
	fi
	echo "$KL_NAME: $probe"
	T=$(mktemp -d "/tmp/$KL_NAME.XXXXXX")
	trap 'rm -rf "$T"' EXIT
	# shellcheck disable=SC2034 # the suite's verdict, read there
	fail=0
}

bad() {
	echo "$KL_NAME: FAIL: $*" >&2
	# shellcheck disable=SC2034
	fail=1
}
