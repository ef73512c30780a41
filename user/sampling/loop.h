/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The session's event loop as its own files share it (session.c, node.c,
 * events.c, taps.c, late.c; loop.c holds the helpers below, which call none of them):
 * the loop, its targets and processes, the windows served to other runs,
 * and the helpers they have in common. Private to sampling/'s session:
 * nothing outside it includes this.
 */
#ifndef __HEAPBPF_LOOP_H
#define __HEAPBPF_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>

#include "heapbpf.h"
#include "sampling/oom.h"
#include "sampling/session_types.h"
#include "sampling/toggle.h"
#include "util/hashmap.h"

struct bpf_link;
struct collector;
struct probes;
struct recorder;
struct ring_buffer;
struct selfcheck;
struct serve;
struct session;
struct session_opts;
struct symbolizer;
struct jemalloc_target;

/* EV_WATCH + i: session_opts.watch[i] */
enum { EV_RING = 1, EV_SIGNAL, EV_DEADLINE, EV_TICK, EV_INTERVAL, EV_LATE, EV_WATCH };
/* EV_MEMBER + i: the pidfd of the session's target i */
#define EV_MEMBER 0x10000u
/* EV_PROC + i: the pidfd of process i, a child followed (--follow-forks) */
#define EV_PROC 0x20000u
/* another run's request (serve.h): EV_SERVE its socket, EV_TAP + 2i / + 2i + 1 tap i's end */
#define EV_SERVE 0x30000u
#define EV_TAP	 0x30010u
/* requests served at once */
#define MAX_TAPS 8

/* A window another run asked for: one target's events, as a recording into the asker's file. */
struct tap {
	struct recorder *rec; /* NULL: the slot is free */
	struct member *m;
	pid_t pid;
	int conn, tfd;		/* the asker's connection (readable: it hung up), its timer */
	bool live;		/* no duration: tfd flushes it each second, the asker reads it */
	int64_t t0;		/* CLOCK_MONOTONIC it began */
	uint64_t attach_coarse; /* CLOCK_MONOTONIC_COARSE then: older objects are not its */
	struct heapbpf_counters c0;
};

/* One target of a session: its flag, its guard, its pidfd. */
struct member {
	struct session *s; /* its collection */
	const struct jemalloc_target *t;
	struct guard *guard; /* state for recovery after kill -9, or NULL */
	struct prof_toggle tg;
	bool ours;    /* heapbpf switched its prof_active on: forked copies are ours to restore */
	bool running; /* started and not exited: its pidfd is on the loop */
	bool late_settled; /* sampled, or failed, since its late-activation check began */
	bool state_due;	   /* a child joined since its state file was last written */
	int pfd;
	int restore_rc; /* of its flag, at the end */
	int file;	/* its object file's uprobes (probes__release), or -1 */
	/* an unconfirmed layout's check of the first samples, or NULL */
	struct selfcheck *sc;
	/* samples with a backtrace / with none, until NOBT_SAMPLES settle it (nobt_check) */
	unsigned int bt_full, bt_empty;
	char nobt[768];	  /* the sentence once its jemalloc took no backtraces */
	bool gone;	  /* a node session's target that left (session_remove): its slot is free */
	struct probes *p; /* its BPF object: l->p, or one of l->more */
	/* a node session's target: its own activity probe while its late-activation check runs */
	struct bpf_link *late;
	int64_t late_t0; /* CLOCK_MONOTONIC when that check began */
	/*
	 * How far its clocks are ahead of heapbpf's (a time namespace's offset):
	 * taken off jemalloc's allocation times in its frees as they come
	 */
	int64_t clock_ahead_ns;
};

