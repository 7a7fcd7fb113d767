#!/bin/bash
# kvm-lite's guest never does port I/O at CPL 3: kvm-pvm runs CPL 3 natively
# and does not honour IOPL 3 there, so an in/out at CPL 3 is a #GP on it
# (hardware KVM would let it pass, so machines without kvm-pvm would not
# notice). This disassembles the CPL 3 part of the guest program, between
# kl_guest_user_start and kl_guest_user_end in the kvm-lite binary, and
# fails on any in, out, ins or outs. Only .rodata, where the guest program
# lives, is disassembled: -D alone decodes the debug sections too, whose
# addresses start at 0 and overlap the range. It also checks that the range
# is the guest's code (it calls the VMM through int3), so a moved label
# cannot make the check pass on nothing.
#   tests/kvmlite-noport.sh path/to/kvm-lite
set -euo pipefail
K=$1
sym() { nm "$K" | awk -v s="$1" '$3 == s { print $1 }'; }
a=$(sym kl_guest_user_start)
b=$(sym kl_guest_user_end)
if [ -z "$a" ] || [ -z "$b" ]; then
	echo "FAIL: no kl_guest_user_start/kl_guest_user_end symbols in $K" >&2
	exit 1
fi
dis=$(objdump -D -j .rodata --no-show-raw-insn --start-address=0x"$a" --stop-address=0x"$b" "$K" |
	awk -F'\t' 'NF >= 2 && $1 ~ /^ *[0-9a-f]+:$/ { print $2 }')
n=$(wc -l <<<"$dis")
calls=$(grep -c '^int3' <<<"$dis" || true)
bad=$(grep -E '^(rep[a-z]* )?(in|out|ins[bwld]?|outs[bwld]?)( |$)' <<<"$dis" || true)
if [ "$n" -lt 50 ] || [ "$calls" -lt 5 ]; then
	echo "FAIL: the CPL 3 range [0x$a, 0x$b) holds $n instructions, $calls int3: not the guest's CPL 3 code" >&2
	exit 1
fi
if [ -n "$bad" ]; then
	echo "FAIL: port I/O in the guest's CPL 3 code (it must call the VMM through int3):" >&2
	echo "$bad" >&2
	exit 1
fi
echo "ok: $n instructions at CPL 3, $calls VMM calls through int3, no in/out/ins/outs"
