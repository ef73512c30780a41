#!/usr/bin/env bash
# x86's BPF object (build/heapbpf.bpf.o) must come out byte for byte the same
# whatever the arm64 code is: what arm64 reads differently lives in bpf/arm64/
# (forced in by make ARCH=arm64) and vmlinux/arm64/. Fails if x86's object is
# built from a file under an arm64 directory, or from a file of the repository
# that names arm64 (an #ifdef bpf_target_arm64 in a shared header changes the
# MD5 .debug_line keeps of it, and so x86's bytes).
#   scripts/check-bpf-arch.sh CLANG BUILD
set -euo pipefail

clang=${1:-clang}
build=${2:-build}
mkdir -p "$build"
# the x86 compile of the Makefile's heapbpf.bpf.o rule, preprocessing only
deps=$($clang -g -O2 -target bpf -D__TARGET_ARCH_x86 -Ivmlinux -Ibpf -I"$build" \
	-M -MT x bpf/heapbpf.bpf.c | sed -e 's/^x://' -e 's/\\$//' | tr ' ' '\n' | sed '/^$/d')
rc=0
ours=()
for f in $deps; do
	case "$f" in
	/*) continue ;;
	*arm64/* | *aarch64*)
		echo "check-bpf-arch: x86's BPF object is built from $f" >&2
		rc=1
		;;
	*) ours+=("$f") ;;
	esac
done
[ ${#ours[@]} -gt 0 ] || { echo "check-bpf-arch: no dependency of bpf/heapbpf.bpf.c found" >&2; exit 1; }
if grep -n -i -E 'arm64|aarch64' "${ours[@]}" >&2; then
	echo "check-bpf-arch: the lines above are arm64's in files x86's BPF object is built from;" \
		"move them to bpf/arm64/" >&2
	rc=1
fi
[ $rc -eq 0 ] && echo "check-bpf-arch: x86's BPF object reads ${#ours[@]} files, none arm64's"
exit $rc
