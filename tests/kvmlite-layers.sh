#!/bin/sh
# kvm-lite's structure (issue #22, item 10), checked on its object files:
#  - ram.c is the whole of the VMM's use of hpregion: no other object
#    references an hpr_ function;
#  - run.c handles exits through a table with a function per exit reason
#    (exit_handler; on_exit_io, on_exit_mmio, on_exit_hlt, on_exit_fatal).
#   tests/kvmlite-layers.sh OBJECT...     ($<TARGET_OBJECTS:kvm-lite>)
set -u
fail=0
ram=0
for o in "$@"; do
	case $(basename "$o") in
	ram.c.o | ram.o)
		ram=1
		continue
		;;
	run.c.o | run.o)
		for s in exit_handler on_exit_io on_exit_mmio on_exit_hlt on_exit_fatal; do
			nm "$o" | grep -q " [tTdDrR] $s$" ||
				{ echo "FAIL: run.c has no $s" >&2; fail=1; }
		done
		;;
	esac
	u=$(nm -u "$o" | awk '$2 ~ /^hpr_/ { print $2 }' | tr '\n' ' ')
	if [ -n "$u" ]; then
		echo "FAIL: $(basename "$o") calls hpregion ($u): that belongs in ram.c" >&2
		fail=1
	fi
done
[ $ram = 1 ] || { echo "FAIL: no ram.c object among $*" >&2; fail=1; }
[ $fail = 0 ] && echo "ok: only ram.c calls hpregion ($# objects); run.c has a handler per exit reason"
exit $fail
