// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the session's files (session.c, events.c, taps.c, late.c) share of
 * the loop: its descriptors and timers, its tables of processes, the
 * recording's header, the ring buffer's drain, the counters and a target's
 * flag restored. It calls none of them: they call down into it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "collect/recording.h"
#include "jemalloc/target.h"
#include "sampling/loop.h"
#include "sampling/probes.h"
#include "sampling/session_types.h"
#include "symbols/symbolizer.h"
#include "util/errmsg.h"
#include "util/hooks.h"
#include "util/version.h"

void loop_init(struct loop *l, const struct session_opts *o, struct session *s, char *err,
	       size_t errlen)
{
	*l = (struct loop){ .o = o,
			    .s = s,
			    .ep = -1,
			    .sfd = -1,
			    .dfd = -1,
			    .tfd = -1,
			    .ifd = -1,
			    .lfd = -1,
			    .err = err,
			    .errlen = errlen };
}

int loop_add_fd(int ep, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int loop_make_timer(double first_s, double interval_s)
{
	struct itimerspec its = {};
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

	if (fd < 0)
		return -errno;
	its.it_value.tv_sec = (time_t)first_s;
	its.it_value.tv_nsec = (long)((first_s - (double)(time_t)first_s) * 1e9);
	if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
		its.it_value.tv_nsec = 1;
	its.it_interval.tv_sec = (time_t)interval_s;
	if (timerfd_settime(fd, 0, &its, NULL)) {
		close(fd);
		return -errno;
	}
	return fd;
}

int loop_record_meta_u64(struct recorder *r, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return recording__meta(r, key, buf);
}

/* What a report needs before the first event: who, which jemalloc, the mappings. */
int loop_record_header_to(struct recorder *r, const struct symbolizer *sym,
			  const struct jemalloc_target *t)
{
	char pid[16];
	int err = 0;

	snprintf(pid, sizeof(pid), "%d", t->pid);
	err = err ?: recording__meta(r, "heapbpf_version", HEAPBPF_VERSION);
	err = err ?: recording__meta(r, "pid", pid);
	err = err ?: recording__meta(r, "comm", t->comm);
	err = err ?: recording__meta(r, "jemalloc_version", t->version);
	err = err ?: recording__meta(r, "jemalloc_path", t->path);
	err = err ?: recording__meta(r, "is_main_exe", t->is_main_exe ? "1" : "0");
	err = err ?: recording__meta(r, "ns_prefix", t->ns_prefix);
	err = err ?: recording__meta(r, "pub_prefix", t->pub_prefix);
	err = err ?: loop_record_meta_u64(r, "lg_prof_sample", t->lg_prof_sample);
	for (size_t i = 0; !err && i < symbolizer__nobjects(sym); i++) {
		const struct sym_object *so = symbolizer__object(sym, i);
		struct rec_map m = { .start = so->start,
				     .end = so->limit,
				     .offset = so->file_offset };

		memcpy(m.perms, "r-xp", 5);
		snprintf(m.build_id, sizeof(m.build_id), "%s", so->build_id ? so->build_id : "");
		snprintf(m.path, sizeof(m.path), "%s", so->path);
		err = recording__map(r, &m);
	}
	return err ?: recording__flush(r);
}

/*
 * HEAPBPF_FAULT_INJECT=collect makes collection fail after the first batch of
 * events: the tests use it to check that an internal error restores the flag.
 */
static bool fault_collect(void)
{
	const char *f = hb_hook(HB_HOOK_FAULT_INJECT);

	return f && strcmp(f, "collect") == 0;
}

/* m's BPF object: one of its own layout's in a node session, else the session's. */
struct probes *loop_probes_of(const struct loop *l, const struct member *m)
{
	return m->p ? m->p : l->p;
}

/* One target whose failure is the session's: a session of one, not a node session's. */
bool loop_single(const struct loop *l)
{
	return l->n == 1 && !l->node;
}

struct proc *loop_proc_of(const struct loop *l, __u32 pid)
{
	uint32_t i;

	return hashmap__get(&l->by_pid, hashmap_hash_u64(pid), &i) || l->procs[i].gone
		       ? NULL
		       : &l->procs[i];
}

/* pid no longer followed nor sampled, by any of the session's BPF objects. */
void loop_untrack(const struct loop *l, pid_t pid)
{
	probes__untrack(l->p, pid);
	for (size_t i = 0; i < l->nmore; i++)
		probes__untrack(l->more[i], pid);
}

/* The BPF side's counters, summed over the session's objects. */
void loop_all_counters(const struct loop *l, struct heapbpf_counters *c)
{
	probes__counters(l->p, c);
	for (size_t i = 0; i < l->nmore; i++)
		probes__counters_add(l->more[i], c);
}

/*
 * A slot of l->procs to fill: one a node session's target left or a child
 * not followed that is gone, else a new one at the end.
 */
static int proc_slot(struct loop *l, size_t *at)
{
	for (size_t i = 0; i < l->nprocs; i++) {
		if (l->procs[i].gone && l->procs[i].pfd < 0 && (l->node || !l->procs[i].c)) {
			*at = i;
			return 0;
		}
	}
	if (l->nprocs == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct proc *v = realloc(l->procs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->procs = v;
		l->cap = cap;
	}
	*at = l->nprocs++;
	return 0;
}

/* A process joins the session (a pid reused by a new one replaces the old entry). */
int loop_add_proc(struct loop *l, pid_t pid, uint32_t member, struct collector *c, uint64_t start)
{
	size_t at;

	if (proc_slot(l, &at))
		return -ENOMEM;
	l->procs[at] =
		(struct proc){ .pid = pid, .member = member, .start = start, .c = c, .pfd = -1 };
	if (hashmap__put(&l->by_pid, hashmap_hash_u64((__u32)pid), (uint32_t)at)) {
		l->procs[at].gone = true;
		return -ENOMEM;
	}
	return 0;
}

/*
 * A process that is nothing more to the session (a child not followed that
 * exited or exec'ed, a node session's target that left): out of the BPF
 * maps and the pid table, unless its pid is another's by now.
 */
void loop_drop_proc(struct loop *l, struct proc *p)
{
	uint32_t i;

	if (loop_proc_of(l, p->pid) == p) {
		loop_untrack(l, p->pid);
		hashmap__del(&l->by_pid, hashmap_hash_u64((__u32)p->pid), &i);
	}
	p->gone = true;
}

int loop_consume(struct ring_buffer *rb)
{
	int err = ring_buffer__consume(rb);

	if (err < 0)
		return err;
	return err > 0 && fault_collect() ? -EIO : 0;
}

/*
 * m's flag back to what it was. A target that exec'd without heapbpf hearing
 * it (its event dropped): the flag went with the old image, nothing is
 * written into the new one (toggle.h), and there is nothing left to restore.
 */
int loop_restore_flag(struct member *m)
{
	int rc = toggle__restore(&m->tg);

	if (rc != -ESTALE)
		return rc;
	hb_note("pid %d exec'd: its prof_active went with its old image, nothing to restore",
		m->t->pid);
	return 0;
}

/* A callback's return: 1 ends the session as asked. */
int loop_asked(struct session *s, int rc)
{
	if (rc > 0)
		s->reason = STOP_USER;
	return rc;
}

/* The BPF side's counters, for every target (one BPF object serves them all). */
void loop_read_counters(struct loop *l)
{
	loop_all_counters(l, &l->s->counters);
	for (size_t i = 0; i < l->n; i++) {
		if (!l->m[i].gone && l->m[i].s != l->s)
			l->m[i].s->counters = l->s->counters;
	}
}
