/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf watch: triggers (oom, pressure, growth, demand) on a live session
 * that stays attached; each writes an in-use profile of the target as of
 * that instant, named after its trigger (user/window.c).
 */
#ifndef __HEAPBPF_WATCH_H
#define __HEAPBPF_WATCH_H

#include <stddef.h>

#include "run/run.h"
#include "sampling/session.h"

struct watch;

/* The triggers of trs[i], whose session collection is ss[i]; SIGUSR1 taken from now on. */
int watch__new(const struct run_opts *o, struct target_run **trs, struct session *ss, size_t n,
	       struct watch **out, char *err, size_t errlen);
/* The session's callbacks: the OOM victim, a tick a second, SIGUSR1. */
void watch__session_opts(struct watch *wt, struct session_opts *so);
/*
 * What the last profile of s's target is written for once the session has
 * ended ("oom" when the OOM event came too late for its own, "exit", "stop"),
 * with its note; "" when none is needed (the OOM profile was its last).
 */
const char *watch__last_trigger(struct watch *wt, const struct session *s, char *note, size_t len);
/* heapbpf agent: one more target, or one fewer (its session's collection is s). */
int watch__add(struct watch *wt, struct target_run *tr, struct session *s);
void watch__remove(struct watch *wt, const struct session *s);
/* Growth and pressure of every target now (the session's tick, or the agent's). */
void watch__tick(struct watch *wt);
void watch__free(struct watch *wt);

#endif /* __HEAPBPF_WATCH_H */
