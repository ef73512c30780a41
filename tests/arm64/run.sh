#!/usr/bin/env bash
# heapbpf built for arm64 (make ARCH=arm64), run on Debian's arm64 kernels
# under qemu-system-aarch64 (-M virt -cpu max, software emulation): each
# kernel boots a busybox initramfs (tests/arm64/init) that mounts the arm64
# tree heapbpf was built against (SYSROOT, scripts/arm64-sysroot.sh) read-only
# as its root and the repository over virtio-9p, and runs tests/arm64/guest.sh:
# the example service, idle, and one heapbpf --pid of it. Then on the host,
# for each kernel: heapbpf exited 0 (no drops: that is exit 4), its summary
# counted samples and warned of nothing (drops, read faults), and this
# machine's heapbpf report reads the pprof it wrote as folded stacks; and
# heapbpf report of the core the arm64 kernel dumped of a paused service
# gives the stacks heapbpf --live-heap read of it in the guest. One line per
# kernel; the guests' files in BUILD/run/KVER/.
#
#   ARM64_SUITES="bookworm trixie"  the suites whose kernel boots (bookworm: 6.1, trixie: 6.12)
#   ARM64_SECONDS=5                 heapbpf's duration in the guest
#   ARM64_TIMEOUT=900               seconds before a guest that has not powered off is ended
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
timeout_s=${ARM64_TIMEOUT:-900}
WANT_MODULES="virtio_pci 9pnet_virtio 9p"

for f in "$build/heapbpf" "$build/examples/alloc-service-static" "$sysroot/bin/busybox"; do
	[ -e "$f" ] || {
		echo "heapbpf: arm64: $f is missing (make ARCH=arm64 test-arm64 builds it)" >&2
		exit 1
	}
done
# mount points in the tree for the guest's chroot
mkdir -p "$sysroot/proc" "$sysroot/sys" "$sysroot/run" "$sysroot/tmp" "$sysroot$repo"

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

fail=0
for suite in $suites; do
	kver=$(tests/arm64/fetch-kernel.sh "$kdir" "$suite") || {
		echo "arm64 $suite: the kernel did not fetch"
		fail=1
		continue
	}
	root=$kdir/root/$kver
	vmlinuz=$root/boot/vmlinuz-$kver
	[ -e "$vmlinuz" ] || vmlinuz=$root/usr/lib/modules/$kver/vmlinuz
	img=$(initramfs "$root" "$kver")
	out=$build/run/$kver
	rm -rf "$out"
	mkdir -p "$out"
	t0=$(date +%s)
	timeout --foreground -k 30 "$timeout_s" qemu-system-aarch64 -M virt -cpu max -smp 2 -m 2048 \
		-accel tcg -nographic -no-reboot -kernel "$vmlinuz" -initrd "$img" \
		-append "console=ttyAMA0 panic=-1 quiet hbrepo=$repo hbbuild=$build hbout=$out hbsecs=$secs" \
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
	if [ -s "$out/core" ] && [ -s "$out/live.folded" ] &&
		"$host_heapbpf" report "$out/core" --binary-path "$sysroot" -f folded \
			-o "$out/core.folded" 2>"$out/core.log" &&
		cmp -s <(sort "$out/live.folded") <(sort "$out/core.folded"); then
		core="the same $(wc -l <"$out/core.folded") stacks as --live-heap"
	fi
	line="arm64 $kver ($suite): ${took}s, heapbpf exit $rc, ${samples:-no} samples, $warns warnings, report $report stacks; core: $core"
	if [ $qrc -ne 0 ] || [ "$rc" != 0 ] || [ -z "$samples" ] || [ "$samples" = 0 ] ||
		[ "$warns" != 0 ] || [ "$report" = 0 ] || [ "$core" = differs ]; then
		echo "FAIL $line (qemu $qrc; $out)"
		fail=1
	else
		echo "ok   $line"
	fi
done
exit $fail
