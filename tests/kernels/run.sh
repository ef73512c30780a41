#!/usr/bin/env bash
# make test-kernels: heapbpf's integration tests named in tests/kernels/subset
# on each kernel of the matrix (tests/kernels/fetch.sh: bullseye's 5.10,
# bookworm's 6.1, trixie's 6.12, sid's newest), each booted under qemu with
# software emulation (TCG) from a minimal initramfs (busybox, the kernel's
# own 9p, virtio and overlay modules, tests/kernels/init), on the host's
# root shared read-only over virtio-9p under a tmpfs overlay
# (tests/kernels/guest.sh runs the tests in it).
#
# Two boots per kernel: the memory controller on cgroup v1 (every test of
# the subset; on a kernel without v1's memory controller, said), then on
# cgroup2 (the tests marked "cgroup" in the subset). One line per boot, and
# the table build/kernels/results.md. A guest that has not powered off
# after KERNELS_TIMEOUT seconds (default 5400) is ended and reported as
# such, with the tests it finished counted.
#
#   KERNELS=NAMES         only these kernels (a suite name or the kernel's
#                         release, as in build/kernels/matrix)
#   KERNELS_CGROUPS="v1 v2"   which boots
#   KERNELS_ACCEL=tcg     or kvm, where the machine's KVM boots these kernels
#   KERNELS_TESTS=FILE    another list of tests instead of tests/kernels/subset
#   KERNELS_BEFORE=FILE   a bash script run in the guest, in the repository,
#                         before the tests (heapbpf by hand); its output in
#                         build/kernels/out/KERNEL-CGROUP/before.log
#   KERNELS_APPEND=ARGS   more on the guests' kernel command line (preempt=full)
#
# Exit status 0 only if every boot ran every test of its list and all passed.
#
# Usage: tests/kernels/run.sh BUILD
set -uo pipefail

