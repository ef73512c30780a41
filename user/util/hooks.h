/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every setting heapbpf takes from its environment for tests and
 * benchmarks, in one place (docs/conventions.md lists them too). None is
 * needed in production; each leaves heapbpf as it is when unset or empty.
 * (The environment a user sets, DEBUGINFOD_*, STATE_DIRECTORY, SUDO_UID and
 * the Pyroscope credentials, is read where it is used.)
 */
#ifndef __HEAPBPF_HOOKS_H
#define __HEAPBPF_HOOKS_H

enum hb_hook {
	/* the lock, state and run directory instead of /run/heapbpf (guard.c) */
	HB_HOOK_STATE_DIR,
	/* where the kernel's features are looked up instead of /sys (privs.c) */
	HB_HOOK_SYSFS,
	/*
	 * "collect": collection fails after the first batch of events (session.c);
	 * "layout": every sample's read of jemalloc's memory faults (probes.c)
	 */
	HB_HOOK_FAULT_INJECT,
	/* a directory: heapbpf waits there before it writes the flag (toggle.c) */
	HB_HOOK_FLAG_PAUSE,
	/* a bit mask of BPF program parts left out, for bench/bpfstats.py (probes.c) */
	HB_HOOK_BENCH_PARTS,
	/* milliseconds of CPU the agent spends at each tick, as if it had work (agent.c) */
	HB_HOOK_AGENT_CPU,
	HB_HOOK_COUNT,
};

/* The hook's environment variable ("HEAPBPF_STATE_DIR", ...). */
const char *hb_hook_name(enum hb_hook h);
/* Its value, or NULL when it is unset or empty. */
const char *hb_hook(enum hb_hook h);

#endif /* __HEAPBPF_HOOKS_H */
