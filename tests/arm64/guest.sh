#!/bin/busybox sh
# Runs in the arm64 guest (tests/arm64/init), chrooted into the arm64 tree
# (read-only). Everything it writes goes to hbout on the host:
#
#  1. the example service built for arm64 against a jemalloc with profiling
#     (64 KiB pages), idle, and one heapbpf --pid of it for hbsecs seconds:
#     heapbpf's pprof (heap.pb.gz), its stderr (heapbpf.log), its exit
#     status (rc);
#  2. with hbcore=1, an arm64 core of a paused service for the host to read,
#     and what heapbpf --live-heap read of it (core, live.folded);
#  3. the integration tests named in hbout/tests, in one Criterion runner,
#     each in its own process: its verbose output in logs/subset.log, read
#     on the host as it is written (a test's [PASS] or [FAIL] line).
#
# and this script's log (guest.log), "done" into status at the end.
set -u
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
# Criterion's runners share an arena through shm_open
$bb mkdir -p /dev/shm && $bb mount -t tmpfs shm /dev/shm
$bb mount -t tmpfs tmp /tmp
$bb mount -t tmpfs run /run
# the tree has no core utilities of its own: busybox's as links in /tmp, after
# what it has (nm; /bin/sh is busybox, linked by run.sh)
$bb mkdir -p /tmp/bin
$bb --install -s /tmp/bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:/tmp/bin
export HOME=/root
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# cgroup2 with the memory controller for the children (watch's tests make theirs)
mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo +memory >/sys/fs/cgroup/cgroup.subtree_control
ulimit -l unlimited
out=$hbout
exec >"$out/guest.log" 2>&1
echo "kernel $(uname -r) $(uname -m), $(nproc) cpus"
cd "$hbrepo" || exit 1
waitfor() { # WORD FILE: up to 60 s for a line WORD... in FILE
	i=0
	while ! grep -q "^$1" "$2" && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "^$1" "$2"
}
MALLOC_CONF=prof:true,prof_active:false "$hbbuild/examples/alloc-service-static" -t 4 -d 600 \
	>/tmp/idle.log 2>&1 &
svc=$!
# its own word that its threads run
waitfor alloc-service: /tmp/idle.log
"$hbbuild/heapbpf" --pid "$svc" -d "$hbsecs" -o "$out/heap.pb.gz" 2>"$out/heapbpf.log"
echo $? >"$out/rc"
echo "heapbpf exited $(cat "$out/rc")"
kill "$svc"
wait "$svc"
echo "alloc-service exited $?"

# An arm64 core for the host to read: the service sampling from its start
# (prof_active:true) and paused, its sampled live heap read by heapbpf
# --live-heap (live.folded), then dumped by the kernel (core, SIGABRT)
# while still paused: the host's heapbpf report of the core must give the
# same stacks.
if [ "${hbcore:-0}" = 1 ]; then
ulimit -c unlimited # the service inherits it: it dumps a core
mkfifo /tmp/ctl
# two threads, and freed pages given back at once: a core of tens of MiB to copy
MALLOC_CONF=prof:true,prof_active:true,dirty_decay_ms:0,muzzy_decay_ms:0 \
	"$hbbuild/examples/alloc-service-static" -t 2 --control </tmp/ctl >/tmp/control.log &
svc=$!
exec 3>/tmp/ctl
if waitfor ready /tmp/control.log; then
	sleep 2
	echo pause >&3
	waitfor paused /tmp/control.log
	"$hbbuild/heapbpf" --pid "$svc" --live-heap -f folded -o "$out/live.folded" 2>"$out/live.log"
	echo "heapbpf --live-heap exited $?"
	# in memory first: the kernel's write of it over 9p under TCG takes minutes
	echo /tmp/core >/proc/sys/kernel/core_pattern
	t0=$(date +%s)
	kill -ABRT "$svc" # not QUIT: sh starts background jobs with SIGQUIT ignored
	(sleep 180 && kill -KILL "$svc") 2>/dev/null &
fi
wait "$svc"
echo "alloc-service (control) exited $? after $(($(date +%s) - t0)) s"
ls -ls /tmp/core
cp /tmp/core "$out/core"
exec 3>&-
cp /tmp/control.log "$out/control.log"
ulimit -c 0
fi
sync

# 3. the integration subset. The tests on jemalloc 5.3.0's fixture
# (bin/je530-static: the example against 5.3.0 built from Debian's source
# with profiling) take the arm64 example, which is just that, with 64 KiB pages.
export HEAPBPF_BUILD=$hbbuild
export HEAPBPF_FIXTURES=/tmp/fixtures
# the harness's guards against a hang, ten times longer under emulation
export HEAPBPF_TEST_GUARD_FACTOR=10
mkdir -p /tmp/fixtures/bin
ln -s "$hbbuild/examples/alloc-service-static" /tmp/fixtures/bin/je530-static
mkdir -p "$out/logs"
# one runner for them all (under emulation a runner takes seconds to start),
# each test in its own process as always; its verbose lines say how each ended
pattern=$(grep -v -e '^#' -e '^$' "$out/tests" | tr '\n' '|' | sed 's/|$//')
start=$(date +%s)
"$hbbuild/tests/integration_tests" --jobs 1 --verbose --filter "@($pattern)" \
	>"$out/logs/subset.log" 2>&1
echo "runner exited $? after $(($(date +%s) - start)) s"
sync
echo done >"$out/status"
sync
