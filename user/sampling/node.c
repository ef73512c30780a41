// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A node session (heapbpf agent): one event loop that targets join and
 * leave while it runs, each with the BPF object of its jemalloc layout
 * (one per layout, their ring buffers joined), each target a member of
 * the loop with its own collection. session.c runs the loop itself.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "collect/collector.h"
#include "sampling/guard.h"
#include "sampling/loop.h"
#include "sampling/probes.h"
#include "sampling/selfcheck.h"
#include "sampling/session.h"
#include "symbols/symbolizer.h"

int session_run_node(const struct jemalloc_target *layout_of, const struct session_opts *o,
		     struct session *node, char *err, size_t errlen)
{
	struct loop l;
	int rc;

	loop_init(&l, o, node, err, errlen);
	l.node = true;
	l.lt = layout_of;
	if (o->recorder || o->follow_forks)
		return hb_fail(err, errlen, -EINVAL,
			       "a node session neither records nor follows forks");
	memset(node, 0, sizeof(*node));
	node->reason = STOP_ERROR;
	if (symbolizer_pool__new(&node->pool))
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	rc = session_open_loop(&l);
	rc = rc ?: session_start_sampling(&l);
	rc = rc ?: session_add_timers(&l);
	node->loop = &l;
	if (!rc) {
		rc = session_wait(&l);
		if (rc)
			hb_fail(err, errlen, rc, "collecting events failed: %s", strerror(-rc));
	}
	node->loop = NULL;
	return session_stop_loop(&l, rc);
}

/*
 * The node session's BPF object for t's jemalloc layout: the first one's, one
 * loaded for another target already, or a new one, whose ring buffer joins
 * the session's (one event loop, one callback). A BPF object's programs read
 * one layout's offsets and argument positions, fixed when it is loaded.
 */
static int probes_for(struct loop *l, const struct jemalloc_target *t, struct probes **out)
{
	const size_t size = sizeof(t->layout->bpf);
	struct probes *p, **v;
	int rc;

	*out = l->p;
	if (!memcmp(&l->lt->layout->bpf, &t->layout->bpf, size))
		return 0;
	for (size_t i = 0; i < l->nmore; i++) {
		if (!memcmp(probes__layout(l->more[i]), &t->layout->bpf, size)) {
			*out = l->more[i];
			return 0;
		}
	}
	v = realloc(l->more, (l->nmore + 1) * sizeof(*v));
	if (!v)
		return hb_fail(l->err, l->errlen, -ENOMEM, "out of memory");
	l->more = v;
	rc = probes__load(&t->layout->bpf, l->o->ringbuf_bytes, l->fork_off,
			  l->o->oom ? &l->oom_off : NULL, true, &p);
	if (rc)
		return hb_fail(l->err, l->errlen, rc,
			       "cannot load the BPF program for jemalloc %s's layout: %s",
			       t->version, strerror(-rc));
	rc = probes__ring_buffer_add(p, l->rb, events_on_event, l);
	if (rc) {
		probes__free(p);
		return hb_fail(l->err, l->errlen, rc, "cannot read the BPF ring buffer: %s",
			       strerror(-rc));
	}
	l->more[l->nmore++] = p;
	*out = p;
	return 0;
}

/* A free member slot of a node session (one a target left), else a new one. */
static struct member *member_slot(struct loop *l)
{
	struct member *v;

	for (size_t i = 0; i < l->n; i++) {
		if (l->m[i].gone)
			return &l->m[i];
	}
	if (l->n == l->mcap) {
		size_t cap = l->mcap ? 2 * l->mcap : 16;

		v = realloc(l->m, cap * sizeof(*v));
		if (!v)
			return NULL;
		l->m = v;
		l->mcap = cap;
	}
	return &l->m[l->n++];
}

/* A node session's target leaves the loop: its pidfd, its pids, its processes' slots. */
static void drop_member(struct loop *l, struct member *m)
{
	uint32_t idx = (uint32_t)(m - l->m);

	if (m->pfd >= 0) {
		epoll_ctl(l->ep, EPOLL_CTL_DEL, m->pfd, NULL);
		close(m->pfd);
		m->pfd = -1;
	}
	for (size_t i = 0; i < l->nprocs; i++) {
		struct proc *p = &l->procs[i];

		if (p->gone || p->member != idx)
			continue;
		loop_drop_proc(l, p);
		p->c = NULL;
	}
	if (m->running && l->running)
		l->running--;
	m->running = false;
	selfcheck__free(m->sc);
	m->sc = NULL;
	if (m->late)
		late_done(l, m);
	/* its object file's uprobes go with the last target using them */
	probes__release(loop_probes_of(l, m), m->file);
	m->file = -1;
	m->gone = true;
}

int session_add(struct session *node, const struct jemalloc_target *t, struct guard *g,
		struct session *s, char *err, size_t errlen)
{
	struct loop *l = node->loop;
	struct member *m;
	char *serr;
	size_t serrlen;
	int rc;

	if (!l)
		return hb_fail(err, errlen, -EINVAL, "the session is not running");
	m = member_slot(l);
	if (!m)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	memset(s, 0, sizeof(*s));
	s->reason = STOP_ERROR;
	*m = (struct member){ .s = s, .t = t, .guard = g, .pfd = -1, .file = -1 };
	/* this target's failure is said to the caller, not ended the session with */
	serr = l->err;
	serrlen = l->errlen;
	l->err = err;
	l->errlen = errlen;
	l->attach_coarse = hb_clock_ns(CLOCK_MONOTONIC_COARSE);
	rc = probes_for(l, t, &m->p);
	rc = rc ?: session_open_member(l, m);
	rc = rc ?: session_start_member(l, m);
	l->err = serr;
	l->errlen = serrlen;
	if (rc) {
		loop_restore_flag(m);
		drop_member(l, m);
		return rc;
	}
	s->start_wall_ns = hb_clock_ns(CLOCK_REALTIME);
	s->counters = node->counters;
	return 0;
}

/* The member of a node session whose collection is s, or NULL. */
static struct member *member_of(struct loop *l, const struct session *s)
{
	for (size_t i = 0; i < l->n; i++) {
		if (!l->m[i].gone && l->m[i].s == s)
			return &l->m[i];
	}
	return NULL;
}

int session_remove(struct session *node, struct session *s)
{
	struct loop *l = node->loop;
	struct member *m = l ? member_of(l, s) : NULL;
	int64_t now = hb_clock_ns(CLOCK_REALTIME);
	int rc;

	if (!m)
		return 0;
	/* what it sampled so far is in its collector, then its flag goes back */
	loop_consume(l->rb);
	rc = loop_restore_flag(m);
	if (rc == -ESRCH)
		rc = 0;
	if (m->ours) {
		/* as stop() does: the forks that copied the flag just before it went off */
		ring_buffer__poll(l->rb, DRAIN_MS);
		loop_consume(l->rb);
		events_save_states(l);
		forks__restore(&s->forks, m->tg.addr, m->tg.orig, m->t->path, &s->fork_result);
		if (!rc && !s->fork_result.failed && m->guard)
			guard__clear(m->guard);
	}
	if (!s->exited) {
		s->duration_ns = now - s->start_wall_ns;
		collector__set_stop_time(s->collector, (uint64_t)hb_clock_ns(CLOCK_MONOTONIC));
	}
	loop_all_counters(l, &s->counters);
	drop_member(l, m);
	return rc;
}
