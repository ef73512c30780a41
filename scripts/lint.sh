#!/usr/bin/env bash
# Static analysis of heapbpf's own C code: cppcheck and clang-tidy (checks in
# .clang-tidy), both with no warning allowed. Generated code is not ours.
#
# heapbpf builds for x86-64 and arm64: cppcheck takes each architecture's
# paths (-D__x86_64__, then -D__aarch64__), and clang-tidy analyses the
# files with an arm64 branch (#if defined(__aarch64__)) once more as an arm64
# compiler sees them, against the arm64 tree (ARM64_SYSROOT, made by
# scripts/arm64-sysroot.sh; HEAPBPF_SKIP_ARM64=1 leaves that pass out, and
# says so).
#
# Usage: scripts/lint.sh [BUILD] [ARM64_SYSROOT]
set -uo pipefail

build=${1:-build}
arm64_sysroot=${2:-build/arm64-sysroot}
rc=0
srcs=(user/*.c user/*/*.c tests/lib/*.c)
# user/ alone: every include names its folder ("collect/collector.h")
incs=(-Iuser)
# generated headers (skeleton, protobuf) as system headers: their findings are not ours
flags=(-std=gnu11 -D_GNU_SOURCE "${incs[@]}" -Ibpf -isystem "$build" -isystem "$build/proto")

for arch in __x86_64__ __aarch64__; do
	echo "== cppcheck ($arch)"
	cppcheck --quiet --enable=warning,performance,portability --error-exitcode=1 --inline-suppr \
		--std=c11 -D$arch -D_GNU_SOURCE -DPROTOBUF_C_VERSION_NUMBER=1004001 \
		"${incs[@]}" -Ibpf -I"$build" --suppress=missingIncludeSystem --suppress="*:$build/*" \
		"${srcs[@]}" || rc=1
done

echo "== clang-tidy"
tidy() {
	local f=$1 extra=()
	shift
	# the skeleton bpftool 7.1 generates leaks on one out-of-memory path (not our code,
	# reported through the file that includes it)
	[ "$f" = user/sampling/probes.c ] && extra=(--checks=-clang-analyzer-unix.Malloc)
	clang-tidy --quiet "${extra[@]}" "$f" -- "$@" 2>/dev/null || { echo "clang-tidy: $f"; return 1; }
}
export -f tidy
# one file per core: the analyzer is the slow part of make test's checks
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} bash -c 'tidy "$@"' _ {} "${flags[@]}" ||
	rc=1

# the arm64 branches, as the arm64 compiler sees them
mapfile -t arm64_srcs < <(grep -l -E '__aarch64__' "${srcs[@]}")
if [ "${HEAPBPF_SKIP_ARM64:-}" = 1 ]; then
	echo "== clang-tidy (arm64): left out (HEAPBPF_SKIP_ARM64=1)"
elif [ ${#arm64_srcs[@]} -gt 0 ]; then
	echo "== clang-tidy (arm64): ${arm64_srcs[*]}"
	if [ ! -e "$arm64_sysroot/usr/include/bpf/libbpf.h" ]; then
		echo "lint: no arm64 tree in $arm64_sysroot (make ARCH=arm64 makes it)" >&2
		rc=1
	else
		for f in "${arm64_srcs[@]}"; do
			tidy "$f" --target=aarch64-linux-gnu --sysroot="$arm64_sysroot" "${flags[@]}" ||
				rc=1
		done
	fi
fi
[ $rc -eq 0 ] && echo "lint: no warnings"
exit $rc
