#!/bin/bash
# Boot kvm-lite on real hardware-style KVM on any machine, whether its own
# /dev/kvm is usable (kvm_pvm, kvm_intel, kvm_amd) or not: qemu's TCG
# emulates AMD SVM with nested paging, so Debian's 6.1 kernel booted under
# TCG loads kvm-amd and offers /dev/kvm
# (docs/kvm-lite-nested.md). The initramfs holds busybox, the kvm modules of
# that kernel package, and kvm-lite with its shared libraries; its init runs
# the cases and prints one "KVMLITE-CASE <name> rc=<n>" line each.
#
#   tests/kvmlite-vm.sh BUILD_DIR [WORK_DIR]
#   KVMLITE_VM_ARGS="-m 256M --matrix --repeat 3" tests/kvmlite-vm.sh build
#       runs that one command instead of the test cases (KVMLITE_VM_MEM,
#       KVMLITE_VM_HUGEPAGES, KVMLITE_VM_GIB -- 1 GiB pages reserved at
#       boot, for -b hugetlb-1g -- and KVMLITE_VM_TIMEOUT size the guest); with
#       KVMLITE_VM_JSON=FILE the command also gets --json and its JSON is
#       copied back to FILE on the host (bench/run uses this)
#   KVMLITE_VM_ONLY=guest tests/kvmlite-vm.sh build
#       runs only tests/kvmlite-guest.sh in the guest: the whole vCPU
#       through a snapshot, a hostile guest, watchdog, signals and kicks
#       (without its LD_PRELOAD shim cases)
#   KVMLITE_VM_ONLY=lazy tests/kvmlite-vm.sh build
#       runs only tests/kvmlite-lazy.sh in the guest: --restore-lazy on a
#       huge tmpfs, a shmem memfd, THP and hugetlb (the guest's pool), and
#       the eager fallback without userfaultfd (the host's util-linux
#       setpriv, copied in, drops CAP_SYS_PTRACE; busybox's cannot)
#   KVMLITE_VM_ONLY=keep tests/kvmlite-vm.sh build
#       runs only the --keep cases: tests/kvmlite-keep.sh in the guest on a
#       tmpfs huge=always and on hugetlbfs (its own pool; the only place the
#       hugetlbfs resume is tested, since the host's pool is left alone)
# The kernel package is fetched once with apt-get download into
# ${HPR_VM_CACHE:-WORK_DIR/cache} (not installed). Exit 77 when qemu,
# busybox-static or the kernel package can't be had (scripts/deps.sh
# installs the first two); 1 under HPR_TEST_NO_SKIP (tests/lib.sh).
set -euo pipefail
BUILD=$(cd "$1" && pwd)
WORK=${2:-$BUILD/kvmlite-vm}
CACHE=${HPR_VM_CACHE:-$WORK/cache}
KVMLITE=$BUILD/examples/kvm-lite/kvm-lite
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
skip() { hpr_skip "kvmlite-vm: $*"; } # exit 77, or 1 under HPR_TEST_NO_SKIP

[ -x "$KVMLITE" ] || { echo "kvmlite-vm: $KVMLITE not built" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing: apt-get install qemu-system-x86"
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && grep -q "not a dynamic executable" <<<"$(LC_ALL=C ldd "$BUSYBOX" 2>&1)" ||
	skip "no static busybox: apt-get install busybox-static"
mkdir -p "$WORK" "$CACHE"

# 1. Debian's 6.1 kernel (kvm-amd works nested under TCG there).
KDIR=$CACHE/kernel
if ! ls "$KDIR"/boot/vmlinuz-* >/dev/null 2>&1; then
	pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
		awk '{print $1}' | sort -V | tail -1)
	[ -n "$pkg" ] || skip "no linux-image-6.1.0-*-amd64 in apt (apt-get update?)"
	(cd "$CACHE" && rm -f linux-image-*.deb && apt-get download "$pkg" >/dev/null 2>&1) ||
		skip "apt-get download $pkg failed"
	rm -rf "$KDIR.tmp" && dpkg-deb -x "$CACHE"/linux-image-*.deb "$KDIR.tmp" && mv "$KDIR.tmp" "$KDIR"