/* A process whose events the session takes: a target, or a child forked from one. */
struct proc {
	pid_t pid;
	uint32_t member;
	uint64_t start;	     /* its start time (proc_start_time), 0 if unknown */
	struct collector *c; /* NULL: its events are not collected (a child not followed) */
	int pfd;	     /* a followed child's pidfd until it exits, else -1 */
	bool left_sum;	     /* its in-use has left its tree's sum (it exited or exec'd) */
	/* its target left a node session, or a child not followed exited or exec'ed */
	bool gone;
	/* sweeps that found it gone (sweep_children): dropped at the second */
	uint8_t dead;
};

/* Everything one session holds open; stop() releases it whatever was reached. */
struct loop {
	const struct session_opts *o;
	struct session *s; /* the first target's: the session's reason, counters and times */
	struct member *m;
	size_t n, mcap;
	size_t running; /* targets started and not exited */
	/* heapbpf agent: targets come and go, none at times (session_run_node) */
	bool node;
	const struct jemalloc_target *lt; /* whose layout the BPF object is loaded with */
	/* a node session's BPF objects of the other layouts than lt's (l->p's) */
	struct probes **more;
	size_t nmore;
	uint32_t fork_off; /* the tracepoints' record offsets each object is loaded with */
	struct heapbpf_oom_offsets oom_off;
	struct proc *procs;
	size_t nprocs, cap;
	struct hashmap by_pid; /* pid -> index in procs */
	/* children joined since the last sweep_children, and how many make the next one due */
	size_t children, sweep_at;
	bool sweep_due;
	struct probes *p;
	struct ring_buffer *rb;
	int ep, sfd, dfd, tfd, ifd, lfd;
	int64_t t0;	  /* CLOCK_MONOTONIC when sampling was switched on; 0 before */
	int64_t deadline; /* CLOCK_MONOTONIC at or before the -d timer's expiry; 0: none */
	uint64_t attach_coarse;
	bool oom_pending; /* a target's OOM event waits for its callback (run_oom) */
	struct serve *sv; /* other runs' requests (session_opts.serve), or NULL */
	struct tap taps[MAX_TAPS];
	char *err;
	size_t errlen;
};

/* children that join before the first sweep_children, and at least before each next one */
#define SWEEP_MIN 64
/* the 5.2.1 check's period (late.c) */
#define LATE_CHECK_S 0.25

/* ---- loop.c: what the loop's files share ---- */

/* m's BPF object: one of its own layout's in a node session, else the session's. */
struct probes *loop_probes_of(const struct loop *l, const struct member *m);
/* pid's events no longer taken (the BPF side's map of tracked pids). */
void loop_untrack(const struct loop *l, pid_t pid);
/* m's flag back to what it was (nothing to restore after an unseen exec); 0 or negative errno. */
int loop_restore_flag(struct member *m);

/* A loop of o over s, nothing open yet (every fd -1), its errors into err. */
void loop_init(struct loop *l, const struct session_opts *o, struct session *s, char *err,
	       size_t errlen);
/* fd on the epoll set ep, with tag as its data; 0 or negative errno. */
int loop_add_fd(int ep, int fd, uint32_t tag);
/* A timerfd first in first_s, then every interval_s (0: once); the fd or negative errno. */
int loop_make_timer(double first_s, double interval_s);
/* A META record "key=v"; 0 or negative errno. */
int loop_record_meta_u64(struct recorder *r, const char *key, uint64_t v);
/* The header of a recording of t, its mappings from sym; 0 or negative errno. */
int loop_record_header_to(struct recorder *r, const struct symbolizer *sym,
			  const struct jemalloc_target *t);
/* What the ring buffer holds, into the collectors (and taps) now. */
int loop_consume(struct ring_buffer *rb);
/* The BPF side's counters, into every target's session. */
void loop_read_counters(struct loop *l);

/* ---- taps.c: windows other runs ask for (serve.h) ---- */

/* Another run asks for a window of one of the targets: a tap from now on, or a refusal. */
int taps_start(struct loop *l);
/* A tap's event k: its asker hung up (even), or its duration passed or a second (odd). */
int taps_ready(struct loop *l, uint32_t k);
/*
 * Every tap of m (NULL: all), ended for why (enum stop_reason, session.h);
 * what the ring buffer holds goes in first.
 */
