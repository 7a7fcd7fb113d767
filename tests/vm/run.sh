#!/bin/bash
# The kernel and NUMA matrix: boot qemu guests (TCG) with Debian's 6.1
# kernel and an initramfs holding busybox and the project's test binaries,
# run every suite inside, and pass the result back.
#
# Configurations (--config, default "all"):
#   1node   Debian's 6.1 kernel, one node: -smp 2 -m 6G
#   2node   the same kernel on two NUMA nodes (1 CPU + 3 GiB each), a
#           hugetlb pool on each node; also runs the multi-node NUMA suite
#           (tests/vm/numa_multi.c), which must pass there, never skip
#   1g      the same kernel, one node, two 1 GiB hugetlb pages reserved at
#           boot and the hugetlb controller on cgroup v2; promises (in
#           HPR_TEST_REQUIRE) 1 GiB pages and the hugetlb cgroup, and
#           anonymous VMA names when the kernel's config has
#           CONFIG_ANON_VMA_NAME=y (Debian's 6.1 and 6.12 do not)
#
# Inside the guest HPR_TEST_NO_SKIP is unset: a suite whose feature 6.1
# lacks exits 77 and is counted and reported as a skip. When this script
# runs under HPR_TEST_NO_SKIP (CI), a skip not listed in
# tests/vm/allowed-skips fails. What a configuration promises is exported
# as HPR_TEST_REQUIRE: a suite that finds it missing fails. The guest prints
# one summary line,
#   VMRESULT config=... kernel=... nodes=N gib=N hugetlb_cgroup=v1|v2|none
#            pass=N fail=N skip=N xfail=N suites: ...
# which this script parses; it exits non-zero if a suite failed (other than
# the known failures listed in tests/vm/known-failures), the guest crashed
# or did not finish within the timeout, or the guest is not the shape its
# configuration promises (kernel, NUMA nodes, 1 GiB pages, the hugetlb
# cgroup hierarchy) or passed fewer suites than its minimum.
#
#   tests/vm/run.sh [--quick] [--config 1node|2node|1g|all] [--build-dir DIR]
#                   [--timeout SECONDS] [--idle SECONDS] [--suites "test_a test_b"]
#
# A guest is stopped, and its configuration fails, when its serial console
# has printed nothing for --idle seconds (400: a hung guest; the longest
# silent stretch, one suite's run, is ~60 s on an idle host) or when it has
# run --timeout seconds in all (1200 with --quick, 3600 without). The guest
# is emulated (TCG), so its speed follows the host's load: the one-node
# guest takes ~260 s on an idle host of ours and ~800 s on one whose two
# CPUs also run two parallel builds; silence, not a total, is what tells a
# hang from a slow host.
#
# --quick: the one-node guest skips the suites listed in tests/vm/slow-suites
# (stress and long ones; the guest is emulated), the two-node guest runs only
# the NUMA suites (tests/vm/numa-suites) and numa_multi, the 1g guest only
# tests/vm/1g-suites, and the guest exports HPR_TEST_QUICK=1 and
# HPR_TEST_GIB_MAX (its 1 GiB pool stays at the boot's pages). CI runs
# --quick.
#
# Needs root for apt-get only (qemu-system-x86, busybox-static, cpio); the
# kernel package is fetched with `apt-get download` into the build dir and
# unpacked there -- it is never installed on the host.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

QUICK=0
CONFIGS=all
BUILD=
TIMEOUT=
IDLE=400
SUITES=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--config) CONFIGS=$2; shift ;;
	--build-dir) BUILD=$2; shift ;;
	--timeout) TIMEOUT=$2; shift ;;
	--idle) IDLE=$2; shift ;;
	--suites) SUITES=$2; shift ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "vm: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$CONFIGS" = all ] && CONFIGS="1node 2node 1g"
[ -n "$TIMEOUT" ] || TIMEOUT=$([ $QUICK = 1 ] && echo 1200 || echo 3600)
[ -n "$BUILD" ] || BUILD=$ROOT/build-vm
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)

log() { echo "vm: $*" >&2; }

# ---- host packages -----------------------------------------------------
HPR_EXTRA_PKGS="qemu-system-x86 busybox-static cpio" "$ROOT/scripts/deps.sh"
QEMU=$(command -v qemu-system-x86_64)
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || { log "busybox-static did not install /bin/busybox"; exit 1; }
if ! "$BUSYBOX" --list >/dev/null 2>&1 || ldd "$BUSYBOX" >/dev/null 2>&1; then
	log "/bin/busybox is not the static busybox (install busybox-static)"
	exit 1
