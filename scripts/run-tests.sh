#!/usr/bin/env bash
# Runs one group of one build's tests, prints its output (of integration
# tests: the output of those that failed) and one line of counts, and leaves
# "passed failed" in BUILD/test-results/GROUP.counts for scripts/test-total.sh
# (the whole output in GROUP.log):
#
#   unit         the unit tests, one per core at a time (sanitized: one at a time)
#   integration  every integration test but those on the fixtures and of the
#                serial suites
#   versions     the tests on the jemalloc and Redis fixtures (suites versions,
#                liveheap, reach, core_versions, wrappers)
#   serial       the suites in SERIAL_SUITES, one test at a time, with no
#                other integration test beside it
#   fuzz         the recording, pprof and jemalloc layout readers fuzzed for
#                FUZZ_SECONDS (60) together with ASan and UBSan (scripts/fuzz.sh)
#
# Integration tests run HEAPBPF_TEST_JOBS (default: one more than there are
# cores) at a time, counted over every group that shares the slot directory
# HEAPBPF_TEST_SLOTS (make test: both passes share one): none of them
# measures a time, each has its own processes, temporary directory, cgroup
# and ports, and they wait more than they compute. A serial test takes every
# slot. Each test runs alone in its own test runner (--filter suite/test).
# Criterion's own --jobs is not used for them: with --jobs 2 its runner
# leaked under LeakSanitizer (192 bytes in 4 callocs inside libcriterion
# 2.4.1) in each of three full sanitized runs, which fails the sanitized pass.
#
# Exit status 0 only if the group ran and every test passed. BPF tests need
# root; HEAPBPF_TEST_NO_BPF=1 skips them explicitly.
#
# Usage: scripts/run-tests.sh BUILD GROUP
set -uo pipefail

build=${1:?usage: $0 BUILD GROUP}
group=${2:?usage: $0 BUILD GROUP}
# soak: 8 threads allocating without pause for up to a minute, on purpose
# saturating the machine, which would starve the tests beside it; leaks:
# measures growth rates and lifetimes in time, which tests beside it would stretch;
# liveheap_load: four threads allocating without pause while it reads the tables;
# forks_pidreuse, multi_pidreuse: each starts a process as the pid a child of
# its service just freed (clone3's set_tid); a fork elsewhere may take that pid
# first, and then the test forks a new child and tries again, at most 5
# attempts in all (hb_freed_pid_taken): run alone, no other integration
# test's forks compete for the pid
SERIAL_SUITES="soak leaks liveheap_load forks_pidreuse multi_pidreuse agent_budget"
# the suites that run on the jemalloc fixtures (make test builds them for this group)
FIXTURE_SUITES="versions|liveheap|reach|core_versions|wrappers|agent_versions|rss_versions"
slots=${HEAPBPF_TEST_JOBS:-$(($(nproc) + 1))}
slotdir=${HEAPBPF_TEST_SLOTS:-}
if [ -z "$slotdir" ]; then
	slotdir=$(mktemp -d)
	trap 'rm -rf "$slotdir"' EXIT
fi
mkdir -p "$slotdir"
export HEAPBPF_BUILD=$build
# the sanitized builds' leak check, with libdw's own leak left out (tests/lsan.supp)
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
results=$build/test-results
mkdir -p "$results"
log=$results/$group.log
counts=$results/$group.counts
rm -f "$counts"
label=$group
[ "${SANITIZED:-0}" = 1 ] && label="$group (sanitized)"
# The harness's guards against a hang (hb_guard_ms), three times longer for
# the sanitized build, which runs two to three times slower: at a load of 30
# (two make tests side by side) a sanitized heapbpf --unit of three
# processes had not switched them on after the 20 s guard
if [ "${SANITIZED:-0}" = 1 ] && [ -z "${HEAPBPF_TEST_GUARD_FACTOR:-}" ]; then
	export HEAPBPF_TEST_GUARD_FACTOR=3
fi
passed=0
failed=0
start=$(date +%s)
began=$(date +%T)

# Adds one runner's counts from its output file and exit status; a runner
# that ended without its synthesis, or failed without a failing test, is a failure.
add_counts() {
	local out=$1 rc=$2 name=$3 p f c
	read -r p f c < <(sed -n 's/.*Synthesis: Tested: [0-9]* | Passing: \([0-9]*\) | Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2 \3/p' "$out" | tail -1)
	if [ -z "${p:-}" ]; then
		echo "$name: the test runner ended without its synthesis (exit $rc)"
		failed=$((failed + 1))
		return 1
	fi
	passed=$((passed + p))
	failed=$((failed + f + c))
	if [ "$rc" -ne 0 ] && [ $((f + c)) -eq 0 ]; then
		echo "$name: the test runner exited with $rc"
		failed=$((failed + 1))
	fi
	[ "$rc" -eq 0 ] && [ $((f + c)) -eq 0 ]
}

