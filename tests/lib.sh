# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# Sourced by the shell tests, scripts and example run scripts: the shell
# copy of tests/hpr_env.h (same values, same lock).
#
#   hpr_no_skip          true when HPR_TEST_NO_SKIP is set to anything but
#                        "" or "0" (CI sets 1): a skip is then a failure
#   hpr_skip WHY...      print "SKIP: WHY" and exit 77, or exit 1 under
#                        HPR_TEST_NO_SKIP
#   hpr_lock_system [-s] as root, flock fd 9 on $HPR_SYSTEM_LOCK (exclusive,
#                        or shared with -s) until the shell exits; not
#                        root: no lock (nothing system-wide is changed);
#                        none either when HPR_SYSTEM_LOCK_FD names an
#                        inherited descriptor of the lock (tests/hpr_env.h)
#   hpr_unlock_system    give it back early
HPR_SYSTEM_LOCK=/run/hpregion.lock

hpr_no_skip() {
	case "${HPR_TEST_NO_SKIP:-}" in
	"" | 0) return 1 ;;
	*) return 0 ;;
	esac
}

hpr_skip() {
	echo "SKIP: $*" >&2
	if hpr_no_skip; then
		echo "HPR_TEST_NO_SKIP is set: a skip is a failure here" >&2
		exit 1
	fi
	exit 77
}

hpr_lock_system() {
	[ "$(id -u)" = 0 ] || return 0
	# held for us by the script running us (HPR_SYSTEM_LOCK_FD, see
	# tests/hpr_env.h): our own flock would wait for it for ever
	case ${HPR_SYSTEM_LOCK_FD:-} in
	'' | *[!0-9]*) ;;
	*) [ "/proc/self/fd/$HPR_SYSTEM_LOCK_FD" -ef "$HPR_SYSTEM_LOCK" ] && return 0 ;;
	esac
	# /run is root's alone: no one else can plant a symlink or a file
	# there, so append-mode open (never truncating) is safe
	exec 9>>"$HPR_SYSTEM_LOCK" || return 1
	flock ${1:+"$1"} 9
}

# hpr_unlock_system: give back what hpr_lock_system took (nothing when it
# was not root or the lock was inherited)
hpr_unlock_system() {
	[ -e /proc/self/fd/9 ] || return 0
	[ /proc/self/fd/9 -ef "$HPR_SYSTEM_LOCK" ] || return 0
	flock -u 9
}