fi

# ---- the project's binaries ---------------------------------------------
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
	log "configuring $BUILD"
	cmake -S "$ROOT" -B "$BUILD" -DHPR_WERROR=ON -DHPR_BUILD_EXAMPLES=OFF \
		-DHPR_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
CACHE=$BUILD/vm-cache
mkdir -p "$CACHE"

# ---- the guest kernel: Debian's linux-image-amd64 (6.1 on bookworm) -----
# HPR_VM_KERNEL_PKG overrides the package (e.g. linux-image-6.1.0-57-amd64).
kpkg=${HPR_VM_KERNEL_PKG:-}
if [ -z "$kpkg" ]; then
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	if [ -z "$kpkg" ]; then
		apt-get update -qq
		kpkg=$(apt-cache depends linux-image-amd64 |
			awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	fi
fi
[ -n "$kpkg" ] || { log "cannot find Debian's kernel package (apt-cache depends linux-image-amd64)"; exit 1; }
KDIR=$CACHE/$kpkg
VMLINUZ=$(ls "$KDIR"/boot/vmlinuz-* 2>/dev/null | head -1 || true)
if [ -z "$VMLINUZ" ]; then
	log "fetching $kpkg (apt-get download; unpacked under $CACHE, not installed)"
	rm -rf "$KDIR" "$CACHE"/deb
	mkdir -p "$CACHE/deb"
	# _apt cannot write into root-owned build dirs: download as root
	(cd "$CACHE/deb" && { apt-get download -o APT::Sandbox::User=root "$kpkg" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get download -o APT::Sandbox::User=root "$kpkg" >/dev/null; }; })
	dpkg-deb -x "$CACHE"/deb/"$kpkg"_*.deb "$KDIR"
	rm -rf "$CACHE/deb"
	VMLINUZ=$(ls "$KDIR"/boot/vmlinuz-* | head -1)
