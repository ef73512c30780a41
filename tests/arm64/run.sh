#!/usr/bin/env bash
# heapbpf built for arm64 (make ARCH=arm64), run on Debian's arm64 kernels
# under qemu-system-aarch64 (-M virt -cpu max, software emulation): each
# kernel boots a busybox initramfs (tests/arm64/init) that mounts the arm64
# tree heapbpf was built against (SYSROOT, scripts/arm64-sysroot.sh) read-only
# (under a tmpfs overlay) as its root and the repository over virtio-9p, and
# runs tests/arm64/guest.sh: the example service, idle, and one heapbpf --pid
# of it; an arm64 core (on the suites of ARM64_CORE_SUITES); the integration
# tests of tests/arm64/subset, each in its own runner. Then on the host, for
# each kernel: heapbpf exited 0 (no drops: that is exit 4), its summary
# counted samples and warned of nothing (drops, read faults), and this
# machine's heapbpf report reads the pprof it wrote as folded stacks;
# heapbpf report of the core the arm64 kernel dumped of a paused service
# gives the stacks heapbpf --live-heap read of it in the guest; every test
# of the subset ran and passed. One line per kernel and one per test; the
# guests' files in BUILD/run/KVER/.
#
#   ARM64_SUITES="bookworm trixie"  the suites whose kernel boots (bookworm: 6.1, trixie: 6.12)
#   ARM64_CORE_SUITES=trixie        the suites whose guest also dumps a core (two
#                                   minutes of software emulation each)
#   ARM64_TESTS=FILE                another list of tests than tests/arm64/subset
#   ARM64_SECONDS=5                 heapbpf's duration in the guest
#   ARM64_TIMEOUT=2400              seconds before a guest that has not powered off is ended
#   ARM64_PARALLEL=1                the kernels boot side by side (0: one after another)
#   ARM64_COUNTS=FILE               "passed failed" written there (make test's group arm64:
#                                   each kernel's line and each test count one)
#
# Under make test (HEAPBPF_TEST_SLOTS) the guests hold one of the integration
# tests' slots (scripts/run-tests.sh) while they run: no serial test, one
# that measures in time, runs beside them.
#
# Usage: tests/arm64/run.sh BUILD SYSROOT HOST_HEAPBPF
set -uo pipefail

