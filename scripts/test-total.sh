#!/usr/bin/env bash
# The closing line of make test: the sum of every pass's counts (run-tests.sh
# leaves "passed failed" in BUILD/test-counts).
passed=0
failed=0
for b in "$@"; do
	[ -f "$b/test-counts" ] || { echo "no test counts in $b" >&2; failed=$((failed + 1)); continue; }
	read -r p f < "$b/test-counts"
	passed=$((passed + p))
	failed=$((failed + f))
done
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