fi
KVER=${VMLINUZ##*/vmlinuz-}
# Everything the suites need is built in (tmpfs, hugetlbfs, NUMA, io_uring,
# cgroups, PSI, 8250 serial console, initramfs gzip): no modules to load.

# ---- initramfs -----------------------------------------------------------
STAGE=$CACHE/initramfs
INITRD=$CACHE/initramfs.cpio.gz
rm -rf "$STAGE"
mkdir -p "$STAGE"/{bin,sbin,proc,sys,dev,tmp,run,tests,etc,root}
cp "$BUSYBOX" "$STAGE/bin/busybox"
cp "$HERE/init" "$STAGE/init"
chmod 755 "$STAGE/init"
for f in slow-suites numa-suites 1g-suites known-failures allowed-skips; do
	awk '!/^#/ && NF' "$HERE/$f" >"$STAGE/etc/$f"
done

copy_with_libs() { # binary -> /tests, shared libraries at their host paths
	local bin=$1 lib
	cp "$bin" "$STAGE/tests/"
	strip --strip-debug "$STAGE/tests/${bin##*/}" 2>/dev/null || true
	for lib in $(ldd "$bin" 2>/dev/null | awk '/=> \// {print $3} /^\t\// {print $1}'); do
		[ -e "$STAGE$lib" ] && continue
		mkdir -p "$STAGE$(dirname "$lib")"
		cp -L "$lib" "$STAGE$lib"
	done
}
nsuites=0
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	name=${t##*/}
	if [ -n "$SUITES" ] && ! grep -qw -- "$name" <<<"$SUITES"; then
		continue
	fi
	copy_with_libs "$t"
	nsuites=$((nsuites + 1))
done
for extra in vm_probe numa_multi; do
	[ -x "$BUILD/tests/$extra" ] || { log "missing $BUILD/tests/$extra (tests/vm.cmake builds it)"; exit 1; }
	copy_with_libs "$BUILD/tests/$extra"
done
[ $nsuites -gt 0 ] || { log "no test suites found in $BUILD/tests"; exit 1; }
# the hpr command, for the suites that check what it reports (hpr stat,
# hpr probe); the 1g config promises those checks
if [ -x "$BUILD/tools/hpr" ]; then
	copy_with_libs "$BUILD/tools/hpr"
elif grep -qw 1g <<<"$CONFIGS"; then
	log "missing $BUILD/tools/hpr (configure with HPR_BUILD_TOOLS=ON): the 1g config needs it"
	exit 1
fi
# the dynamic loader at the path the binaries name
mkdir -p "$STAGE/lib64"
[ -e "$STAGE/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/"
(cd "$STAGE" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$INITRD"
log "initramfs: $nsuites suites, $(du -h "$INITRD" | cut -f1); kernel $KVER"
# anonymous VMA names are promised only where the kernel was built with them
KCONFIG=$(ls "$KDIR"/boot/config-* 2>/dev/null | head -1 || true)
ANON_NAMES=0
[ -n "$KCONFIG" ] && grep -q '^CONFIG_ANON_VMA_NAME=y' "$KCONFIG" && ANON_NAMES=1

# ---- boot ------------------------------------------------------------------
# TCG, not KVM: this machine's /dev/kvm (kvm-pvm) crawls through real-mode
# firmware; TCG boots 6.1 in seconds. -cpu max offers pdpe1gb (1 GiB pages).
# Stop the guest named $2 once log $1 has not grown for $IDLE seconds
# (and leave $1.idle saying so).
watch_idle() { # log marker
	local size last=-1 quiet=0
	while sleep 10; do
		size=$(stat -c %s "$1" 2>/dev/null || echo 0)
		if [ "$size" = "$last" ]; then
			quiet=$((quiet + 10))
		else
			quiet=0 last=$size
		fi
		if [ $quiet -ge "$IDLE" ]; then
			: >"$1.idle"
			pkill -TERM -f -- "-name $2 " || true
			return
		fi
	done
}

run_config() { # config -> 0 pass, 1 fail
	local cfg=$1 logf=$CACHE/serial-$1.log mem smp numa=() append rc line
	local marker=hprvm-$1-$$
	# the shape each configuration promises, checked against VMRESULT
	local want_nodes=1 want_gib=1 want_cg=v1 min_pass require= cghugetlb=v1
	# 6 GiB: the suites fault 1 GiB regions, and one 1 GiB hugetlb page is
	# reserved at boot (a runtime 1 GiB allocation rarely finds a free,
	# movable 1 GiB range in a small guest). qemu allocates guest RAM on
	# touch: the host pays for what the suites use, not for -m.
	mem=${HPR_VM_MEM_GB:-6}
	smp=2
	# min_pass: suites that must pass (a full run passes more)
	case $cfg in
	1node) min_pass=14 ;; # 15 of the 16 it runs under --quick (test_snapshot skips)
	2node)
		numa=(-object memory-backend-ram,id=m0,size=$((mem / 2))G
			-numa node,nodeid=0,cpus=0,memdev=m0
			-object memory-backend-ram,id=m1,size=$((mem - mem / 2))G
			-numa node,nodeid=1,cpus=1,memdev=m1)
		want_nodes=2 min_pass=2 # test_smoke, numa_multi (+ test_numa*)
		# no 1 GiB page (hugepages=0 below): none of its suites needs
		# one (the 1g guest covers them; a suite that wants one says
		# NOTRUN), and the 6.1 kernel's boot-time reservation of it
		# failed in two of six boots of this two-node layout on
		# 2026-12-03 (gib=0, one of them in a .ci/run;
		# docs/vm-matrix.md)
		want_gib=0
		;;
	1g)
		want_gib=2 want_cg=v2 cghugetlb=v2 min_pass=4 # tests/vm/1g-suites
		require=gib,hugetlb_cgroup
		[ "$ANON_NAMES" = 1 ] && require=$require,anon_names
		;;
	*) log "unknown config $cfg"; return 1 ;;
	esac
	[ -n "$SUITES" ] && min_pass=1 # a selection: at least one of it passes
	# THP madvise and PSI on, as on the CI host (Debian's 6.1 defaults to
	# THP always). Automatic NUMA balancing off, as on the one-node host:
	# on 6.1 its hinting faults make smaps under-report Rss/AnonHugePages of
	# THP regions (measured: 54 of 512 MiB shown while all of it was in
	# use), so smaps-based assertions would test the balancer, not us
	# (docs/vm-matrix.md; HPR_VM_APPEND=numa_balancing=enable reproduces).
	# hprvm.* are read by /init.
	append="console=ttyS0 panic=-1 oops=panic quiet loglevel=4 transparent_hugepage=madvise psi=1"
	append="$append numa_balancing=disable hugepagesz=1G hugepages=$want_gib"
	append="$append hprvm.config=$cfg hprvm.quick=$QUICK hprvm.pool=${HPR_VM_POOL:-32}"
	append="$append hprvm.cghugetlb=$cghugetlb hprvm.require=$require"
	case ${HPR_TEST_NO_SKIP:-} in '' | 0) ;; *) append="$append hprvm.noskip=1" ;; esac
	append="$append ${HPR_VM_APPEND:-}" # extra kernel parameters, for experiments
	log "booting $cfg: 6.1 guest ($KVER), -smp $smp -m ${mem}G${numa:+ with 2 NUMA nodes}, timeout ${TIMEOUT}s, idle ${IDLE}s"
	set +e
	: >"$logf"
	rm -f "$logf.idle"
	watch_idle "$logf" "$marker" &
	local watcher=$!
	timeout -k 10 "$TIMEOUT" "$QEMU" -name "$marker" -accel tcg,thread=multi -cpu max \
		-machine q35 -smp "$smp" -m "${mem}G" "${numa[@]}" \
		-kernel "$VMLINUZ" -initrd "$INITRD" -append "$append" \
		-display none -monitor none -serial stdio -no-reboot -nodefaults \
		</dev/null 2>&1 | stdbuf -oL tr -d '\r' | tee "$logf"
	rc=${PIPESTATUS[0]}
	kill "$watcher" 2>/dev/null
	wait "$watcher" 2>/dev/null
	set -e
	line=$(grep -a '^VMRESULT ' "$logf" | tail -1 || true)
	if [ -z "$line" ]; then
		if [ -e "$logf.idle" ]; then
			log "$cfg: guest printed nothing for ${IDLE}s: hung, stopped" \
				"(last suite: $(grep -a '^=== ' "$logf" | tail -1 | cut -c5-); serial log: $logf)"
		elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			log "$cfg: guest did not finish within ${TIMEOUT}s (serial log: $logf)"
		else
			log "$cfg: guest ended (qemu rc=$rc) without a VMRESULT line (serial log: $logf)"
		fi
		RESULTS+=("$cfg: NO RESULT")
		return 1
	fi
	RESULTS+=("$line")
	grep -a '^VMSKIP \|^VMXFAIL \|^VMNOTRUN ' "$logf" | sed "s/^/  [$cfg] /" >&2 || true
	grep -a '^VMSUITE .* result=fail' "$logf" | sed "s/^/  [$cfg] /" >&2 || true
	check_shape "$cfg" "$line" "$want_nodes" "$want_gib" "$want_cg" "$min_pass"
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# Is the guest what its configuration promises, and did enough pass?
check_shape() { # cfg line nodes gib cg min_pass -> 0 ok
	local cfg=$1 line=$2 ok=0 v
	v=$(field kernel "$line")
	[ "$v" = "$KVER" ] || { log "$cfg: guest runs kernel '$v', not $KVER"; ok=1; }
	v=$(field nodes "$line")
	[ "$v" = "$3" ] || { log "$cfg: guest has ${v:-?} NUMA nodes, config promises $3"; ok=1; }
	v=$(field gib "$line")
	[ "${v:-0}" -ge "$4" ] ||
		{ log "$cfg: guest has ${v:-0} 1 GiB hugetlb pages, config promises $4"; ok=1; }
	v=$(field hugetlb_cgroup "$line")
	[ "$v" = "$5" ] ||
		{ log "$cfg: hugetlb cgroup controller on '${v:-?}', config promises $5"; ok=1; }
	v=$(field pass "$line")
	[ "${v:-0}" -ge "$6" ] || { log "$cfg: ${v:-0} suites passed, at least $6 must"; ok=1; }
	v=$(field fail "$line")
	[ "$v" = 0 ] || { log "$cfg: ${v:-?} suites failed"; ok=1; }
	if [ $ok != 0 ]; then
		RESULTS+=("$cfg: WRONG SHAPE OR RESULT (above)")
	fi
	return $ok
}

RESULTS=()
status=0
for cfg in $CONFIGS; do
	run_config "$cfg" || status=1
done
echo
echo "== VM matrix ($([ $QUICK = 1 ] && echo quick || echo full)), kernel $KVER"
for r in "${RESULTS[@]}"; do
	echo "  $r"
done
exit $status
