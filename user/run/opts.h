/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a live command asks of the run layer: the run's own options, filled
 * by the command line's parser (cli/cli.c) and read by run/ and below. The
 * run layer never sees the command line, nor which command it runs for.
 */
#ifndef __HEAPBPF_RUN_OPTS_H
#define __HEAPBPF_RUN_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/profile.h"
#include "export/sink.h"
#include "run/top.h"

#define RUN_MAX_LABELS	 16
#define RUN_MAX_WRAPPERS 64   /* --wrapper */
#define RUN_MAX_PIDS	 1024 /* --pid N,N,...: one session (run/fleet.c) */
#define RUN_MAX_RULES	 32   /* heapbpf agent: --select and --exclude */
/* --ringbuf-size's default; with --interval, whose windows pause the reading */
#define RINGBUF_DEFAULT (8u << 20)
#define RINGBUF_DAEMON	(16u << 20)

struct run_opts {
	const char *record; /* --record FILE, or NULL */
	double duration;    /* seconds; 0 = until a signal */
	const char *output;
	/* heapbpf watch: stay attached, write a profile when a trigger fires (run/watch.c) */
	uint64_t watch_growth;	   /* --on-growth SIZE: of the sampled in-use estimate; 0: off */
	uint64_t watch_rss_growth; /* --on-rss-growth SIZE: of the RSS; 0: off */
	double watch_cooldown;	   /* --cooldown SECONDS between pressure profiles */
	size_t ringbuf_bytes;
	const char *layout;    /* forced jemalloc layout, or NULL */
	const char *at_peak;   /* --at-peak FILE: the in-use profile at the peak, or NULL */
	uint64_t temporary_ns; /* --temporary-threshold: shorter lifetimes are temporary */
	/* fleet use (run/fleet.c) */
	const char *unit;	/* --unit NAME */
	const char *pidfile;	/* --pidfile PATH */
	const char *output_dir; /* --output-dir DIR: snapshot mode */
	unsigned long keep;	/* --keep N snapshots, 0 = all */
	uint64_t max_bytes;	/* --max-bytes, 0 = no limit */
	double interval;	/* --interval SECONDS, 0 = one window */
	const char *pyroscope;	/* --pyroscope URL */
	const char *service_name;
	const char *spool_dir;
	unsigned long spool_keep;
	uint64_t spool_max_bytes;
	double pyro_timeout;
	const char *pyro_ca;
	const char *pyro_proxy; /* --pyroscope-proxy URL */
	/* heapbpf agent (run/agent.c) */
	const char *select_rules[RUN_MAX_RULES];  /* --select RULE, as typed */
	const char *exclude_rules[RUN_MAX_RULES]; /* --exclude RULE, as typed */
	size_t nselect, nexclude;
	unsigned long max_targets; /* --max-targets: processes sampled at once */
	uint64_t max_rss;	   /* --max-rss: heapbpf's own RSS */
	double max_cpu;		   /* --max-cpu: heapbpf's own CPU, percent of one core */
	double rotate;		   /* --rotate SECONDS between the budget's rotations */
	const char *test_root;	   /* --test-root DIR (tests): its /var/log, /var/lib/docker */
	const char *labels[RUN_MAX_LABELS]; /* --label K=V, as typed */
	/* --wrapper NAME: more allocator wrappers that sites are named past (profile/wrappers.h) */
	const char *wrappers[RUN_MAX_WRAPPERS];
	size_t nwrappers;
	pid_t pid;
	enum out_format format;
	enum hb_value sample_type;
	/* heapbpf top: the first sort and rows */
	enum top_sort top_sort;
	enum top_by top_by;
	unsigned int formats; /* 1 << FMT_* of every -f, for --output-dir */
	int nlabels;
	int npids; /* of pids[] (beside nlabels: no padding) */
	int pyro_retries;
	/* --pid N,N,...: every pid (npids of them), pids[0] == pid; one session for them */
	pid_t pids[RUN_MAX_PIDS];
	bool reset;	     /* --reset: only restore what a killed heapbpf left */
	bool watch;	     /* heapbpf watch, and the agent: triggers, a daemon's ring buffer */
	bool watch_no_oom;   /* --no-oom: no profile of an OOM victim */
	bool watch_pressure; /* --on-pressure: the kernel's word of memory pressure */
	bool raw;
	bool follow_forks; /* also profile the children forked while sampling is on */
	bool children;	   /* --children: also the targets' descendants running at the start */
	bool live_heap;	   /* --live-heap: read jemalloc's own tables once (run/liveheap.c) */
	/* what is leaking (collect/leaks.h) */
	bool leaks; /* --leaks: leak suspects and lifetimes after the profile */
	bool quiet, verbose;
	bool zstd; /* --compress zstd: folded files as .folded.zst */
	bool pyro_multipart;
	bool pyro_ingest; /* --pyroscope-api ingest (default: push) */
};

/* True when profiles go where the fleet options send them (directory, windows, Pyroscope). */
static inline bool run_opts_fleet_output(const struct run_opts *o)
{
	return o->output_dir || o->interval || o->pyroscope;
}

/*
 * The option that makes a run one process's ("--record names one file",
 * ...), as a message ends with it; NULL when none does. view: the run is a
 * terminal's (top).
 */
static inline const char *run_opts_one_process(const struct run_opts *o, bool view)
{
	return o->output    ? "--output names one file; use --output-dir"
	       : o->record  ? "--record names one file"
	       : o->at_peak ? "--at-peak names one file"
	       : view	    ? "heapbpf top shows one process"
			    : NULL;
}

#endif /* __HEAPBPF_RUN_OPTS_H */