# "suite/test" for every test of the integration binary whose suite matches
# (include=1) or does not match (include=0) the extended regular expression
tests_of() {
	"$build/tests/integration_tests" --list 2>/dev/null |
		awk -v re="^($2)\$" -v inc="$1" '
			$1 ~ /:$/ && NF == 3 { suite = substr($1, 1, length($1) - 1); next }
			suite != "" && ((suite ~ re) == (inc == 1)) { print suite "/" $NF }'
}

# Runs one test ($1) in its own runner, output to $2.log, exit status to $2.rc,
# once it holds one of the slots $slotdir/0..$slots-1 (all of them if $3 = all).
# The runner does not inherit the slots' descriptors: a process a test left
# behind must not keep a slot.
run_one() {
	local id=$1 out=$2 fd i held=()
	if [ "$3" = all ]; then
		# in order, so that two such runs cannot deadlock; the others only try
		for ((i = 0; i < slots; i++)); do
			exec {fd}>"$slotdir/$i"
			flock "$fd"
			held+=("$fd")
		done
	else
		while [ ${#held[@]} -eq 0 ]; do
			for ((i = 0; i < slots; i++)); do
				exec {fd}>"$slotdir/$i"
				if flock -n "$fd"; then
					held=("$fd")
					break
				fi
				exec {fd}>&-
			done
			[ ${#held[@]} -gt 0 ] || sleep 0.2
		done
	fi
	(
		for fd in "${held[@]}"; do
			exec {fd}>&-
		done
		exec "$build/tests/integration_tests" --jobs 1 --filter "$id"
	) >"$out.log" 2>&1
	echo $? >"$out.rc"
}
export -f run_one
export build slots slotdir

# Runs the given tests, each in its own runner, as many at a time as slots
# allow ($1 = all: one at a time, with every slot)
run_pool() {
	local mode=$1 dir id out
	shift
	[ $# -gt 0 ] || return 0
	dir=$(mktemp -d)
	# shellcheck disable=SC2016
	printf '%s\n' "$@" | xargs -P "$([ "$mode" = all ] && echo 1 || echo "$slots")" -I{} \
		bash -c 'run_one "$1" "$2/$(echo "$1" | tr / .)" "$3"' _ {} "$dir" "$mode"
	: >"$log"
	for id in "$@"; do
		out=$dir/$(echo "$id" | tr / .)
		cat "$out.log" >>"$log"
		if ! add_counts "$out.log" "$(cat "$out.rc" 2>/dev/null || echo 255)" "$id" >>"$log"; then
			echo "---- $id"
			cat "$out.log"
		fi
	done
	rm -rf "$dir"
	echo "[====] $label: Tested: $((passed + failed)) | Passing: $passed | Failing: $failed"
}

serial=$(tr ' ' '|' <<<"$SERIAL_SUITES")
echo "== $label"
case $group in
unit)
	# sanitized: one test at a time, for with --jobs 2 Criterion 2.4.1's runner
	# itself leaked 48 bytes (a calloc inside libcriterion) under LeakSanitizer
	# once the unit tests grew past 400, which failed the group with every test passed
	jobs=$(nproc)
	[ "${SANITIZED:-0}" = 1 ] && jobs=1
	"$build/tests/unit_tests" --jobs "$jobs" >"$log" 2>&1
	rc=$?
	cat "$log"
	add_counts "$log" $rc "$label"
	;;
integration)
	mapfile -t ids < <(tests_of 0 "$FIXTURE_SUITES|$serial")
	run_pool one "${ids[@]}"
	;;
versions)
	mapfile -t ids < <(tests_of 1 "$FIXTURE_SUITES")
	run_pool one "${ids[@]}"
	;;
serial)
	mapfile -t ids < <(tests_of 1 "$serial")
	run_pool all "${ids[@]}"
	;;
fuzz)
	if scripts/fuzz.sh "$build" "${FUZZ_SECONDS:-60}" 2>&1 | tee "$log"; then
		passed=1
	else
		failed=1
	fi
	;;
*)
	echo "usage: $0 BUILD unit|integration|versions|serial|fuzz" >&2
	exit 2
	;;
esac
if [ $((passed + failed)) -eq 0 ]; then
	echo "$label: no test ran"
	failed=1
fi
echo "$passed $failed" >"$counts"
echo "$label: $passed passed, $failed failed ($(($(date +%s) - start)) s from $began)"
[ "$failed" -eq 0 ]
