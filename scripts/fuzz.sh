#!/usr/bin/env bash
# Fuzzes the recording reader, the pprof reader with heapbpf diff, and the
# jemalloc layout reader with the live-heap walker for a bounded time with
# ASan and UBSan (libFuzzer), each for a third of it, starting from real
# files: the recordings in tests/fuzz/corpus, the profiles heapbpf wrote and
# the crafted ones (decompression bomb, overflowing values) in
# tests/fuzz/corpus-pprof, jemalloc's DWARF and consistent heap images (with
# the inputs that once crashed the walker) in tests/fuzz/corpus-layout.
# Exit 0: no finding.
set -euo pipefail

build=${1:-build}
seconds=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# crashes (if any) are kept under the build directory for a reproducer; a unit
# runs in milliseconds, but make test loads 2 CPUs with sanitized runs beside
# this one: a 10 s limit was once hit by an input that reran in 1 ms
# (a real hang still stops at 30 s)
mkdir -p "$build/fuzz/findings"
third=$(((seconds + 2) / 3))
for target in recording:corpus pprof:corpus-pprof layout:corpus-layout; do
	name=${target%%:*}
	mkdir -p "$work/$name"
	cp "tests/fuzz/${target#*:}"/* "$work/$name/"
	log="$build/fuzz/last-run-$name.log"
	"$build/fuzz/fuzz_$name" -max_total_time="$third" -max_len=262144 -rss_limit_mb=2048 \
		-timeout=30 -print_final_stats=1 -artifact_prefix="$build/fuzz/findings/$name-" \
		"$work/$name" > "$log" 2>&1 || {
		tail -40 "$log"
		echo "fuzz: $name FAILED (see $log and $build/fuzz/findings/)"
		exit 1
	}
	echo "fuzz_$name: $(grep -E "^stat::number_of_executed_units" "$log" || true)"
done
echo "fuzz: no finding in $seconds s"