build=${1:?usage: $0 BUILD}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 1
case $build in /*) ;; *) build=$repo/$build ;; esac
kdir=$build/kernels
timeout_s=${KERNELS_TIMEOUT:-5400}
accel=${KERNELS_ACCEL:-tcg}
cgroups=${KERNELS_CGROUPS:-v1 v2}
subset=${KERNELS_TESTS:-$repo/tests/kernels/subset}
# the modules the guest needs to reach its root and its scratch disk (ext4
# asks the crypto API for crc32c: its softdep, named here); their dependencies come
# from modules.dep, and one that is built in has no file and no entry
WANT_MODULES="virtio_pci 9pnet_virtio 9p overlay virtio_blk crc32c_generic crc32c-cryptoapi ext4"

tests/kernels/fetch.sh "$kdir" >/dev/null || exit 1

# What the tests run, copied once before the first boot: the guests read
# the host's files as they are at each moment (9p), and a rebuild of BUILD
# during the hour the matrix takes would change the binaries under a
# running test (test runners crashed in libc while build/ was relinked).
snap=$kdir/snapshot
rm -rf "$snap"
mkdir -p "$snap/tests"
for f in heapbpf heapbpf.bpf.o examples jemalloc bench fixtures; do
	[ -e "$build/$f" ] && cp -a "$build/$f" "$snap/"
done
cp -a "$build/tests/integration_tests" "$snap/tests/"

# The directory holding the kernel's modules.dep (/lib/modules/VER, or under /usr)
moddir_of() {
	local root=$kdir/root/$1
	if [ -e "$root/usr/lib/modules/$1/modules.dep" ]; then
		echo "$root/usr/lib/modules/$1"
	else
		echo "$root/lib/modules/$1"
	fi
}

vmlinuz_of() {
	local root=$kdir/root/$1
	if [ -e "$root/boot/vmlinuz-$1" ]; then
		echo "$root/boot/vmlinuz-$1"
	else
		echo "$root/usr/lib/modules/$1/vmlinuz"
	fi
}

# Appends the module at path $2 (relative to $1, as modules.dep names it)
# after its dependencies to the list in $order, each once.
add_module() {
	local md=$1 path=$2 dep deps
	grep -qxF "$path" "$order" && return 0
	deps=$(grep "^$path:" "$md/modules.dep" | cut -d: -f2)
	for dep in $deps; do
		add_module "$md" "$dep"
	done
	echo "$path" >>"$order"
}

# build/kernels/initramfs/VER.cpio.gz: /init, busybox and the modules, unpacked
initramfs() {
	local ver=$1 md dir m path f base img
	img=$kdir/initramfs/$ver.cpio.gz
	if [ -s "$img" ] && [ "$img" -nt tests/kernels/init ] && [ "$img" -nt "$0" ]; then
		echo "$img"
		return 0
	fi
	md=$(moddir_of "$ver")
	dir=$kdir/initramfs/$ver
	rm -rf "$dir"
	mkdir -p "$dir/bin" "$dir/modules"
	cp /bin/busybox "$dir/bin/busybox"
	cp tests/kernels/init "$dir/init"
	chmod 0755 "$dir/init"
	order=$dir/modules/paths
	: >"$order"
	for m in $WANT_MODULES; do
		path=$(grep -E "(^|/)$m\.ko(\.[a-z]+)?:" "$md/modules.dep" | cut -d: -f1)
		[ -n "$path" ] && add_module "$md" "$path"
	done
	: >"$dir/modules/order"
	while read -r path; do
		base=$(basename "$path")
		f=$dir/modules/${base%.*z*}
		f=${f%.ko}.ko
		case $path in
		*.xz) xz -dc "$md/$path" >"$f" ;;
		*.zst) zstd -qdc "$md/$path" >"$f" ;;
		*.gz) gzip -dc "$md/$path" >"$f" ;;
		*) cp "$md/$path" "$f" ;;
		esac
		basename "$f" >>"$dir/modules/order"
	done <"$order"
	rm -f "$order"
	(cd "$dir" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$img.tmp" && mv "$img.tmp" "$img"
	echo "$img"
}

# The tests of one boot, with their tags: every test of the subset on v1,
# those marked cgroup on v2
tests_for() {
	if [ "$1" = v1 ]; then
		awk '!/^#/ && NF { print $1, $2 }' "$subset"
	else
		awk '!/^#/ && NF && $2 == "cgroup" { print $1, $2 }' "$subset"
	fi
}

results_md=$kdir/results.md
rows=()
all_ok=1

boot() {
	local ver=$1 suite=$2 cg=$3 out img kernel log rc start secs timedout=0 ntests
	local p f c trc tsecs id passed=0 failed=0 notrun=0 na=0 fails=() note=""
	out=$kdir/out/$ver-$cg
	rm -rf "$out"
	mkdir -p "$out"
	tests_for "$cg" >"$out/tests"
	[ -n "${KERNELS_BEFORE:-}" ] && cp "$KERNELS_BEFORE" "$out/before"
	ntests=$(wc -l <"$out/tests")
	img=$(initramfs "$ver") || return 1
	kernel=$(vmlinuz_of "$ver")
	log=$out/console.log
	# the guest's /tmp: a sparse ext4 image of its own, made afresh each boot
	rm -f "$kdir/scratch.img"
	truncate -s 4G "$kdir/scratch.img"
	mkfs.ext4 -q -F -E lazy_itable_init=1 "$kdir/scratch.img" || return 1
	start=$(date +%s)
	timeout --foreground -k 30 "$timeout_s" qemu-system-x86_64 \
		-accel "$accel" -cpu max -m 2G -smp 2 -nographic -no-reboot \
		-serial "file:$log" -monitor none \
		-kernel "$kernel" -initrd "$img" \
		-append "console=ttyS0 panic=-1 mitigations=off heapbpf.cgroup=$cg heapbpf.repo=$repo heapbpf.build=$snap${KERNELS_APPEND:+ $KERNELS_APPEND}" \
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap,id=hostroot" \
		-virtfs "local,path=$out,mount_tag=out,security_model=none,id=out" \
		-drive "file=$kdir/scratch.img,format=raw,if=virtio,cache=unsafe" \
		</dev/null >"$out/qemu.log" 2>&1
	rc=$?
	rm -f "$kdir/scratch.img"
	secs=$(($(date +%s) - start))
	[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && timedout=1
	while read -r id p f c trc tsecs; do
		if [ "$p" = n/a ]; then
			na=$((na + 1))
			continue
		elif [ "$p" = - ]; then
			failed=$((failed + 1))
			fails+=("$id (no synthesis, exit $trc)")
		elif [ $((f + c)) -gt 0 ] || [ "$trc" -ne 0 ]; then
			failed=$((failed + 1))
			fails+=("$id")
		elif [ "$p" -gt 0 ]; then
			passed=$((passed + 1))
		else
			# Criterion ran nothing, or skipped it: not a pass
			failed=$((failed + 1))
			fails+=("$id (not run by Criterion: $(tail -1 "$out/logs/$(echo "$id" | tr / .).log"))")
		fi
		echo "$id $tsecs" >>"$out/times"
	done < <(cat "$out/results" 2>/dev/null)
	notrun=$((ntests - passed - failed - na))
	[ -s "$out/notes" ] && note=$(paste -sd ';' "$out/notes")
	note=${note//|/-}
	local line="$ver ($suite) cgroup $cg: $passed passed, $failed failed"
	[ "$notrun" -gt 0 ] && line+=", $notrun not run"
	[ "$na" -gt 0 ] && line+=", $na not applicable (no memory controller on cgroup $cg)"
	if [ "$timedout" = 1 ]; then
		line+=", guest ended after the ${timeout_s} s timeout"
	elif ! grep -q '^done$' "$out/status" 2>/dev/null; then
		line+=", guest stopped early ($(paste -sd ' ' "$out/status" 2>/dev/null || echo "no status"); qemu exit $rc; $log)"
	fi
	line+=" ($secs s)"
	[ -n "$note" ] && line+=" [$note]"
	echo "$line"
	[ ${#fails[@]} -gt 0 ] && printf '    failed: %s\n' "${fails[@]}"
	{ [ "$failed" -eq 0 ] && [ "$notrun" -eq 0 ]; } || all_ok=0
	local failed_list
	failed_list=$(printf '%s, ' "${fails[@]}")
	failed_list=${failed_list%, }
	[ "$notrun" -gt 0 ] && failed_list+="${failed_list:+; }$notrun not run"
	[ "$timedout" = 1 ] && failed_list+=" (timeout)"
	[ "$na" -gt 0 ] && failed_list+="${failed_list:+; }$na n/a: no memory controller on cgroup $cg"
	rows+=("| $ver | $suite | $cg | $passed/$((ntests - na)) | ${failed_list:--} | $secs s |")
}

while read -r ver suite _ _; do
	if [ -n "${KERNELS:-}" ] && ! grep -qwF -e "$ver" -e "$suite" <<<"$KERNELS"; then
		continue
	fi
	for cg in $cgroups; do
		boot "$ver" "$suite" "$cg"
	done
done <"$kdir/matrix"

{
	echo "| kernel | suite | cgroup | passed | failed | time (TCG) |"
	echo "| --- | --- | --- | --- | --- | --- |"
	printf '%s\n' "${rows[@]}"
	echo
	echo "Tests: $(awk '!/^#/ && NF { printf "%s%s", sep, $1; sep = ", " }' "$subset") (cgroup v2 boots: those marked cgroup in tests/kernels/subset)."
} >"$results_md"
echo "heapbpf: kernels: $results_md"
[ "$all_ok" = 1 ]
