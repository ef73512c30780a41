#!/bin/busybox sh
# Runs in the arm64 guest (tests/arm64/init), chrooted into the arm64 tree:
# the example service built for arm64 against a jemalloc with profiling,
# idle, and one heapbpf --pid of it for hbsecs seconds. Everything it
# writes goes to hbout on the host: heapbpf's pprof (heap.pb.gz), its
# stderr (heapbpf.log), its exit status (rc) and this script's log.
set -u
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
$bb mount -t tmpfs tmp /tmp
$bb mount -t tmpfs run /run
# the tree is read-only: busybox's commands as links in /tmp
$bb mkdir -p /tmp/bin
$bb --install -s /tmp/bin
export PATH=/tmp/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ulimit -l unlimited
ulimit -c unlimited # the services inherit it: the second one dumps a core
out=$hbout
exec >"$out/guest.log" 2>&1
echo "kernel $(uname -r) $(uname -m), $(nproc) cpus"
cd "$hbrepo" || exit 1
MALLOC_CONF=prof:true,prof_active:false "$hbbuild/examples/alloc-service-static" -t 4 -d 600 &
svc=$!
sleep 3
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
waitfor() { # WORD FILE: up to 60 s for a line WORD... in FILE
	i=0
	while ! grep -q "^$1" "$2" && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "^$1" "$2"
}
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
sync
