#!/usr/bin/env bash
# Fails unless each uprobe program of a BPF object keeps its stack under
# LIMIT bytes (default 48): from 6.13 on, a kprobe-type program (uprobes are
# of that type) with 64 bytes of stack or more runs on a per-CPU private
# stack, and a uprobe's program is preemptible (preempt=full or lazy), so
# another task on the same CPU can write over it in the middle of a run
# (bpf/heapbpf.bpf.c says more). The deepest r10 offset of each program in
# the disassembly is its stack; the verifier rounds it up to 16.
#
# Usage: scripts/bpf-stack.sh OBJECT [LIMIT]
set -euo pipefail

obj=${1:?usage: $0 OBJECT [LIMIT]}
limit=${2:-48}
objdump=${LLVM_OBJDUMP:-llvm-objdump}

"$objdump" -d --no-show-raw-insn "$obj" | awk -v limit="$limit" -v obj="$obj" '
	/^Disassembly of section / { uprobe = ($4 ~ /^uprobe/) }
	/^[0-9a-f]+ <[A-Za-z_0-9]+>:$/ && $2 !~ /^<LBB/ { fn = $2; gsub(/[<>:]/, "", fn); if (uprobe) depth[fn] = 0 }
	uprobe && /r10 - [0-9]+/ {
		match($0, /r10 - [0-9]+/)
		v = substr($0, RSTART + 6, RLENGTH - 6) + 0
		if (v > depth[fn])
			depth[fn] = v
	}
	END {
		bad = 0
		for (f in depth) {
			if (depth[f] > limit) {
				printf "%s: %s uses %d bytes of stack, more than %d: on 6.13 and later it would run on a per-CPU stack another task can write over (scripts/bpf-stack.sh)\n", obj, f, depth[f], limit > "/dev/stderr"
				bad = 1
			}
		}
		if (!length(depth)) {
			printf "%s: no uprobe program found\n", obj > "/dev/stderr"
			bad = 1
		}
		exit bad
	}'
