/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The state of one heapbpf run, passed explicitly: main builds a struct run
 * from the options, fleet.c runs each target with a struct target_run of its
 * own, live.c runs the session and window.c turns what was collected into
 * profiles. Nothing of a run lives in file-scope variables.
 */
#ifndef __HEAPBPF_RUN_H
#define __HEAPBPF_RUN_H

#include <limits.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "run/opts.h"
#include "collect/collector.h"
#include "sampling/forks.h"
#include "heapbpf.h"
#include "collect/procsum.h"
#include "export/pyro_labels.h"
#include "profile/report.h"
#include "symbols/symbolizer.h"
#include "jemalloc/target.h"

struct pyro;

/*
 * What went short in a run, combined by OR over windows and targets; only
 * main turns it into an exit code (a failure beats "not delivered" beats
 * drops beats "no samples"). A target run in a child process exits with it.
 */
enum run_outcome {
	RUN_NO_SAMPLES = 1 << 0, /* a profile was written, but nothing was sampled */
	RUN_DROPS = 1 << 1,	 /* events were lost (ring buffer full) */
	RUN_NOT_SENT = 1 << 2,	 /* profiles wait in the spool for the next run */
	RUN_FAILED = 1 << 3,	 /* an error: nothing (more) written */
};

struct run {
	const struct run_opts *opts; /* what the command asked for (run/opts.h) */
	time_t start;		     /* window k of any target is stamped start + k * interval */
	char unit_name[256];	     /* --unit, as a unit name ("" without --unit) */
	pid_t root;	   /* --children: the first process named, whose children they are */
	struct pyro *pyro; /* --pyroscope, or NULL */
	struct pyro_naming naming; /* how profiles are named for Pyroscope */
	char spool_dir[PATH_MAX];  /* where profiles wait for Pyroscope */
	unsigned int outcome;	   /* RUN_* of everything run so far */
	/* heapbpf watch: a session ended by a signal or -d, not by its targets' exit */
	bool watch_stopped;
	bool sampled; /* a target of the run had samples (in this process) */
	/* several targets, or --children: each summary line names its target's pid and comm */
	bool name_targets;
	/* the agent's: --keep and --max-bytes count each process's profiles apart (outputs.c) */
	bool prune_per_process;
	/* where other runs ask this one for a window of its targets (serve.h), or NULL */
	struct serve *serve;
	/*
	 * What the command asks of the run layer, set by it (cmd/) and never
	 * told from a mode.
	 */
	bool view;	    /* a terminal view (top): a file only with -o, no Ctrl-C hint */
	bool servable;	    /* a one-target window another run that holds it may serve */
	bool hint_children; /* a target that sampled nothing is told of its children */
	bool own_windows;   /* each target's windows count from when it joined (the agent) */
	bool replay;	    /* a recording's times, not the clock's (report) */
};

/* What a profile is built from: a live session's or a recording's collection. */
struct heap_data {
	struct collector *collector; /* the target's */
	struct symbolizer *symbolizer;
	const struct heapbpf_counters *counters;
	struct collector_proc *procs; /* --follow-forks: the children's, labelled by pid */
	size_t nprocs;
	/* --follow-forks: the in-use of the target and its children together, or NULL */
	const struct procsum *sum;
};

/* One target of a run, and its windows so far. */
struct rss_map;

struct target_run {
	struct run *run;
	pid_t pid;
	const struct jemalloc_target *t; /* once found (a recording's identity in reports) */
	char source[512];   /* "pid N (comm), jemalloc V in PATH": what the profile is of */
	const char *output; /* the profile's file: -o, or a default name; NULL: none */
	unsigned int k;	    /* windows written */
	int64_t start_ns;   /* wall-clock start of the current window */
	int64_t attach_ns;  /* wall-clock start of the first: since when in use counts */
	struct collector_stats prev;
	struct heapbpf_counters prev_bc;
	bool any_samples;
	struct forks_result forks; /* children forked while sampling was on, once restored */
	/*
	 * heapbpf watch: what the next profile is written for ("oom",
	 * "pressure", "growth", "demand", "exit", "stop"), in its file name, a
	 * comment and a Pyroscope label, with what fired it (note); NULL for a
	 * window of its own.
	 */
	const char *trigger;
	char trigger_note[512];
	/*
	 * --output-dir: the second the last profile's name holds and its number
	 * there, so that the next of that second takes a higher one, whatever
	 * retention deleted meanwhile: names sort as the profiles were written
	 */
	int64_t named_s;
	unsigned int named_seq;
	/*
	 * heapbpf watch and agent: the target's last RSS breakdown (held by the
	 * watch, heap/rssmap.h) and when it was measured (CLOCK_MONOTONIC ns: an
	 * age, which a step of the wall clock must not make negative);
	 * NULL: none yet, or none to be had. Its profiles carry held_space and
	 * a comment; a trigger's also a JSON file beside them (docs/rss.md).
	 */
	const struct rss_map *rss;
	int64_t rss_mono_ns;
	/* heapbpf agent: this target's own service name and labels, or NULL: the run's */
	const struct pyro_naming *naming;
	unsigned int outcome; /* RUN_* of this target */
};

/* The one message for a target that sampled nothing; sets RUN_NO_SAMPLES. */
void run_no_samples(struct target_run *tr);

#endif /* __HEAPBPF_RUN_H */
