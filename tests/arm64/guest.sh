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
sync
