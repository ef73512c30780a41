// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the session's ring buffer brings: a sampled allocation or free of a
 * target (into its collector, the recording and the taps), a fork or exec
 * in a target's tree (--follow-forks, the flag of children), an OOM victim
 * (heapbpf watch), and the checks of the first samples (no backtraces, an
 * unconfirmed layout).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "collect/collector.h"
#include "collect/procsum.h"
#include "collect/recording.h"
#include "sampling/forks.h"
#include "sampling/guard.h"
#include "sampling/loop.h"
#include "sampling/probes.h"
#include "sampling/selfcheck.h"
#include "sampling/session.h"
#include "util/clock.h"
#include "util/errmsg.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* heapbpf watch: each target chosen as an OOM victim, now that its events are all in. */
int events_run_oom(struct loop *l)
{
	const struct session_opts *o = l->o;

	if (!l->oom_pending)
		return 0;
	l->oom_pending = false;
	loop_read_counters(l);
	for (size_t i = 0; i < l->n; i++) {
		struct session *s = l->m[i].s;
		int rc;

		if (l->m[i].gone || !s->oom_pending)
			continue;
		s->oom_pending = false;
		rc = o->on_oom ? loop_asked(l->s, o->on_oom(s, &s->oom, o->oom_arg)) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * A fork's record and the state file that lists its child: written once per
 * drain, not per fork. A service forking a thousand helpers a second would
 * otherwise have its whole list of children rewritten a thousand times a
 * second. The window a kill -9 can leave a child unlisted is the same: from
 * its fork until heapbpf is back from the ring buffer.
 */
void events_save_states(struct loop *l)
{
	for (size_t i = 0; i < l->n; i++) {
		struct member *m = &l->m[i];

		if (!m->state_due)
			continue;
		m->state_due = false;
		if (!m->gone && m->guard &&
		    guard__save(m->guard, m->tg.addr, m->tg.orig, &m->s->forks))
			m->s->fork_state_err = true;
	}
}

/* A followed process is gone (exit, exec): its in-use leaves its tree's sum, once. */
static void leave_sum(struct session *s, struct proc *p)
{
	if (!p->c || !s->sum || p->left_sum)
		return;
	p->left_sum = true;
	procsum__leave(s->sum, collector__totals(p->c), (uint64_t)hb_clock_ns(CLOCK_MONOTONIC));
}

/*
 * A followed child exited: what it sampled is in the ring buffer, taken now;
 * then its pid leaves the BPF maps, for a process that gets it next is none
 * of ours (with several targets, the uprobes serve every process mapping the
 * object, and only the maps tell ours apart).
 */
int events_followed_exit(struct loop *l, size_t i, bool drain)
{
	struct proc *p = &l->procs[i];
	pid_t pid = p->pid;
	struct collector *c;
	int err = 0;

	if (p->pfd >= 0) {
		epoll_ctl(l->ep, EPOLL_CTL_DEL, p->pfd, NULL);
		close(p->pfd);
		p->pfd = -1;
	}
	/*
	 * Out of the maps first (unless another process of the tree has its pid
	 * by now): what it committed to the ring buffer stays there.
	 */
	if (loop_proc_of(l, pid) == p)
		loop_untrack(l, pid);
	if (drain)
		err = loop_consume(l->rb);
	/* the drain may have moved l->procs (a fork in it): by index from here */
	c = l->procs[i].c;
	if (c && !collector__stop_time(c))
		collector__set_stop_time(c, (uint64_t)hb_clock_ns(CLOCK_MONOTONIC));
	leave_sum(l->m[l->procs[i].member].s, &l->procs[i]);
	hb_note("followed pid %d exited; its profile holds what was collected until then", pid);
	return err;
}

/*
 * A followed child's exit, watched on the event loop. One gone already ends
 * now; its events still in the ring buffer come after this one (called while
 * the ring buffer is consumed) and are collected all the same. One whose exit
 * cannot be watched stays followed until the end, said.
 */
static int watch_followed(struct loop *l, size_t i)
{
	pid_t pid = l->procs[i].pid;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), err;

	if (pfd < 0 && errno == ESRCH)
		return events_followed_exit(l, i, false);
	err = pfd < 0 ? -errno : loop_add_fd(l->ep, pfd, EV_PROC + (uint32_t)i);
	if (!err) {
		l->procs[i].pfd = pfd;
		return 0;
	}
	if (pfd >= 0)
		close(pfd);
	hb_error("cannot watch followed pid %d's exit (%s): it stays followed until the end", pid,
		 strerror(-err));
	return 0;
}

/*
 * --follow-forks: a child gets a collector and uprobes of its own. What it
 * samples between its fork and the attach is not seen: it is said at once.
 */
static int follow_child(struct loop *l, struct member *m, pid_t child, pid_t parent)
{
	struct session *s = m->s;
	struct collector_proc *v = realloc(s->procs, (s->nprocs + 1) * sizeof(*v));
	int err;

	if (!v)
		return -ENOMEM;
	s->procs = v;
	err = collector__new(collector__period(s->collector), &v[s->nprocs].c);
	if (err)
		return err;
	if (l->o->temporary_ns)
		collector__set_temporary_threshold(v[s->nprocs].c, l->o->temporary_ns);
	v[s->nprocs].pid = child;
	collector__set_attach_time(v[s->nprocs].c, hb_clock_ns(CLOCK_MONOTONIC_COARSE));
	loop_proc_of(l, child)->c = v[s->nprocs].c;
	s->nprocs++;
	err = probes__attach_pid(l->p, m->t, child);
	if (err) {
		/* it exited already, or cannot be probed: its flag is restored all the same */
		hb_error("cannot follow pid %d (forked from %d): %s", child, parent,
			 strerror(-err));
		return 0;
	}
	hb_note("following pid %d (forked from %d)", child, parent);
	return watch_followed(l, (size_t)(loop_proc_of(l, child) - l->procs));
}

/*
 * A target exec'ed: its flag went with its old image (nothing is ever written
 * at that address again); a node session's target counts as exited.
 */
static void member_exec(struct loop *l, struct member *m)
{
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);

	m->tg.changed = false;
	if (!l->node || !m->running)
		return;
	m->running = false;
	l->running--;
	m->s->exited = true;
	m->s->duration_ns = hb_clock_ns(CLOCK_REALTIME) - m->s->start_wall_ns;
	collector__set_stop_time(m->s->collector, (uint64_t)now);
}

