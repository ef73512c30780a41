// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The windows other runs ask this one for (serve.h): a tap per request, the
 * target's events written as a recording into the asker's file.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "collect/recording.h"
#include "sampling/loop.h"
#include "sampling/serve.h"
#include "sampling/session.h"
#include "util/clock.h"

/*
 * Tap tp ends (why: the asker hung up, its duration passed, the target or
 * the run ended): its STOP record with the hits of its own span, the
 * recording closed, the asker told (rc, or the recording's error); the slot
 * freed. The ring buffer is drained by the caller when it can be.
 */
static void tap_end(struct loop *l, struct tap *tp, uint32_t why)
{
	const struct heapbpf_counters *c = &l->s->counters;
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	struct rec_stop st = {
		.stop_mono_ns = (uint64_t)now,
		.attach_coarse_ns = tp->attach_coarse,
		.duration_ns = (uint64_t)(now - tp->t0),
		.alloc_hits = c->alloc_hits - tp->c0.alloc_hits,
		.free_hits = c->free_hits - tp->c0.free_hits,
		.alloc_drops = c->alloc_drops - tp->c0.alloc_drops,
		.free_drops = c->free_drops - tp->c0.free_drops,
		.read_faults = c->read_faults - tp->c0.read_faults,
		.reason = why,
	};
	int err, cerr;

	if (!tp->rec)
		return;
	err = loop_record_meta_u64(tp->rec, "stop_mono_ns", (uint64_t)now);
	err = err ?: recording__stop(tp->rec, &st);
	cerr = recording__close(tp->rec);
	err = err ? err : cerr;
	tp->rec = NULL;
	serve_reply(tp->conn, err, err ? strerror(-err) : "");
	if (tp->tfd >= 0)
		close(tp->tfd);
	tp->conn = tp->tfd = -1;
}

/* Every tap of m (NULL: all), ended for why; what the ring buffer holds goes in first. */
void taps_end(struct loop *l, const struct member *m, uint32_t why)
{
	bool drained = false;

	for (size_t i = 0; i < MAX_TAPS; i++) {
		struct tap *tp = &l->taps[i];

		if (!tp->rec || (m && tp->m != m))
			continue;
		if (!drained && l->rb)
			loop_consume(l->rb);
		if (!drained)
			loop_read_counters(l);
		drained = true;
		tap_end(l, tp, why);
	}
}

/*
 * A target's events into the taps on it: the recording the asker turns into
 * its window. Only events from the tap's start on: one sampled before it and
 * read after it (the ring buffer's backlog) is the holder's alone, as it
 * would not have been sampled for a run that attached then; its free, like
 * those of older objects, is one of an object sampled before attach.
 */
void taps_event(struct loop *l, __u32 pid, const void *data, size_t len)
{
	uint64_t ts = 0;

	if (len >= offsetof(struct heapbpf_free_event, ts) + sizeof(ts))
		memcpy(&ts, (const char *)data + offsetof(struct heapbpf_free_event, ts),
		       sizeof(ts));
	for (size_t i = 0; i < MAX_TAPS; i++) {
		struct tap *tp = &l->taps[i];

		/* a write error is sticky in its recorder, and said to the asker at the end */
		if (tp->rec && (__u32)tp->pid == pid && ts >= (uint64_t)tp->t0)
			recording__event(tp->rec, data, len);
	}
}

/* The target of the session with pid, running: a tap's; else NULL. */
static struct member *served_member(struct loop *l, pid_t pid)
{
	for (size_t i = 0; i < l->n; i++) {
		struct member *m = &l->m[i];

		if (!m->gone && m->running && !m->s->failed && !m->s->unconfirmed &&
		    m->t->pid == pid)
			return m;
	}
	return NULL;
}

