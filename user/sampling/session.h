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

#include <signal.h>
#include <stddef.h>

#include "jemalloc/target.h"
#include "sampling/session_types.h"

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
