/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One profiling session against one target or several: load the probes once,
 * attach them to each target and switch its prof_active on, collect until the
 * duration ends, a signal arrives or the (last) target exits, then switch
 * every prof_active back, drain and detach. The flags are restored on every
 * path out of session_run_many.
 *
 * Several targets share one BPF object and ring buffer when their jemalloc
 * has the same layout (the caller groups them): uprobes are attached per
 * target pid (each on its own object file, at its own offsets), the BPF
 * `tracked` map holds every target and every child forked from one, and
 * each event goes to its process's collector through a hash map of pids.
 */
#ifndef __HEAPBPF_SESSION_H
#define __HEAPBPF_SESSION_H

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
#include "profile/report.h"
#include "symbols/symbolize.h"
#include "jemalloc/target.h"

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
struct serve;
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
	struct report_proc *procs;
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
	/* a node session's, while it runs: what session_add and session_remove reach */
	void *loop;
};

/* The signals a run stops on: SIGINT, SIGTERM, SIGHUP. */
void session_stop_signals(sigset_t *set);
/*
 * Blocks the signals the session stops on, and SIGUSR1 (read by whoever asks
 * for it with a signalfd, else ignored); call first thing in main.
 */
int session_block_signals(void);

/* Runs a session; on failure returns negative errno with a one-sentence message in err. */
int session_run(const struct jemalloc_target *t, const struct session_opts *o, struct session *s,
		char *err, size_t errlen);
/*
 * One session for n targets whose jemalloc layouts are the same
 * (t[i]->layout->bpf), each with its guard (guards[i], or NULL; o->guard is
 * not used) and its collection in s[i] (session_cleanup each). With n > 1 a
 * target that cannot be started is said on stderr and marked s[i].failed,
 * one that exits is marked s[i].exited, and the others go on; the session
 * fails only when no target could be started, or for the session's own
 * reasons. The session-wide fields (reason, counters: one BPF object's) are
 * the same in every s[i]. No recording with n > 1.
 */
int session_run_many(const struct jemalloc_target *const *t, struct guard *const *guards, size_t n,
		     const struct session_opts *o, struct session *s, char *err, size_t errlen);
void session_cleanup(struct session *s);

/*
 * heapbpf agent: a node session, whose targets come and go while it runs.
 * The BPF object is loaded with layout_of's jemalloc layout (a target of
 * another layout cannot join), its uprobes attached per object file with
 * the pid filter; it runs with no target at all until a signal, the
 * duration or a callback ends it. node holds the session-wide fields
 * (reason, counters, the symbolizers' shared pool) and no collector;
 * session_cleanup(node) after every target's.
 */
int session_run_node(const struct jemalloc_target *layout_of, const struct session_opts *o,
		     struct session *node, char *err, size_t errlen);
/*
 * From a callback of a running node session: t joins (its probes attached,
 * its prof_active switched on, state saved through g), collected into s.
 * 0, or a negative errno with a sentence in err (s to session_cleanup).
 * A target that exits is marked s->exited, and stays until removed.
 */
int session_add(struct session *node, const struct jemalloc_target *t, struct guard *g,
		struct session *s, char *err, size_t errlen);
/*
 * From a callback: s's target leaves (its samples so far drained into s,
 * its flag and its forked children's switched back, its guard's state
 * cleared once they are); s then holds its whole collection until
 * session_cleanup(s). 0, or the flag's restore error (negative errno).
 */
int session_remove(struct session *node, struct session *s);

#endif /* __HEAPBPF_SESSION_H */
