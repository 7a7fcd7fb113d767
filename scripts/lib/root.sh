# Sourced by the scripts that need root (run-examples.sh; test.sh and
# flake.sh through builds.sh).
#   as_root "$@"   returns at once when root; otherwise runs the calling
#                  script again through sudo (keeping the HPR_* and CK_*
#                  variables, which sudo would drop) and does not return;
#                  returns 1 when there is no sudo, for the caller to say
#                  what that means for it.
as_root() {
	local keep=() v
	[ "$(id -u)" = 0 ] && return 0
	command -v sudo >/dev/null 2>&1 || return 1
	for v in $(compgen -e); do
		case $v in HPR_* | CK_*) keep+=("$v=${!v}") ;; esac
	done
	echo "$(basename "$0"): not root: running it again through sudo" >&2
	exec sudo env "${keep[@]}" "$(readlink -f "$0")" "$@"
}

# need_root "$@": as_root, or exit 1 saying so when there is no sudo
need_root() {
	as_root "$@" && return 0
	echo "$(basename "$0"): the suites mount file systems and set the hugetlb pool," \
		"so this needs root, and there is no sudo here: run it as root" >&2
	exit 1
}