/* Another run asks for a window of one of the targets: a tap from now on, or a refusal. */
int taps_start(struct loop *l)
{
	struct serve_req req;
	struct member *m;
	struct tap *tp = NULL;
	size_t i;
	int rc;

	if (serve__accept(l->sv, &req))
		return 0; /* refused; the asker was told */
	m = served_member(l, req.pid);
	for (i = 0; m && i < MAX_TAPS && !tp; i++)
		tp = l->taps[i].rec ? NULL : &l->taps[i];
	if (!m || !tp) {
		close(req.out);
		serve_reply(req.conn, m ? -EBUSY : -ESRCH,
			    m ? "it serves as many requests as it can at once; ask again later"
			      : "it does not sample that process (now)");
		return 0;
	}
	i--;
	/* what the ring buffer holds was sampled before the request: the holder's alone */
	if (l->rb)
		loop_consume(l->rb);
	loop_read_counters(l);
	*tp = (struct tap){ .m = m, .pid = req.pid, .conn = req.conn, .tfd = -1 };
	tp->t0 = hb_clock_ns(CLOCK_MONOTONIC);
	/* objects sampled before now are not the asker's, as for a run that attached now */
	tp->attach_coarse = (uint64_t)hb_clock_ns(CLOCK_MONOTONIC_COARSE);
	tp->c0 = l->s->counters;
	rc = recording__open_fd(req.out, &tp->rec);
	if (rc) {
		tp->rec = NULL;
		serve_reply(req.conn, rc, strerror(-rc));
		return 0;
	}
	rc = loop_record_header_to(tp->rec, m->s->symbolizer, m->t);
	rc = rc ?: loop_record_meta_u64(tp->rec, "attach_coarse_ns", tp->attach_coarse);
	rc = rc ?: loop_record_meta_u64(tp->rec, "start_mono_ns", (uint64_t)tp->t0);
	rc = rc
		     ?: loop_record_meta_u64(tp->rec, "start_wall_ns",
					     (uint64_t)hb_clock_ns(CLOCK_REALTIME));
	rc = rc ?: recording__flush(tp->rec);
	rc = rc ?: loop_add_fd(l->ep, tp->conn, EV_TAP + 2 * (uint32_t)i);
	if (!rc) {
		/* its end; or, until the asker hangs up, each second what came (taps_flush) */
		tp->live = !req.duration_ns;
		tp->tfd = tp->live ? loop_make_timer(1, 1)
				   : loop_make_timer((double)req.duration_ns / 1e9, 0);
		rc = tp->tfd < 0 ? tp->tfd
				 : loop_add_fd(l->ep, tp->tfd, EV_TAP + 2 * (uint32_t)i + 1);
	}
	if (rc) {
		epoll_ctl(l->ep, EPOLL_CTL_DEL, tp->conn, NULL);
		if (tp->tfd >= 0)
			close(tp->tfd);
		recording__close(tp->rec);
		tp->rec = NULL;
		serve_reply(tp->conn, rc, strerror(-rc));
	}
	return 0;
}

/* Tap tp ends now, off the loop: everything sampled up to now is its. */
static void tap_stop(struct loop *l, struct tap *tp, uint32_t why)
{
	epoll_ctl(l->ep, EPOLL_CTL_DEL, tp->conn, NULL);
	if (tp->tfd >= 0)
		epoll_ctl(l->ep, EPOLL_CTL_DEL, tp->tfd, NULL);
	if (l->rb)
		loop_consume(l->rb);
	loop_read_counters(l);
	tap_end(l, tp, why);
}

/*
 * A live tap's second: what the ring buffer holds and the drops so far
 * written, and flushed, so that the asker reads them now. A write error
 * ends the tap (said to the asker).
 */
static int tap_flush(struct loop *l, struct tap *tp)
{
	const struct heapbpf_counters *c = &l->s->counters;
	uint64_t n;
	int rc;

	if (read(tp->tfd, &n, sizeof(n)) != sizeof(n))
		return 0;
	if (l->rb)
		loop_consume(l->rb);
	loop_read_counters(l);
	rc = loop_record_meta_u64(tp->rec, "alloc_drops", c->alloc_drops - tp->c0.alloc_drops);
	rc = rc ?: loop_record_meta_u64(tp->rec, "free_drops", c->free_drops - tp->c0.free_drops);
	rc = rc ?: recording__flush(tp->rec);
	if (rc)
		tap_stop(l, tp, STOP_SIGNAL);
	return 0;
}

/* A tap's event: its asker hung up (even), or its duration passed or a second (odd). */
int taps_ready(struct loop *l, uint32_t k)
{
	struct tap *tp = &l->taps[k / 2];

	if (!tp->rec)
		return 0;
	if (k % 2 && tp->live)
		return tap_flush(l, tp);
	tap_stop(l, tp, k % 2 ? STOP_DURATION : STOP_SIGNAL);
	return 0;
}
