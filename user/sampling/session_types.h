/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a session is made of and what it hands back (session.h runs it):
 * its options, its results per target, why it stopped. Apart from the
 * functions so that the loop's own files (loop.h) can hold them without
 * reaching up to the session's entry points.
 */
#ifndef __HEAPBPF_SESSION_TYPES_H
#define __HEAPBPF_SESSION_TYPES_H

#include <linux/types.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/collector.h"
#include "sampling/forks.h"
#include "heapbpf.h"
#include "collect/procsum.h"
#include "symbols/symbolizer.h"
#include "jemalloc/target.h"

enum stop_reason {
	STOP_DURATION,
	STOP_SIGNAL,
	STOP_TARGET_EXIT,
	STOP_ERROR,
	STOP_USER, /* a callback said so (heapbpf top: the quit key) */
};

#define SESSION_MAX_WATCH 4

struct recorder;
struct guard;
struct serve;
struct session;

struct session_opts {
	double duration; /* seconds, 0 = until a signal or target exit */
	size_t ringbuf_bytes;
	/*
	 * Each second while sampling, the counts of every target so far (a
	 * status line), and once more at the end with all NULL; or NULL.
	 */
	void (*on_status)(void *arg, double elapsed, const struct collector_stats *all,
			  const struct heapbpf_counters *bc);
	void *status_arg;
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
	/* keep the capabilities to load and attach after this session (heapbpf watch's restarts) */
	bool keep_privs;
	/* -v: each program's kernel-measured run time at the end (bpf_stats) */
	bool verbose;
	/*
	 * heapbpf watch: hear of a target chosen as an OOM victim. on_oom runs
	 * once the ring buffer is drained up to the kernel's choice (what the
	 * target sampled before it is in its collector), with the same returns
	 * as on_interval; the target dies a few milliseconds later.
	 */
	bool oom;
	int (*on_oom)(struct session *s, const struct heapbpf_oom_event *e, void *arg);
	void *oom_arg;
	/*
	 * Where this run listens for other runs' requests for a window of one
	 * of its targets (serve.h), opened before its locks are taken; or NULL.
	 */
	struct serve *serve;
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
	struct collector_proc *procs;
	size_t nprocs;
	/* --follow-forks: the in-use of the target and its children together */
	struct procsum *sum;
	bool fork_state_err; /* the state file could not list a child */
	/* of several targets: this one could not be started (said on stderr), or nothing */
	int failed;
	/* of several targets: it exited while the others went on (duration_ns: until then) */
	bool exited;
	/* heapbpf watch: the kernel chose it as an OOM victim (oom: the tracepoint's record) */
	bool oom_victim, oom_pending;
	struct heapbpf_oom_event oom;
	/* the first target's, of several: the objects their symbolizers share (cleaned up last) */
	struct sym_pool *pool;
	/* the first target's: the probes' detach, running while the report is built */
	pthread_t detacher;
	bool detaching;
	/* its layout waits for its first samples to fit (selfcheck.h): no profile of it yet */
	bool unconfirmed;
	/*
	 * a node session's target whose jemalloc may have 5.2.1's late-activation
	 * bug (late.c), until its first sample or the verdict: no window of it
	 * yet, which would say it allocated nothing
	 */
	bool late_open;
	/* a node session's, while it runs: what session_add and session_remove reach */
	void *loop;
};

#endif /* __HEAPBPF_SESSION_TYPES_H */
