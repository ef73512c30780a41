#!/usr/bin/env bash
# Runs the unit tests, then the integration tests (one at a time: they attach
# uprobes and measure real processes), and prints one closing line for both.
# BPF tests need root; HEAPBPF_TEST_NO_BPF=1 skips them explicitly.
set -uo pipefail

build=${1:-build}
export HEAPBPF_BUILD=$build
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
rm -f "$build/test-counts"

echo "== unit tests"
"$build/tests/unit_tests" --jobs 2 2>&1 | tee -a "$log" || rc=1
echo "== integration tests"
"$build/tests/integration_tests" --jobs 1 2>&1 | tee -a "$log" || rc=1

fuzz_passed=0
fuzz_failed=0
# the fuzzer is built with the sanitizers already: one run, in the plain pass
if [ "${SANITIZED:-0}" != 1 ]; then
	echo "== fuzzing the recording reader (${FUZZ_SECONDS:-60} s, ASan + UBSan)"
	if scripts/fuzz.sh "$build" "${FUZZ_SECONDS:-60}"; then fuzz_passed=1; else fuzz_failed=1; fi
fi

passed=$fuzz_passed
failed=$fuzz_failed
while read -r p f c; do
	passed=$((passed + p))
	failed=$((failed + f + c))
done < <(sed -n 's/.*Synthesis: Tested: [0-9]* | Passing: \([0-9]*\) | Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2 \3/p' "$log")

if [ "$passed" -eq 0 ]; then
	echo "no test ran" >&2
	rc=1
fi
[ "$failed" -eq 0 ] || rc=1
echo "$passed $failed" > "$build/test-counts"
label=heapbpf
[ "${SANITIZED:-0}" = 1 ] && label=sanitized
echo "$label: $passed passed, $failed failed"
exit $rc