void taps_end(struct loop *l, const struct member *m, uint32_t why);
/* An event of pid's into the taps on it. */
void taps_event(struct loop *l, __u32 pid, const void *data, size_t len);

/* True when the session has one target (not a node's, not several). */
bool loop_single(const struct loop *l);
/* The process pid of the session's tables, or NULL. */
struct proc *loop_proc_of(const struct loop *l, __u32 pid);
/* A process joins the tables (a child, or a target); 0 or negative errno. */
int loop_add_proc(struct loop *l, pid_t pid, uint32_t member, struct collector *c, uint64_t start);
/* A process leaves them. */
void loop_drop_proc(struct loop *l, struct proc *p);
/* A callback's return: 1 ends the session as asked (STOP_USER). */
int loop_asked(struct session *s, int rc);
/* The BPF side's counters, summed over the session's BPF objects, into c. */
void loop_all_counters(const struct loop *l, struct heapbpf_counters *c);

/* ---- session.c: the loop's run, which node.c's node session shares ---- */

/*
 * After switching sampling off, threads already past jemalloc's check may
 * still sample: a stop drains the ring buffer this long (ms).
 */
#define DRAIN_MS 50

/* Probes loaded, collectors, symbolizers and recording header ready, the event loop set up. */
int session_open_loop(struct loop *l);
/* Every target's probes attached, then its prof_active on; 0 or -errno (said in l->err). */
int session_start_sampling(struct loop *l);
/* The duration, status, interval and late-check timers; 0 or -errno. */
int session_add_timers(struct loop *l);
/* Waits for the end of the session; 0 or negative errno (a ring buffer callback's error). */
int session_wait(struct loop *l);
/* A target's collector, symbolizer and pidfd; a target that is gone already is left out. */
int session_open_member(struct loop *l, struct member *m);
/* One target: its probes attached first, then its prof_active on: no sample is missed. */
int session_start_member(struct loop *l, struct member *m);
/* Every path: sampling off first, then drain what is in flight, then close; detach meanwhile. */
int session_stop_loop(struct loop *l, int rc);

/* ---- events.c: what the ring buffer brings ---- */

/* The ring buffer's callback: an event of a target, of a fork or exec, of an OOM. */
int events_on_event(void *ctx, void *data, size_t len);
/* heapbpf watch: each target chosen as an OOM victim, now that its events are all in. */
int events_run_oom(struct loop *l);
/*
 * Each target's state file written once for the children that joined in the
 * events read since the last time, before the loop waits again or restores.
 */
void events_save_states(struct loop *l);
/* Followed child i exited (its pidfd): its last events in first when drain; 0 or -errno. */
int events_followed_exit(struct loop *l, size_t i, bool drain);
/* Why the targets took no backtraces, the first one's sentence ("" when none). */
const char *events_nobt_why(const struct loop *l);

/* ---- late.c: jemalloc 5.2.1's late-activation bug ---- */

/*
 * Every target of a session that is not a node's: 1 when each is settled or
 * the time is up (the probes go), 0 to keep checking, -ENODATA when the one
 * target (or every one) is hit by the bug, or negative errno.
 */
int late_active_check(struct loop *l);
/* A node session's targets, each with its own probe and time; 0 or negative errno. */
int late_node_check(struct loop *l);
/* A node session's target's check begins (its probe, the timer armed); 0 or negative errno. */
int late_check_begin(struct loop *l, struct member *m);
/* A node session's target's check ends: its probe goes. */
void late_done(struct loop *l, struct member *m);
/* The sentence for a target hit by the bug, in err; -ENODATA. */
int late_active_error(const struct session *s, const struct jemalloc_target *t, char *err,
		      size_t errlen);

#endif /* __HEAPBPF_LOOP_H */
