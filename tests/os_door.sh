#!/bin/bash
# SPDX-License-Identifier: MIT
# The OS layer is the only door to the kernel (docs/design.md, "The OS
# layer"): no file in src/ but os.c and os_touch.c calls the kernel itself,
# except the places kept on purpose — snapshot.c's io_uring rings, the PSI
# reclaimer's wake-up pipe in release.c, and the lazy load's event loop
# (lazyfill.c: poll and read of the userfaultfd, its wake-up eventfd;
# lazyload.c: that eventfd's close, and the dup of the caller's snapshot
# fd). Comments and string literals are left out.
#   os_door.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 1
CALLS='open|openat|ioctl|prctl|mincore|stat|fstat|lstat|statfs|fstatfs|realpath|opendir|readdir|closedir|madvise|mmap|munmap|mprotect|mlock|munlock|mbind|move_pages|sched_getaffinity|uname|syscall|read|write|pread|pwrite|close|pipe2?|poll|ftruncate|fallocate|fdatasync|fcntl|unlinkat|memfd_create|io_uring_queue_init'
P="(^|[^_>.a-zA-Z0-9])($CALLS)\\("
# file:call pairs allowed to stay
ALLOWED='^src/snapshot\.c:io_uring_queue_init$|^src/release\.c:(poll|pipe2|close)$|^src/lazyfill\.c:(poll|read|write)$|^src/lazyload\.c:(close|fcntl)$'
bad=0
for f in src/*.c; do
	case "$f" in src/os.c | src/os_touch.c) continue ;; esac
	# drop string literals, // comments and /* */ comments (also multi-line)
	while IFS= read -r hit; do
		line=${hit%%:*}
		for call in $(grep -oE "$P" <<<"${hit#*:}" | sed -E "s/^[^a-z_]*//; s/\\(\$//"); do
			[[ "$f:$call" =~ $ALLOWED ]] && continue
			echo "FAIL: $f:$line calls $call() directly: add or use a hook in src/os.h" >&2
			bad=$((bad + 1))
		done
	done < <(sed -E 's/"([^"\\]|\\.)*"/""/g; s@//.*$@@' "$f" |
		awk '{ out = ""; s = $0
			while (s != "") {
				if (inc) { i = index(s, "*/"); if (!i) { s = ""; break } s = substr(s, i + 2); inc = 0 }
				else { i = index(s, "/*"); if (!i) { out = out s; s = ""; break }
					out = out substr(s, 1, i - 1); s = substr(s, i + 2); inc = 1 }
			}
			print out }' | grep -nE "$P")
done
[ "$bad" -eq 0 ] && echo "os_door: src/ calls the kernel only through the OS layer (and the allowed data paths)"
exit $((bad > 0))
