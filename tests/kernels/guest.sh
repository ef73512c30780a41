#!/usr/bin/env bash
# Runs inside a guest booted by tests/kernels/run.sh, chrooted into the
# host's root (read-only over 9p, under a tmpfs overlay): each test named
# in /kout/tests in its own Criterion runner, as scripts/run-tests.sh does,
# one at a time. For each test it writes into /kout (the host's
# build/kernels/out/KERNEL-CGROUP):
#
#   logs/SUITE.TEST.log   the runner's output
#   caps                  "v1-memory yes|no": the kernel has cgroup v1's memory
#                         controller
#   results               "SUITE/TEST PASSED FAILED CRASHED RC SECONDS" once
#                         the runner has ended (no line: it never ended), or
#                         "SUITE/TEST n/a WHY" for a test marked cgroup on a
#                         boot whose hierarchy has no memory controller
#
# and "done" into /kout/status after the last one. The counts are the
# runner's own synthesis line; run.sh reads them.
#
# Usage (by tests/kernels/init): guest.sh REPO BUILD
set -uo pipefail

repo=${1:?usage: $0 REPO BUILD}
build=${2:?usage: $0 REPO BUILD}
cd "$repo" || exit 1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
export HEAPBPF_BUILD=$build
export HEAPBPF_FIXTURES=${HEAPBPF_FIXTURES:-$build/fixtures}
out=/kout
mkdir -p "$out/logs"
: >"$out/results"
{
	echo "kernel: $(uname -r)"
	echo "cgroup: $(cat "$out/cgroup" 2>/dev/null)"
	echo "cpus: $(nproc)"
} >"$out/guest-info"

# Whether this kernel offers the memory controller on cgroup v1 (run.sh
# boots it a second time with it there if so): its v1-only handlers are in
# the kernel (cgroup.event_control's; 6.12 builds them only with
# CONFIG_MEMCG_V1), whichever hierarchy this boot mounted
if grep -qw memcg_write_event_control /proc/kallsyms; then
	echo "v1-memory yes"
else
	echo "v1-memory no"
fi >"$out/caps"

# KERNELS_BEFORE (run.sh): a script of the caller's, run before the tests
# (heapbpf by hand on this kernel), its output in /kout/before.log
if [ -e "$out/before" ]; then
	bash "$out/before" >"$out/before.log" 2>&1
fi

# the memory controller on this boot's hierarchy (init mounted it if it could)
memcg=0
if [ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ] ||
	grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
	memcg=1
fi

while read -r id tag; do
	case $id in '' | '#'*) continue ;; esac
	if [ "${tag#cgroup}" != "$tag" ] && [ "$memcg" = 0 ]; then
		echo "$id n/a no $(cat "$out/cgroup") memory controller in this kernel" >>"$out/results"
		continue
	fi
	log=$out/logs/$(echo "$id" | tr / .).log
	echo "start $id $(date +%s)" >>"$out/progress"
	start=$(date +%s)
	"$build/tests/integration_tests" --jobs 1 --filter "$id" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	read -r p f c < <(sed -n 's/.*Synthesis: Tested: [0-9]* | Passing: \([0-9]*\) | Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2 \3/p' "$log" | tail -1)
	echo "$id ${p:--} ${f:--} ${c:--} $rc $secs" >>"$out/results"
	sync
done <"$out/tests"
echo "done" >>"$out/status"
sync
