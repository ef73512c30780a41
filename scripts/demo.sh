#!/usr/bin/env bash
# make demo: start the example service with jemalloc profiling built in but
# idle, profile it for a few seconds with heapbpf, and show what came out.
set -euo pipefail

build=${1:-build}
out=${DEMO_OUT:-demo-output}
mkdir -p "$out"

if [ "$(id -u)" -ne 0 ]; then
	echo "demo: heapbpf needs root (BPF and uprobes); run: sudo make demo" >&2
	exit 1
fi

echo "== starting the example service: MALLOC_CONF=prof:true,prof_active:false"
MALLOC_CONF=prof:true,prof_active:false "$build/examples/alloc-service-static" --threads 4 &
svc=$!
trap 'kill $svc 2>/dev/null; wait $svc 2>/dev/null || true' EXIT
sleep 1

echo "== heapbpf --pid $svc --duration 5 -o $out/heap.pb.gz"
"$build/heapbpf" --pid "$svc" --duration 5 -o "$out/heap.pb.gz"
echo
echo "== heapbpf --pid $svc --duration 3 --format folded -o $out/heap.folded"
"$build/heapbpf" --pid "$svc" --duration 3 --format folded -o "$out/heap.folded" -q
echo "== heapbpf --pid $svc --duration 3 --format html -o $out/heap.html"
"$build/heapbpf" --pid "$svc" --duration 3 --format html -o "$out/heap.html" -q

echo
echo "Profiles of pid $svc:"
echo "  $out/heap.pb.gz   pprof (alloc_objects, alloc_space, inuse_objects, inuse_space)"
echo "  $out/heap.folded  folded stacks, in-use bytes (flamegraph.pl / speedscope)"
echo "  $out/heap.html    the flame graph: open it in any browser (one file, nothing fetched)"
echo
echo "Top in-use stacks (folded, bytes):"
sort -t' ' -k2 -n -r "$out/heap.folded" | head -5 | sed 's/^/  /'
