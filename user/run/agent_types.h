/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf agent's own state, private to run/agent.c and its budget
 * (run/budget.c), which decides what the agent lets go and takes in;
 * nothing else includes it.
 */
#ifndef __HEAPBPF_RUN_AGENT_TYPES_H
#define __HEAPBPF_RUN_AGENT_TYPES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "export/pyro_labels.h"
#include "jemalloc/target.h"
#include "sampling/guard.h"
#include "sampling/session.h"
#include "targets/discover.h"
#include "targets/selection.h"
#include "run/run.h"
#include "run/watch.h"

struct agent_target;

/* What a process runs: its executable and its jemalloc object; another one after an exec. */
struct image_id {
	uint64_t exe_dev, exe_ino, je_dev, je_ino;
	char je_path[512];
	char build_id[128];
};

/* A process the rules take, with a usable jemalloc: sampled now, or waiting its turn. */
struct agent_proc {
	pid_t pid;
	uint64_t start;
	char comm[32];
	char svc[256];
	char kv[PYRO_MAX_LABELS][320];
	const char *labels[PYRO_MAX_LABELS];
	struct pyro_naming naming;
	struct jemalloc_target *t; /* found at discovery, until it is first sampled */
	int64_t found_at;	   /* CLOCK_MONOTONIC ns t was found */
	struct image_id image;	   /* what it ran when it was found */
	int64_t idle_since;	   /* CLOCK_MONOTONIC ns it left the budget; 0: never sampled */
	int64_t active_since;
	struct agent_target *on; /* sampled now, or NULL */
	pid_t held_by;		 /* another heapbpf held it when it was next: waits for it */
};

/* A process sampled now: its jemalloc, guard, collection and windows. */
struct agent_target {
	struct agent_proc *p;
	struct jemalloc_target *t;
	struct guard *g;
	struct session s;
	struct target_run tr;
	int64_t next_window; /* CLOCK_REALTIME ns its current window ends */
};

struct agent {
	struct run *r;
	const struct run_opts *o;
	struct select_rule sel[RUN_MAX_RULES], exc[RUN_MAX_RULES];
	struct discover *d;
	struct watch *wt;
	struct session node;
	bool running;			  /* the node session runs: targets join and leave it */
	struct jemalloc_target *layout_t; /* whose layout the node's BPF object has */
	struct agent_proc **procs;
	size_t nprocs, cap;
	size_t active, budget; /* sampled now; at most (--max-targets, lowered by the caps) */
	int64_t next_rotate;
	int64_t shed_at;       /* CLOCK_MONOTONIC ns a cap last let a target go */
	unsigned int cap_said; /* over a cap with one target: said once, a bit per cap */
	uint64_t cpu_ns;       /* heapbpf's CPU time at cpu_at, all threads */
	int64_t cpu_at;
};

#endif /* __HEAPBPF_RUN_AGENT_TYPES_H */