build=${1:?usage: $0 BUILD SYSROOT HOST_HEAPBPF}
sysroot=${2:?usage: $0 BUILD SYSROOT HOST_HEAPBPF}
host_heapbpf=${3:?usage: $0 BUILD SYSROOT HOST_HEAPBPF}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 1
abs() { case $1 in /*) echo "$1" ;; *) echo "$repo/$1" ;; esac; }
build=$(abs "$build")
sysroot=$(abs "$sysroot")
host_heapbpf=$(abs "$host_heapbpf")
kdir=$(abs "${ARM64_KERNELS:-build/arm64-kernels}")
suites=${ARM64_SUITES:-bookworm trixie}
secs=${ARM64_SECONDS:-5}
timeout_s=${ARM64_TIMEOUT:-2400}
core_suites=${ARM64_CORE_SUITES-trixie}
tests=$(abs "${ARM64_TESTS:-tests/arm64/subset}")
WANT_MODULES="virtio_pci 9pnet_virtio 9p"

for f in "$build/heapbpf" "$build/examples/alloc-service-static" "$build/tests/integration_tests" \
	"$sysroot/bin/busybox" "$tests"; do
	[ -e "$f" ] || {
		echo "heapbpf: arm64: $f is missing (make ARCH=arm64 test-arm64 builds it)" >&2
		exit 1
	}
done
# mount points in the tree for the guest's chroot, and a /bin/sh (the tests'
# system() and popen()): the tree has busybox, no shell package
mkdir -p "$sysroot/proc" "$sysroot/sys" "$sysroot/run" "$sysroot/tmp" "$sysroot$repo"
[ -e "$sysroot/bin/sh" ] || ln -s busybox "$sysroot/bin/sh"

moddir_of() {
	if [ -e "$1/usr/lib/modules/$2/modules.dep" ]; then
		echo "$1/usr/lib/modules/$2"
	else
		echo "$1/lib/modules/$2"
	fi
}

# KDIR/initramfs/KVER.cpio.gz: /init, busybox and the modules (with their dependencies, in order)
initramfs() {
	local root=$1 kver=$2 md dir order path f m img
	img=$kdir/initramfs/$kver.cpio.gz
	md=$(moddir_of "$root" "$kver")
	dir=$kdir/initramfs/$kver
	rm -rf "$dir"
	mkdir -p "$dir/bin" "$dir/modules"
	cp "$sysroot/bin/busybox" "$dir/bin/busybox"
	cp tests/arm64/init "$dir/init"
	order=$dir/modules/paths
	: >"$order"
	add() {
		local p=$1 d
		grep -qxF "$p" "$order" && return 0
		for d in $(grep "^$p:" "$md/modules.dep" | cut -d: -f2); do
			add "$d"
		done
		echo "$p" >>"$order"
	}
	for m in $WANT_MODULES; do
		path=$(grep -E "(^|/)$m\.ko(\.[a-z]+)?:" "$md/modules.dep" | cut -d: -f1)
		[ -n "$path" ] && add "$path"
	done
	: >"$dir/modules/order"
	while read -r path; do
		f=$(basename "$path")
		f=${f%.xz}
		f=${f%.zst}
		f=${f%.gz}
		case $path in
		*.xz) xz -dc "$md/$path" >"$dir/modules/$f" ;;
		*.zst) zstd -qdc "$md/$path" >"$dir/modules/$f" ;;
		*.gz) gzip -dc "$md/$path" >"$dir/modules/$f" ;;
		*) cp "$md/$path" "$dir/modules/$f" ;;
		esac
		echo "$f" >>"$dir/modules/order"
	done <"$order"
	rm "$order"
	(cd "$dir" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$img"
	echo "$img"
}

if [ -n "${HEAPBPF_TEST_SLOTS:-}" ]; then
	mkdir -p "$HEAPBPF_TEST_SLOTS"
	exec {slot}>"$HEAPBPF_TEST_SLOTS/0"
	flock "$slot"
fi

# One kernel of SUITE: fetched, booted, its guest's files checked; the lines
# it prints go to BUILD/run/SUITE.report, its counts ("passed failed") to
# BUILD/run/SUITE.counts.
one_kernel() {
	local suite=$1 kver root vmlinuz img out core_on t0 qrc took rc summary samples warns
	local report core npass=0 nall=0 tfail=0 passed=0 failed=0 id r p f c trc tsecs line
	kver=$(tests/arm64/fetch-kernel.sh "$kdir" "$suite") || {
		echo "FAIL arm64 $suite: the kernel did not fetch"
		echo "0 1" >"$build/run/$suite.counts"
		return 1
	}
	root=$kdir/root/$kver
	vmlinuz=$root/boot/vmlinuz-$kver
	[ -e "$vmlinuz" ] || vmlinuz=$root/usr/lib/modules/$kver/vmlinuz
	img=$(initramfs "$root" "$kver")
	out=$build/run/$kver
	rm -rf "$out"
	mkdir -p "$out"
	grep -v -e '^#' -e '^$' "$tests" >"$out/tests"
	core_on=0
	case " $core_suites " in *" $suite "*) core_on=1 ;; esac
	t0=$(date +%s)
	timeout --foreground -k 30 "$timeout_s" qemu-system-aarch64 -M virt -cpu max -smp 2 -m 2048 \
		-accel tcg -nographic -no-reboot -kernel "$vmlinuz" -initrd "$img" \
		-append "console=ttyAMA0 panic=-1 quiet hbrepo=$repo hbbuild=$build hbout=$out hbsecs=$secs hbcore=$core_on" \
		-virtfs "local,path=$sysroot,mount_tag=hbroot,security_model=none,readonly=on" \
		-virtfs "local,path=$repo,mount_tag=hbrepo,security_model=passthrough" \
		</dev/null >"$out/console.log" 2>&1
	qrc=$?
	took=$(($(date +%s) - t0))
	rc=$(cat "$out/rc" 2>/dev/null || echo none)
	summary=$(grep -m1 ' samples, ' "$out/heapbpf.log" 2>/dev/null)
	samples=$(sed -n 's/^heapbpf: \([0-9][0-9]*\) samples, .*/\1/p' <<<"$summary")
	# dropped events, read faults: every warning heapbpf prints fails the run
	warns=$(grep -c -E 'WARNING|dropped' "$out/heapbpf.log" 2>/dev/null)
	report=$("$host_heapbpf" report "$out/heap.pb.gz" -f folded -o - 2>"$out/report.err" | wc -l)
	# the guest's core of the paused service, read here: the stacks and
	# amounts its --live-heap read in the guest (live.folded)
	core=differs
	[ $core_on = 1 ] || core="not dumped (ARM64_CORE_SUITES)"
	if [ $core_on = 1 ] && [ -s "$out/core" ] && [ -s "$out/live.folded" ] &&
		"$host_heapbpf" report "$out/core" --binary-path "$sysroot" -f folded \
			-o "$out/core.folded" 2>"$out/core.log" &&
		cmp -s <(sort "$out/live.folded") <(sort "$out/core.folded"); then
		core="the same $(wc -l <"$out/core.folded") stacks as --live-heap"
	fi
	# the subset: each test's [PASS] or [FAIL] line in the runner's verbose
	# output (a guest cut short keeps those of the tests that ended)
	while read -r id; do
		nall=$((nall + 1))
		r=$(grep -m1 -E "^\[(PASS|FAIL)\] ${id%%/*}::${id#*/}: " "$out/logs/subset.log" 2>/dev/null)
		tsecs=$(sed -n 's/.*(\([0-9.]*\)s)$/\1/p' <<<"$r")
		case $r in
		"[PASS]"*)
			npass=$((npass + 1))
			passed=$((passed + 1))
			echo "  ok   $kver $id (${tsecs}s)"
			;;
		*)
			tfail=1
			failed=$((failed + 1))
			echo "  FAIL $kver $id (${r:-never ended}; $out/logs/subset.log)"
			;;
		esac
	done <"$out/tests"
	line="arm64 $kver ($suite): ${took}s, heapbpf exit $rc, ${samples:-no} samples, $warns warnings, report $report stacks; core: $core; tests: $npass of $nall passed"
	if [ $qrc -ne 0 ] || [ "$rc" != 0 ] || [ -z "$samples" ] || [ "$samples" = 0 ] ||
		[ "$warns" != 0 ] || [ "$report" = 0 ] || [ "$core" = differs ] || [ $tfail = 1 ]; then
		echo "FAIL $line (qemu $qrc; $out)"
		failed=$((failed + 1))
	else
		echo "ok   $line"
		passed=$((passed + 1))
	fi
	echo "$passed $failed" >"$build/run/$suite.counts"
	[ $failed = 0 ]
}

# the kernels boot side by side (ARM64_PARALLEL=0: one after another)
mkdir -p "$build/run"
t_all=$(date +%s)
for suite in $suites; do
	rm -f "$build/run/$suite.counts" "$build/run/$suite.report"
	if [ "${ARM64_PARALLEL:-1}" = 1 ]; then
		one_kernel "$suite" >"$build/run/$suite.report" 2>&1 &
	else
		one_kernel "$suite" >"$build/run/$suite.report" 2>&1
	fi
done
wait
fail=0
npassed=0
nfailed=0
for suite in $suites; do
	cat "$build/run/$suite.report" 2>/dev/null
	read -r p f <"$build/run/$suite.counts" 2>/dev/null || { p=0; f=1; }
	npassed=$((npassed + p))
	nfailed=$((nfailed + f))
done
[ $nfailed = 0 ] || fail=1
echo "arm64: $npassed passed, $nfailed failed in $(($(date +%s) - t_all)) s"
[ -n "${ARM64_COUNTS:-}" ] && echo "$npassed $nfailed" >"$ARM64_COUNTS"
exit $fail
