/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One profiling session against one target: load and attach the probes,
 * switch prof_active on, collect until the duration ends, a signal arrives
 * or the target exits, then switch prof_active back, drain and detach.
 * The flag is restored on every path out of session_run.
 */
#ifndef __HEAPBPF_SESSION_H
#define __HEAPBPF_SESSION_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector.h"
#include "forks.h"
#include "heapbpf.h"
#include "report.h"
#include "symbolize.h"
#include "target.h"

enum stop_reason {
	STOP_DURATION,
	STOP_SIGNAL,
	STOP_TARGET_EXIT,
	STOP_ERROR,
	STOP_USER, /* a callback said so (heapbpf top: the quit key) */
};

#define SESSION_MAX_WATCH 2

struct recorder;
struct guard;
struct session;

struct session_opts {
	double duration; /* seconds, 0 = until a signal or target exit */
	size_t ringbuf_bytes;
	bool status_line;	   /* live status on stderr */
	struct recorder *recorder; /* also record every event here (--record), or NULL */
	struct guard *guard;	   /* state for recovery after kill -9, or NULL */
	/*
	 * heapbpf --interval: every interval seconds (whole seconds), with the
	 * ring buffer drained and s->counters current, on_interval is called
	 * while sampling goes on; a negative errno ends the session with that
	 * error, 1 ends it as asked (STOP_USER). 0 or NULL: no windows.
	 */
	double interval;
	int (*on_interval)(struct session *s, void *arg);
	void *interval_arg;
	/* --follow-forks: also profile every child forked while sampling is on */
	bool follow_forks;
	bool quiet; /* no "following pid N" lines */
	/* -v: each program's kernel-measured run time at the end (bpf_stats) */
	bool verbose;
	/* --temporary-threshold for the collectors; 0: theirs (1 ms) */
	uint64_t temporary_ns;
	/*
	 * heapbpf top: more descriptors on the event loop (the terminal's keys,
	 * SIGWINCH). on_ready runs when fd is readable or hung up, with the same
	 * returns as on_interval.
	 */
	struct session_watch {
		int fd;
		int (*on_ready)(struct session *s, void *arg);
		void *arg;
	} watch[SESSION_MAX_WATCH];
	size_t nwatch;
};

struct session {
	struct collector *collector;
	struct symbolizer *symbolizer;
	struct heapbpf_counters counters;
	int64_t start_wall_ns; /* CLOCK_REALTIME when sampling was switched on */
	int64_t duration_ns;
	enum stop_reason reason;
	int stop_signal;
	bool was_active; /* prof_active was already on: left on */
	/* bytes the slow path allocated with no sample when the late-activation bug was seen */
	uint64_t late_active_bytes;
	struct recorder *recorder;
	int record_err; /* first error writing the recording, 0 if none */
	/* processes forked from the target while prof_active was on, and their restore */
	struct forks forks;
	struct forks_result fork_result;
	/* --follow-forks: each followed child's collection (the target's is collector) */
	struct report_proc *procs;
	size_t nprocs;
	bool fork_state_err; /* the state file could not list a child */
};

/* Blocks the signals the session stops on; call first thing in main. */
int session_block_signals(void);

/* Runs a session; on failure returns negative errno with a one-sentence message in err. */
int session_run(const struct jemalloc_target *t, const struct session_opts *o, struct session *s,
		char *err, size_t errlen);
void session_cleanup(struct session *s);

#endif /* __HEAPBPF_SESSION_H */