fi
VMLINUZ=$(ls "$KDIR"/boot/vmlinuz-* | head -1)
MODS=$(ls -d "$KDIR"/lib/modules/*/kernel)

# 2. initramfs
ROOT=$WORK/root
rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,mod,proc,sys,dev,tmp,lib64}
cp "$BUSYBOX" "$ROOT/bin/busybox"
for m in virt/lib/irqbypass drivers/crypto/ccp/ccp arch/x86/kvm/kvm arch/x86/kvm/kvm-amd \
	arch/x86/kvm/kvm-intel; do
	if [ -f "$MODS/$m.ko" ]; then
		cp "$MODS/$m.ko" "$ROOT/mod/"
	elif [ -f "$MODS/$m.ko.xz" ]; then
		xz -dc "$MODS/$m.ko.xz" >"$ROOT/mod/$(basename "$m").ko"
	else
		echo "kvmlite-vm: $m.ko missing from the kernel package" >&2
		exit 1
	fi
done
cp "$KVMLITE" "$ROOT/bin/kvm-lite"
cp "$(dirname "$0")/kvmlite-keep.sh" "$ROOT/keep.sh"
cp "$(dirname "$0")/kvmlite-guest.sh" "$ROOT/guest.sh"
cp "$(dirname "$0")/kvmlite-lazy.sh" "$ROOT/lazy.sh"
cp "$(dirname "$0")/kvmlite-lib.sh" "$ROOT/kvmlite-lib.sh" # guest.sh, keep.sh and lazy.sh source it
# util-linux setpriv for lazy.sh's eager fallback (busybox's has no
# --bounding-set); not on /bin, where busybox installs its own
SETPRIV=$(command -v setpriv || true)
mkdir -p "$ROOT/ul"
if [ -n "$SETPRIV" ] && "$SETPRIV" --help 2>&1 | grep -q -- --bounding-set; then
	cp "$SETPRIV" "$ROOT/ul/setpriv"
fi
# the binary's shared libraries: the loader at its own path, the rest in
# /lib/kvm-lite (LD_LIBRARY_PATH; the build tree's rpath may be under /tmp,
# which the guest mounts over)
mkdir -p "$ROOT/lib/kvm-lite"
for bin in "$KVMLITE" "$ROOT"/ul/*; do
	[ -f "$bin" ] || continue
	ldd "$bin" | awk '/=>/ {print $3}' | while read -r lib; do
		[ -f "$lib" ] && cp -L "$lib" "$ROOT/lib/kvm-lite/"
	done
	ldd "$bin" | awk '/^\t\// {print $1}' | while read -r lib; do
		cp --parents -L "$lib" "$ROOT/"
	done
done
cat >"$ROOT/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
export LD_LIBRARY_PATH=/lib/kvm-lite
for m in irqbypass ccp kvm; do insmod /mod/$m.ko || echo "KVMLITE-INSMOD-FAILED $m"; done
# kvm_intel first (one vendor module at a time), to show why it is not
# tested: qemu's TCG does not emulate VMX
intel=$(insmod /mod/kvm-intel.ko 2>&1 && echo loaded && rmmod kvm_intel)
insmod /mod/kvm-amd.ko || echo "KVMLITE-INSMOD-FAILED kvm-amd"
echo $(cat /hugepages) > /proc/sys/vm/nr_hugepages
echo "KVMLITE-GUEST $(uname -r) $(grep -c processor /proc/cpuinfo) cpus, hugetlb pool $(cat /proc/sys/vm/nr_hugepages)"
echo "KVMLITE-CPU flags of the TCG guest's CPU: $(sed -n '/^flags/{p;q}' /proc/cpuinfo | tr ' ' '\n' |
	grep -x -E 'svm|npt|vmx|xsave|avx|avx2' | tr '\n' ' ')"
echo "KVMLITE-KVM-INTEL insmod kvm-intel: $intel; $(dmesg | grep -i -E 'kvm.*(intel|vmx|hardware support)' | tail -1)"
run() { # name args...
	n=$1; shift
	echo "KVMLITE-RUN $n: kvm-lite $*"
	kvm-lite "$@"
	echo "KVMLITE-CASE $n rc=$?"
}
. /cases
if [ -f /tmp/kvm-lite.json ]; then
	echo KVMLITE-JSON-BEGIN; cat /tmp/kvm-lite.json; echo KVMLITE-JSON-END
fi
echo KVMLITE-END
poweroff -f
EOF
chmod +x "$ROOT/init"
echo "${KVMLITE_VM_HUGEPAGES:-96}" >"$ROOT/hugepages"
# --keep: kill -9 at the checkpoint and resume on kept RAM, on a huge
# tmpfs and on hugetlbfs (2 MiB pages from the guest's pool)
KEEP_CASES='mkdir -p /keep-shmem /keep-huge
mount -t tmpfs -o huge=always,size=512M keep /keep-shmem
mount -t hugetlbfs -o pagesize=2M keep /keep-huge
echo "KVMLITE-RUN keep-shmem: keep.sh on a tmpfs huge=always"
sh /keep.sh /bin/kvm-lite /keep-shmem 64M; echo "KVMLITE-CASE keep-shmem rc=$?"
echo "KVMLITE-RUN keep-hugetlbfs: keep.sh on hugetlbfs"
sh /keep.sh /bin/kvm-lite /keep-huge 64M; echo "KVMLITE-CASE keep-hugetlbfs rc=$?"'
# what a guest can do to its VMM: the whole vCPU through a snapshot (on
# kvm_amd a lost TSC shows too), hostile requests, watchdog, signals, kicks
GUEST_CASES='echo "KVMLITE-RUN guest: guest.sh"
sh /guest.sh /bin/kvm-lite; echo "KVMLITE-CASE guest rc=$?"'
# --restore-lazy on every backing with a snapshot, and the eager fallback
# (this throwaway guest's sysctl at 0, as on the host, in case its kernel
# defaults otherwise)
LAZY_CASES='echo "KVMLITE-RUN lazy: lazy.sh"
echo 0 > /proc/sys/vm/unprivileged_userfaultfd
HPR_TEST_NO_SKIP=1 SETPRIV=/ul/setpriv sh /lazy.sh /bin/kvm-lite; echo "KVMLITE-CASE lazy rc=$?"'
if [ -n "${KVMLITE_VM_ARGS:-}" ]; then
	# one case of your own, e.g. KVMLITE_VM_ARGS="-m 256M --matrix --repeat 3"
	echo "run custom $KVMLITE_VM_ARGS${KVMLITE_VM_JSON:+ --json /tmp/kvm-lite.json}" >"$ROOT/cases"
	NCASES=1
elif [ "${KVMLITE_VM_ONLY:-}" = keep ]; then
	echo "$KEEP_CASES" >"$ROOT/cases"
	NCASES=2
elif [ "${KVMLITE_VM_ONLY:-}" = guest ]; then
	echo "$GUEST_CASES" >"$ROOT/cases"
	NCASES=1
elif [ "${KVMLITE_VM_ONLY:-}" = lazy ]; then
	echo "$LAZY_CASES" >"$ROOT/cases"
	NCASES=1
else
	cat >"$ROOT/cases" <<'EOF'
R="-m 64M --rand-iters 262144 --stride-reps 2"
run thp-2m-fpr $R -b thp -g 2m --fpr
run hugetlb-4k-fpr $R -b hugetlb -g 4k --fpr
run shmem-huge-2m-fpr $R -b shmem-huge -g 2m --fpr
run 4k-4k $R -b 4k -g 4k
run shmem-2m-snapshot $R -b shmem -g 2m --fpr --snapshot /tmp/snap
run hugetlb-2m-snapshot $R -b hugetlb -g 2m --snapshot /tmp/snap2
run matrix $R --matrix --repeat 1
run guest-fault $R -b thp -g 4k --test-guest-fault
run hugetlb-1g-fpr -m 2G --rand-iters 65536 --stride-reps 1 -b hugetlb-1g -g 2m --fpr
EOF
	echo "$KEEP_CASES" >>"$ROOT/cases"
	echo "$GUEST_CASES" >>"$ROOT/cases"
	echo "$LAZY_CASES" >>"$ROOT/cases"
	NCASES=13
	# hugetlb-1g: two 1 GiB pages reserved at boot (a runtime 1 GiB
	# allocation rarely finds a free aligned range), and RAM for them
	# past the 2 GiB below-4G window q35 gives
	: "${KVMLITE_VM_GIB:=2}" "${KVMLITE_VM_MEM:=4608M}"
fi
(cd "$ROOT" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$WORK/initrd.gz"

# 3. boot
LOG=$WORK/console.log
echo "kvmlite-vm: booting $(basename "$VMLINUZ") under qemu TCG with -cpu max,+svm"
timeout "${KVMLITE_VM_TIMEOUT:-900}" qemu-system-x86_64 -accel "${KVMLITE_VM_ACCEL:-tcg,thread=single}" -cpu max,+svm \
	-m "${KVMLITE_VM_MEM:-1536M}" -smp 2 \
	-kernel "$VMLINUZ" -initrd "$WORK/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1${KVMLITE_VM_GIB:+ hugepagesz=1G hugepages=$KVMLITE_VM_GIB}" -display none -no-reboot -nodefaults -monitor none \
	-serial stdio </dev/null >"$LOG" 2>&1 || true
tr -d '\r' <"$LOG" | sed -n '/KVMLITE-GUEST/,$p'

# 4. verdict
fail=0
grep -q KVMLITE-END "$LOG" || { echo "kvmlite-vm: the guest did not finish" >&2; fail=1; }
if grep -q KVMLITE-INSMOD-FAILED "$LOG"; then
	echo "kvmlite-vm: kvm modules did not load" >&2
	fail=1
fi
ncase=$(grep -c "KVMLITE-CASE " "$LOG" || true)
[ "$ncase" = $NCASES ] || { echo "kvmlite-vm: $ncase of $NCASES cases reported" >&2; fail=1; }
if [ -n "${KVMLITE_VM_ARGS:-}" ]; then
	[ $fail = 0 ] && grep -q "KVMLITE-CASE custom rc=0" "$LOG" || fail=1
	if [ -n "${KVMLITE_VM_JSON:-}" ]; then
		tr -d '\r' <"$LOG" | sed -n '/^KVMLITE-JSON-BEGIN$/,/^KVMLITE-JSON-END$/p' |
			sed '1d;$d' >"$KVMLITE_VM_JSON"
		[ -s "$KVMLITE_VM_JSON" ] || { echo "kvmlite-vm: no JSON from the guest" >&2; fail=1; }
	fi
	exit $fail
fi
if [ "${KVMLITE_VM_ONLY:-}" = guest ]; then
	tr -d '\r' <"$LOG" | grep -q "KVMLITE-CASE guest rc=0" || fail=1
	[ $fail = 0 ] && echo "kvmlite-vm: the guest cases passed on real KVM (nested, TCG)"
	exit $fail
fi
if [ "${KVMLITE_VM_ONLY:-}" = lazy ]; then
	tr -d '\r' <"$LOG" | grep -q "KVMLITE-CASE lazy rc=0" || fail=1
	[ $fail = 0 ] && echo "kvmlite-vm: the --restore-lazy cases passed on real KVM (nested, TCG)"
	exit $fail
fi
if [ "${KVMLITE_VM_ONLY:-}" = keep ]; then
	tr -d '\r' <"$LOG" | grep -q "KVMLITE-CASE keep-shmem rc=0" || fail=1
	tr -d '\r' <"$LOG" | grep -q "KVMLITE-CASE keep-hugetlbfs rc=0" || fail=1
	[ $fail = 0 ] && echo "kvmlite-vm: the --keep cases passed on real KVM (nested, TCG)"
	exit $fail
fi
while read -r line; do
	case "$line" in
	*guest-fault\ rc=1) ;; # must fail: the guest's #UD reaches the VMM
	*guest-fault*) echo "kvmlite-vm: FAILED: $line (want rc=1)" >&2; fail=1 ;;
	*rc=0*) ;;
	*) echo "kvmlite-vm: FAILED: $line" >&2; fail=1 ;;
	esac
done < <(tr -d '\r' <"$LOG" | grep "KVMLITE-CASE ")
for want in "checksum 0x[0-9a-f]*: matches the host view" "checksum after reuse" \
	"another process mapping hpr_fd(): sees the guest.s memory" \
	"identical to before the snapshot" "page-table walk: 4 KiB" "page-table walk: 2 MiB" \
	"vCPU restored and read back equal: regs sregs fpu events mp_state xsave xcrs debugregs" \
	"guest after the restore: 11 of 11 CPL 0 checks" \
	"restored into a new VM (shmem RAM, 2048 KiB pages)" \
	"restored into a new VM (hugetlb RAM, 2048 KiB pages)" \
	"host hugetlb-1g (hpregion hugetlb, 1 GiB pages, shared fd)" \
	"host coverage: 2048 of 2048 MiB huge-mapped (100%)" \
	"kvm_amd (hardware SVM), nested paging Y" "guest exception 6 (#UD) at CPL 3" \
	"kvmlite-lazy: ok: hugetlb: [1-9][0-9]* pages demanded" \
	"kvmlite-lazy: ok: eager fallback without userfaultfd"; do
	grep -q "$want" "$LOG" || { echo "kvmlite-vm: missing in output: $want" >&2; fail=1; }
done
rows=$(tr -d '\r' <"$LOG" | grep -cE '^(4k|thp|hugetlb|shmem-huge) +(4k|2m) +[0-9]' || true)
[ "$rows" = 8 ] || { echo "kvmlite-vm: matrix has $rows of 8 rows" >&2; fail=1; }
[ $fail = 0 ] && echo "kvmlite-vm: all cases passed on real KVM (nested, TCG)"
exit $fail
