#!/usr/bin/env bash
# The closing line of make test: the sum of every test group's counts
# (scripts/run-tests.sh leaves "passed failed" in BUILD/test-results/GROUP.counts).
# A group without counts did not run to its end: it counts as one failure.
#
# Usage: scripts/test-total.sh BUILD/test-results/GROUP...
passed=0
failed=0
for g in "$@"; do
	if [ ! -f "$g.counts" ]; then
		echo "no test counts in $g.counts: that group did not run to its end" >&2
		failed=$((failed + 1))
		continue
	fi
	read -r p f <"$g.counts"
	passed=$((passed + p))
	failed=$((failed + f))
done
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
