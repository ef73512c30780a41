#!/usr/bin/env bash
# The runner's own check (make test-kernels runs it first): a heapbpf built
# to fail inside the guest must fail that kernel's line. One boot of one
# kernel (KERNELS_CHECK, default bookworm's 6.1) with one test that runs
# heapbpf (KERNELS_CHECK_TEST, default liveheap/cli_outputs_equal_the_dump),
# its heapbpf a script that exits 1 when it finds itself in a guest booted
# by run.sh (heapbpf.repo= on its kernel's command line) and runs the real
# one anywhere else. Passes when run.sh exits non-zero and its line for
# that kernel says the test failed; fails, saying so, otherwise.
#
# Usage: tests/kernels/check-runner.sh BUILD
set -uo pipefail

build=${1:?usage: $0 BUILD}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 1
case $build in /*) ;; *) build=$repo/$build ;; esac
kdir=$build/kernels
kernel=${KERNELS_CHECK:-bookworm}
test=${KERNELS_CHECK_TEST:-liveheap/cli_outputs_equal_the_dump}
mkdir -p "$kdir/check"

bad=$kdir/check/heapbpf
cat >"$bad" <<SCRIPT
#!/bin/sh
# heapbpf built to fail inside a guest of tests/kernels/run.sh
if grep -q 'heapbpf.repo=' /proc/cmdline; then
	echo "heapbpf: built to fail inside the guest (tests/kernels/check-runner.sh)" >&2
	exit 1
fi
exec "$build/heapbpf" "\$@"
SCRIPT
chmod 0755 "$bad"
echo "$test" >"$kdir/check/tests"

out=$(KERNELS=$kernel KERNELS_CGROUPS=v2 KERNELS_JOBS=1 KERNELS_TESTS=$kdir/check/tests \
	KERNELS_HEAPBPF=$bad tests/kernels/run.sh "$build" 2>&1)
rc=$?
echo "$out" >"$kdir/check/run.log"
line=$(grep -m1 "^[^ ].* ($kernel): \|^$kernel " <<<"$out")
if [ "$rc" -ne 0 ] && grep -q ": 0 passed, 1 failed" <<<"$line" && grep -qF "failed: v2: $test" <<<"$out"; then
	echo "heapbpf: kernels: the runner caught a heapbpf built to fail in the guest: $line"
	exit 0
fi
echo "heapbpf: kernels: the runner did NOT catch a heapbpf built to fail in the guest (exit $rc): ${line:-no line for $kernel}; $kdir/check/run.log" >&2
exit 1
