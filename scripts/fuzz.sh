#!/usr/bin/env bash
# Fuzzes the recording reader for a bounded time with ASan and UBSan (libFuzzer),
# starting from the real recordings in tests/fuzz/corpus. Exit 0: no finding.
set -euo pipefail

build=${1:-build}
seconds=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"
# crashes (if any) are kept under the build directory for a reproducer; a unit
# runs in milliseconds, but make test loads 2 CPUs with sanitized runs beside
# this one: a 10 s limit was once hit by an input that reran in 1 ms
# (a real hang still stops at 30 s)
mkdir -p "$build/fuzz/findings"
"$build/fuzz/fuzz_recording" -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=2048 \
	-timeout=30 -print_final_stats=1 -artifact_prefix="$build/fuzz/findings/" "$work" \
	> "$build/fuzz/last-run.log" 2>&1 || {
	tail -40 "$build/fuzz/last-run.log"
	echo "fuzz: FAILED (see $build/fuzz/last-run.log and $build/fuzz/findings/)"
	exit 1
}
grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz/last-run.log" || true
echo "fuzz: no finding in $seconds s"