/*
 * A fork in a target's tree while its prof_active is on: the child's copy of
 * the flag is ours to restore, and the state file a killed run leaves says so.
 */
static int on_proc_event(struct loop *l, const struct heapbpf_proc_event *e)
{
	struct proc *parent = loop_proc_of(l, e->pid);
	struct member *m = parent ? &l->m[parent->member] : NULL;
	uint64_t start;
	int rc;

	/*
	 * A process of ours that exited left its pid free; one that has it now
	 * (forked by another: an exec would have untracked it) is none of ours,
	 * nor are its children. One gone already cannot be told: taken as ours.
	 */
	start = parent && parent->start ? proc_start_time((pid_t)e->pid) : 0;
	if (start && start != parent->start) {
		loop_untrack(l, (pid_t)e->pid);
		if (e->type == HEAPBPF_EV_FORK)
			loop_untrack(l, (pid_t)e->child);
		return 0;
	}

	if (e->type == HEAPBPF_EV_EXEC) {
		if (m) {
			forks__exec(&m->s->forks, (pid_t)e->pid);
			/* its heap is gone with its image */
			leave_sum(m->s, parent);
		}
		loop_untrack(l, (pid_t)e->pid);
		if (m && m->t->pid == (pid_t)e->pid)
			member_exec(l, m);
		else if (parent && !parent->c && parent->pfd < 0)
			loop_drop_proc(l, parent);
		return 0;
	}
	rc = m && m->ours ? forks__add(&m->s->forks, (pid_t)e->child) : 0;
	if (rc <= 0) {
		/* a thread, a task already gone, or a flag we did not switch on */
		if (!rc)
			loop_untrack(l, (pid_t)e->child);
		return rc;
	}
	rc = loop_add_proc(l, (pid_t)e->child, (uint32_t)(m - l->m), NULL,
			   m->s->forks.v[m->s->forks.n - 1].start);
	/*
	 * The BPF side tracked the child at its fork. Its pid may be one an
	 * exited child of ours had, and a sweep that read the ring buffer before
	 * this record untracks that pid when it drops the old entry: tracked
	 * again here, or the child's own forks would go unseen. (A full map
	 * fails here as it did at the fork, which counted it: untracked_forks.)
	 */
	if (rc)
		return rc;
	probes__track(loop_probes_of(l, m), (pid_t)e->child);
	if (++l->children >= (l->sweep_at ? l->sweep_at : SWEEP_MIN))
		l->sweep_due = true;
	/* written once for every fork this drain brings (events_save_states) */
	m->state_due = m->guard != NULL;
	return l->o->follow_forks ? follow_child(l, m, (pid_t)e->child, (pid_t)e->pid) : 0;
}

