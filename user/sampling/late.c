// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>

#include "collect/collector.h"
#include "sampling/loop.h"
#include "sampling/probes.h"
#include "sampling/session.h"
#include "util/clock.h"
#include "util/errmsg.h"

/*
 * jemalloc 5.2.1's late-activation bug: a thread that allocated while
 * prof_active was off never samples again once it is switched on. Seen from
 * outside: the allocation slow path (layout activity_fn) keeps running, but
 * no sample comes. LATE_PERIODS sampling periods' worth of bytes through the
 * slow path with no sample has a probability below e^-16 on a working
 * jemalloc. The check runs every LATE_CHECK_S (loop.h) and gives up (detaching the
 * extra probe) after LATE_MAX_S or at the first sample.
 */
#define LATE_PERIODS 16
#define LATE_MAX_S   10.0

/*
 * Each target on its own: settled once it samples, hit by the bug once its
 * slow path allocated LATE_PERIODS sampling periods' worth with no sample.
 * With one target that ends the session (-ENODATA); with several, that one
 * fails with the reason and the others go on. 1 when every target is
 * settled or the time is up (the probes go), 0 to keep checking.
 */
int late_active_check(struct loop *l)
{
	char msg[1024], clean[HB_CLEAN_SIZE(sizeof(msg))];
	bool open = false;
	size_t alive = 0;
	int err = loop_consume(l->rb); /* the samples so far, in each target's collector */

	if (err)
		return err;
	for (size_t i = 0; i < l->n; i++)
		alive += l->m[i].running && !l->m[i].s->failed;
	for (size_t i = 0; i < l->n; i++) {
		struct member *m = &l->m[i];
		uint64_t bytes = 0;

		if (m->late_settled || m->s->failed || !m->running)
			continue;
		if (collector__stats(m->s->collector)->allocs) {
			m->late_settled = true;
			continue;
		}
		err = probes__activity_bytes(l->p, m->t->pid, &bytes);
		if (err)
			return err;
		if (bytes < ((uint64_t)LATE_PERIODS << m->t->lg_prof_sample)) {
			open = true;
			continue;
		}
		m->s->late_active_bytes = bytes;
		m->late_settled = true;
		if (l->n == 1)
			return -ENODATA;
		late_active_error(m->s, m->t, msg, sizeof(msg));
		hb_error("%s; profiling the other targets", hb_clean(clean, sizeof(clean), msg));
		m->s->failed = -ENODATA;
		/* nothing to profile there: its flag back off now, its events no longer taken */
		err = loop_restore_flag(m);
		if (err && err != -ESRCH)
			hb_error("cannot switch jemalloc's prof_active back off in pid %d: %s",
				 m->t->pid, strerror(-err));
		loop_untrack(l, m->t->pid);
		alive--;
	}
	/* every target failed so: the session has nothing left to do */
	if (!alive)
		return -ENODATA;
	return !open || hb_clock_ns(CLOCK_MONOTONIC) - l->t0 > (int64_t)(LATE_MAX_S * 1e9);
}

/* A node session's target's late-activation check ends: its probe goes. */
void late_done(struct loop *l, struct member *m)
{
	probes__drop_activity(loop_probes_of(l, m), m->t->pid, m->late);
	m->late = NULL;
	m->s->late_open = false;
}

/*
 * A node session's targets join and leave at any time, so each one's check
 * has its own probe and its own LATE_MAX_S. One hit by the bug is said and
 * marked failed, as an unfit layout is: the agent lets it go (its flag back
 * off, no profile). The timer is disarmed once no check is running.
 */
int late_node_check(struct loop *l)
{
	char msg[1024], clean[HB_CLEAN_SIZE(sizeof(msg))];
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	bool open = false;
	int err = loop_consume(l->rb);

	if (err)
		return err;
	for (size_t i = 0; i < l->n; i++) {
		struct member *m = &l->m[i];
		uint64_t bytes = 0;

		if (m->gone || !m->late)
			continue;
		if (m->s->failed || !m->running || collector__stats(m->s->collector)->allocs ||
		    now - m->late_t0 > (int64_t)(LATE_MAX_S * 1e9)) {
			late_done(l, m);
			continue;
		}
		/* a count that cannot be read gives no verdict: the check ends, the target stays */
		if (probes__activity_bytes(loop_probes_of(l, m), m->t->pid, &bytes)) {
			late_done(l, m);
			continue;
		}
		if (bytes < ((uint64_t)LATE_PERIODS << m->t->lg_prof_sample)) {
			open = true;
			continue;
		}
		m->s->late_active_bytes = bytes;
		late_done(l, m);
		late_active_error(m->s, m->t, msg, sizeof(msg));
		hb_error("%s; profiling the other targets", hb_clean(clean, sizeof(clean), msg));
		m->s->failed = -ENODATA;
	}
	if (!open)
		timerfd_settime(l->lfd, 0, &(struct itimerspec){}, NULL);
	return 0;
}

/*
 * A node session's target whose layout has the late-activation bug: its
 * check begins with its own probe, before its flag goes on, and the timer
 * is armed for it.
 */
int late_check_begin(struct loop *l, struct member *m)
{
	const struct itimerspec every = {
		.it_value.tv_nsec = (long)(LATE_CHECK_S * 1e9),
		.it_interval.tv_nsec = (long)(LATE_CHECK_S * 1e9),
	};
	int rc;

	if (!m->t->activity_off || l->lfd < 0)
		return 0;
	rc = probes__attach_activity(loop_probes_of(l, m), m->t, &m->late);
	if (rc)
		return rc;
	m->late_t0 = hb_clock_ns(CLOCK_MONOTONIC);
	m->s->late_open = true;
	return timerfd_settime(l->lfd, 0, &every, NULL) ? -errno : 0;
}

int late_active_error(const struct session *s, const struct jemalloc_target *t, char *err,
		      size_t errlen)
{
	return hb_fail(
		err, errlen, -ENODATA,
		"jemalloc %s in pid %d allocated %.1f MiB through its slow path while prof_active "
		"was on but took no sample: jemalloc 5.2.1 never samples again in a thread that "
		"allocated while prof_active was off (fixed after 5.2.1 by jemalloc commit "
		"9e031c1d); start the service with %s=prof:true,prof_active:true so that sampling "
		"is on from the start (heapbpf then leaves it on), or use a jemalloc with the fix "
		"(5.3.0 or later)",
		t->version, t->pid, s->late_active_bytes / 1048576.0, t->conf_env);
}
