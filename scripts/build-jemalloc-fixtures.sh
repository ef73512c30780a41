#!/usr/bin/env bash
# Builds the jemalloc fixtures the version tests run against into
# BUILD/fixtures: fetches the Debian sources once (network), then builds
# every jemalloc variant and example binary in parallel. Re-running only
# rebuilds what is missing or out of date.
#
# Usage: scripts/build-jemalloc-fixtures.sh [BUILD]
set -euo pipefail

build=${1:-build}
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/fetch-jemalloc-sources.sh "$build/fixtures"
make --no-print-directory -j"$(nproc)" -f tests/fixtures/fixtures.mk BUILD="$build" ${V:+V=$V}
end=$(date +%s)
if [ $((end - start)) -gt 5 ]; then
	echo "heapbpf: jemalloc fixtures ready in $((end - start)) s" >&2
fi
