#!/usr/bin/env bash
# make test-kernels: heapbpf's integration tests named in tests/kernels/subset
# on each kernel of the matrix (tests/kernels/fetch.sh: bullseye's 5.10,
# bookworm's 6.1, trixie's 6.12, sid's newest), each booted under qemu with
# software emulation (TCG) from a minimal initramfs (busybox, the kernel's
# own 9p, virtio and overlay modules, tests/kernels/init), on the host's
# root shared read-only over virtio-9p under a tmpfs overlay
# (tests/kernels/guest.sh runs the tests in it).
#
# The boots of a kernel: first with the memory controller on cgroup2, every
# test of the subset; then, only on a kernel that also offers the memory
# controller on cgroup v1 (the guest looks: tests/kernels/guest.sh), a
# second boot with it there, the tests marked "cgroup" in the subset alone
# (what cgroup v1 changes). KERNELS_JOBS kernels (default 2) boot at once:
# a guest's tests wait on the kernel (timers, I/O, the OOM killer) for much
# of their time, which the other guest uses. One line per kernel, and the
# table build/kernels/results.md with each boot's time and its tests'. A
# guest that has not powered off after KERNELS_TIMEOUT seconds (default
# 5400) is ended and reported as such, with the tests it finished counted.
#
#   KERNELS=NAMES         only these kernels (a suite name or the kernel's
#                         release, as in build/kernels/matrix)
#   KERNELS_CGROUPS=auto  the boots above; or a list ("v1", "v2 v1"): those
#                         boots, every test in the first, the cgroup ones after
#   KERNELS_JOBS=2        kernels booted at once
#   KERNELS_ACCEL=tcg     or kvm, where the machine's KVM boots these kernels
#   KERNELS_TESTS=FILE    another list of tests instead of tests/kernels/subset
#   KERNELS_BEFORE=FILE   a bash script run in the guest, in the repository,
#                         before the tests (heapbpf by hand); its output in
#                         build/kernels/out/KERNEL-CGROUP/before.log
#   KERNELS_APPEND=ARGS   more on the guests' kernel command line (preempt=full)
#   KERNELS_HEAPBPF=FILE  the guests run this instead of BUILD/heapbpf
#                         (tests/kernels/check-runner.sh: one built to fail)
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
cgroups=${KERNELS_CGROUPS:-auto}
jobs=${KERNELS_JOBS:-2}
subset=${KERNELS_TESTS:-$repo/tests/kernels/subset}
case $subset in /*) ;; *) subset=$repo/$subset ;; esac
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
if [ -n "${KERNELS_HEAPBPF:-}" ]; then
	rm -f "$snap/heapbpf"
	cp "$KERNELS_HEAPBPF" "$snap/heapbpf" || exit 1
fi

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

# The tests of one boot of kernel ver, with their tags (tests/kernels/subset):
# on the cgroup2 boot ("all") every test but those marked once, which run
# on the matrix's oldest kernel alone; on the v1 boot ("cgroup") those
# marked cgroup, and those marked cgroup-once on the oldest kernel
oldest=$(awk 'NR == 1 { print $1 }' "$kdir/matrix")
tests_for() {
	local o=0
	[ "$2" = "$oldest" ] && o=1
	awk -v which="$1" -v oldest="$o" '
		/^#/ || !NF { next }
		which == "all" && ($2 != "once" || oldest) { print $1, $2 }
		which == "cgroup" && ($2 == "cgroup" || ($2 == "cgroup-once" && oldest)) { print $1, $2 }
	' "$subset"
}

results_md=$kdir/results.md

# One boot of kernel ver with cgroup cg, running the tests of which (all,
# cgroup). Leaves in build/kernels/out/VER-CG: summary ("PASSED FAILED
# NOTRUN NA SECONDS TESTSECONDS TIMEDOUT"), failed (one a line), note.
boot() {
	local ver=$1 cg=$2 which=$3 out img kernel log rc start secs timedout=0 ntests
	local p f c trc tsecs id passed=0 failed=0 notrun=0 na=0 tsum=0 scratch
	out=$kdir/out/$ver-$cg
	rm -rf "$out"
	mkdir -p "$out"
	tests_for "$which" "$ver" >"$out/tests"
	[ -n "${KERNELS_BEFORE:-}" ] && cp "$KERNELS_BEFORE" "$out/before"
	ntests=$(wc -l <"$out/tests")
	img=$(initramfs "$ver") || return 1
	kernel=$(vmlinuz_of "$ver")
	log=$out/console.log
	# the guest's /tmp: a sparse ext4 image of its own, made afresh each boot
	scratch=$kdir/scratch-$ver-$cg.img
	rm -f "$scratch"
	truncate -s 4G "$scratch"
	mkfs.ext4 -q -F -E lazy_itable_init=1 "$scratch" || return 1
	start=$(date +%s)
	timeout --foreground -k 30 "$timeout_s" qemu-system-x86_64 \
		-accel "$accel" -cpu max -m 2G -smp 2 -nographic -no-reboot \
		-serial "file:$log" -monitor none \
		-kernel "$kernel" -initrd "$img" \
		-append "console=ttyS0 panic=-1 mitigations=off heapbpf.cgroup=$cg heapbpf.repo=$repo heapbpf.build=$snap${KERNELS_APPEND:+ $KERNELS_APPEND}" \
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap,id=hostroot" \
		-virtfs "local,path=$out,mount_tag=out,security_model=none,id=out" \
		-drive "file=$scratch,format=raw,if=virtio,cache=unsafe" \
		</dev/null >"$out/qemu.log" 2>&1
	rc=$?
	rm -f "$scratch"
	secs=$(($(date +%s) - start))
	[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && timedout=1
	: >"$out/failed"
	while read -r id p f c trc tsecs; do
		if [ "$p" = n/a ]; then
			na=$((na + 1))
			continue
		fi
		tsum=$((tsum + tsecs))
		if [ "$p" = - ]; then
			failed=$((failed + 1))
			echo "$id (no synthesis, exit $trc)" >>"$out/failed"
		elif [ $((f + c)) -gt 0 ] || [ "$trc" -ne 0 ]; then
			failed=$((failed + 1))
			echo "$id" >>"$out/failed"
		elif [ "$p" -gt 0 ]; then
			passed=$((passed + 1))
		else
			# Criterion ran nothing, or skipped it: not a pass
			failed=$((failed + 1))
			echo "$id (not run by Criterion: $(tail -1 "$out/logs/$(echo "$id" | tr / .).log"))" >>"$out/failed"
		fi
		echo "$id $tsecs" >>"$out/times"
	done < <(cat "$out/results" 2>/dev/null)
	notrun=$((ntests - passed - failed - na))
	: >"$out/note"
	[ -s "$out/notes" ] && paste -sd ';' "$out/notes" | tr '|' - >"$out/note"
	if [ "$timedout" = 1 ]; then
		echo "guest ended after the ${timeout_s} s timeout" >>"$out/note"
	elif ! grep -q '^done$' "$out/status" 2>/dev/null; then
		echo "guest stopped early ($(paste -sd ' ' "$out/status" 2>/dev/null || echo "no status"); qemu exit $rc; $log)" >>"$out/note"
	fi
	echo "$passed $failed $notrun $na $secs $tsum $timedout" >"$out/summary"
}

# Whether the guest of boot out found the memory controller on cgroup v1
v1_memory() {
	grep -qx "v1-memory yes" "$1/caps" 2>/dev/null
}

# All boots of kernel ver, one after the other; its line in out/VER.line
# and its table rows in out/VER.rows, its status in out/VER.ok
kernel_boots() {
	local ver=$1 suite=$2 cg which boots=() b out
	local passed=0 failed=0 notrun=0 na=0 secs=0 tsum=0 p f n a s t to parts="" ok=1
	if [ "$cgroups" = auto ]; then
		boot "$ver" v2 all
		boots=(v2)
		if v1_memory "$kdir/out/$ver-v2"; then
			boot "$ver" v1 cgroup
			boots+=(v1)
		fi
	else
		which=all
		for cg in $cgroups; do
			boot "$ver" "$cg" "$which"
			boots+=("$cg")
			which=cgroup
		done
	fi
	: >"$kdir/out/$ver.rows"
	: >"$kdir/out/$ver.failed"
	for b in "${boots[@]}"; do
		out=$kdir/out/$ver-$b
		if ! read -r p f n a s t to <"$out/summary"; then
			p=0 f=0 n=$(wc -l <"$out/tests") a=0 s=0 t=0 to=0
			echo "boot not made (initramfs or scratch disk)" >>"$out/note"
		fi
		passed=$((passed + p)) failed=$((failed + f)) notrun=$((notrun + n)) na=$((na + a))
		secs=$((secs + s)) tsum=$((tsum + t))
		{ [ "$f" -eq 0 ] && [ "$n" -eq 0 ] && [ "$to" = 0 ]; } || ok=0
		parts+="${parts:+, }cgroup $b $p/$((p + f + n))"
		[ "$a" -gt 0 ] && parts+=" ($a n/a)"
		local fl note
		fl=$(paste -sd ';' "$out/failed" 2>/dev/null | sed 's/;/, /g')
		[ "$n" -gt 0 ] && fl+="${fl:+; }$n not run"
		note=$(paste -sd ';' "$out/note" 2>/dev/null | sed 's/;/; /g')
		[ -n "$note" ] && fl+="${fl:+; }$note"
		sed "s|^|$b: |" "$out/failed" >>"$kdir/out/$ver.failed"
		echo "| $ver | $suite | $b | $p/$((p + f + n)) | ${fl:--} | $((s - t)) s | $t s |" >>"$kdir/out/$ver.rows"
	done
	local line="$ver ($suite): $passed passed, $failed failed"
	[ "$notrun" -gt 0 ] && line+=", $notrun not run"
	line+=" ($parts; $secs s: boots $((secs - tsum)) s, tests $tsum s)"
	echo "$line" >"$kdir/out/$ver.line"
	echo "$ok" >"$kdir/out/$ver.ok"
}

mkdir -p "$kdir/out"
kernels=()
while read -r ver suite _ _; do
	if [ -n "${KERNELS:-}" ] && ! grep -qwF -e "$ver" -e "$suite" <<<"$KERNELS"; then
		continue
	fi
	kernels+=("$ver $suite")
	rm -f "$kdir/out/$ver.line" "$kdir/out/$ver.rows" "$kdir/out/$ver.ok"
done <"$kdir/matrix"

# the initramfs of each, made before any guest starts (one at a time)
for k in "${kernels[@]}"; do
	initramfs "${k%% *}" >/dev/null || exit 1
done

start_all=$(date +%s)
running=0
for k in "${kernels[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	kernel_boots $k &
	running=$((running + 1))
done
wait
total=$(($(date +%s) - start_all))

all_ok=1
{
	echo "| kernel | suite | cgroup | passed | failed | boot (TCG) | tests |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
} >"$results_md"
for k in "${kernels[@]}"; do
	ver=${k%% *}
	if [ -s "$kdir/out/$ver.line" ]; then
		cat "$kdir/out/$ver.line"
		sed 's/^/    failed: /' "$kdir/out/$ver.failed"
		cat "$kdir/out/$ver.rows" >>"$results_md"
	else
		echo "$ver (${k#* }): not run"
	fi
	[ "$(cat "$kdir/out/$ver.ok" 2>/dev/null)" = 1 ] || all_ok=0
done
{
	echo
	echo "Tests: $(awk '!/^#/ && NF { printf "%s%s%s", sep, $1, (NF > 1 ? " (" $2 ")" : ""); sep = ", " }' "$subset"): on the cgroup2 boot all but those marked once, which run on $oldest alone; on a cgroup v1 boot those marked cgroup, and cgroup-once on $oldest (tests/kernels/subset)."
	echo "Wall time: $total s, $jobs kernels at a time (\"boot\": a boot's time less its tests')."
} >>"$results_md"
echo "heapbpf: kernels: $total s; $results_md"
[ "$all_ok" = 1 ]