/*
 * A layout neither a release string nor DWARF confirms (selfcheck.h):
 * -EPROTO once an event of its target does not fit; such an event is
 * neither recorded nor counted.
 */
static int layout_unfit(const struct loop *l, const struct proc *pr, const void *data, size_t len)
{
	const struct member *m = pr ? &l->m[pr->member] : NULL;

	if (!m || !m->sc)
		return 0;
	if (selfcheck__event(m->sc, data, len) == 1) {
		hb_note("pid %d: its first %d samples and %d frees fit the %s layout", m->t->pid,
			SELFCHECK_ALLOCS, SELFCHECK_FREES, m->t->layout->name);
		m->s->unconfirmed = false;
	}
	return selfcheck__why(m->sc) ? -EPROTO : 0;
}

/*
 * The kernel chose a process of the session as an OOM victim: a target's
 * callback runs once the ring buffer is drained up to here (run_oom);
 * a followed child's end is its pidfd's business.
 */
static int on_oom_event(struct loop *l, const struct heapbpf_oom_event *e)
{
	const struct proc *pr = loop_proc_of(l, e->pid);
	struct member *m;

	if (!pr || pr->member >= l->n)
		return 0;
	m = &l->m[pr->member];
	if (m->t->pid != (pid_t)e->pid)
		return 0;
	m->s->oom = *e;
	m->s->oom_victim = true;
	m->s->oom_pending = true;
	l->oom_pending = true;
	return 0;
}

/* One event into a process's collector, and into its tree's sum (--follow-forks). */
static int collect_event(struct session *s, struct collector *c, void *data, size_t len)
{
	struct collector_totals before;
	int err;

	if (!s->sum)
		return collector__event(c, data, len);
	before = *collector__totals(c);
	err = collector__event(c, data, len);
	if (!err)
		procsum__add(s->sum, &before, collector__totals(c));
	return err;
}

/*
 * A process whose jemalloc takes no backtraces: a prof_backtrace hook of its
 * own (experimental.hooks.prof_backtrace, jemalloc 5.3.0 and later), as a
 * bridge that takes its stacks itself installs, leaves every sample's
 * prof_bt_t empty. After NOBT_SAMPLES such samples (jemalloc's own unwinder
 * always takes at least the caller's frame) the target stops with one
 * sentence, before its profile could hold a single empty stack; its flag is
 * restored (left on when the process had switched it on itself). -EPROTO
 * for it once said; its events after that are dropped.
 */
#define NOBT_SAMPLES 4

