#!/usr/bin/env bash
# Static analysis of heapbpf's own C code: cppcheck and clang-tidy (checks in
# .clang-tidy), both with no warning allowed. Generated code is not ours.
set -uo pipefail

build=${1:-build}
rc=0
srcs=(user/*.c user/*/*.c tests/lib/*.c)
# user/ alone: every include names its folder ("collect/collector.h")
incs=(-Iuser)
# generated headers (skeleton, protobuf) as system headers: their findings are not ours
flags=(-std=gnu11 -D_GNU_SOURCE "${incs[@]}" -Ibpf -isystem "$build" -isystem "$build/proto")

echo "== cppcheck"
cppcheck --quiet --enable=warning,performance,portability --error-exitcode=1 --inline-suppr \
	--std=c11 -D__x86_64__ -D_GNU_SOURCE -DPROTOBUF_C_VERSION_NUMBER=1004001 \
	"${incs[@]}" -Ibpf -I"$build" --suppress=missingIncludeSystem --suppress="*:$build/*" \
	"${srcs[@]}" || rc=1

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
[ $rc -eq 0 ] && echo "lint: no warnings"
exit $rc