static int nobt_check(struct loop *l, const struct proc *pr, const void *data, size_t len)
{
	const struct heapbpf_alloc_event *e = data;
	char comm[HB_CLEAN_SIZE(sizeof(((struct jemalloc_target *)0)->comm))];
	struct member *m = pr ? &l->m[pr->member] : NULL;

	if (!m)
		return 0;
	if (m->nobt[0])
		return -EPROTO;
	if (m->bt_full || len < HEAPBPF_ALLOC_EVENT_SIZE(0) || e->type != HEAPBPF_EV_ALLOC ||
	    (e->flags & HEAPBPF_F_READ_FAULT))
		return 0;
	if (e->bt_len) {
		m->bt_full++;
		return 0;
	}
	if (++m->bt_empty < NOBT_SAMPLES)
		return 0;
	hb_fail(m->nobt, sizeof(m->nobt), -EPROTO,
		"pid %d (%s): its jemalloc takes no backtraces: its first %d sampled allocations "
		"came with empty stacks, so the process installed a prof_backtrace hook of its "
		"own (experimental.hooks.prof_backtrace) and its stacks come from that hook, not "
		"from jemalloc's tables; heapbpf stopped and wrote no profile, and %s",
		m->t->pid, hb_clean(comm, sizeof(comm), m->t->comm), NOBT_SAMPLES,
		m->tg.changed ? "switched prof.active back off"
			      : "left prof.active on, as the process had switched it on itself");
	if (!loop_single(l)) {
		hb_error("%s; profiling the other targets", m->nobt);
		m->s->failed = -EPROTO;
	}
	return -EPROTO;
}

/* The first target whose jemalloc took no backtraces: its sentence, else NULL. */
const char *events_nobt_why(const struct loop *l)
{
	for (size_t i = 0; i < l->n; i++) {
		if (!l->m[i].gone && l->m[i].nobt[0])
			return l->m[i].nobt;
	}
	return NULL;
}

/*
 * A node session's target whose samples do not fit its layout: said once,
 * marked failed, its events dropped; the agent lets it go (its flag back).
 */
static int unfit_member(struct loop *l, const struct proc *pr)
{
	struct member *m = &l->m[pr->member];
	char clean[HB_CLEAN_SIZE(1024)];

	if (!m->s->failed)
		hb_error("%s; profiling the other targets",
			 hb_clean(clean, sizeof(clean), selfcheck__why(m->sc)));
	m->s->failed = -EPROTO;
	return 0;
}

/* Ring-buffer callback: the recording (if any) sees every event the collector sees. */
int events_on_event(void *ctx, void *data, size_t len)
{
	struct loop *l = ctx;
	struct session *s = l->s;
	const __u32 *type = data;
	struct heapbpf_free_event freed;
	const struct proc *pr;

	if (len >= sizeof(struct heapbpf_proc_event) &&
	    (*type == HEAPBPF_EV_FORK || *type == HEAPBPF_EV_EXEC))
		return on_proc_event(l, data);
	if (len >= sizeof(struct heapbpf_oom_event) && *type == HEAPBPF_EV_OOM)
		return on_oom_event(l, data);
	/* both records carry the process in their second field */
	pr = len >= 2 * sizeof(__u32) ? loop_proc_of(l, type[1]) : NULL;
	/* the allocation time of a free of a process in another time namespace, in heapbpf's clock */
	if (pr && l->m[pr->member].clock_ahead_ns && *type == HEAPBPF_EV_FREE &&
	    len >= sizeof(struct heapbpf_free_event)) {
		memcpy(&freed, data, sizeof(freed));
		if (freed.alloc_time_ns)
			freed.alloc_time_ns -= (uint64_t)l->m[pr->member].clock_ahead_ns;
		data = &freed;
		len = sizeof(freed);
	}
	/* a node session's target that failed: nothing more of it, until it leaves */
	if (l->node && pr && l->m[pr->member].s->failed)
		return 0;
	/* with several targets, one that takes no backtraces is left out, the others go on */
	if (nobt_check(l, pr, data, len))
		return loop_single(l) ? -EPROTO : 0;
	if (layout_unfit(l, pr, data, len))
		return l->node ? unfit_member(l, pr) : -EPROTO;
	if (s->recorder && !s->record_err)
		s->record_err = recording__event(s->recorder, data, len);
	if (l->sv && len >= 2 * sizeof(__u32))
		taps_event(l, type[1], data, len);
	if (pr)
		return pr->c ? collect_event(l->m[pr->member].s, pr->c, data, len) : 0;
	/* one target: a short record is the collector's to count */
	return loop_single(l) ? collect_event(s, s->collector, data, len) : 0;
}
