// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/errmsg.h"
#include "symbols/proc.h"
#include "sampling/selfcheck.h"

/* Allocations remembered for the free side's comparison. */
#define SEEN_MAX 256
/* Re-reads of /proc/PID/maps for an address the snapshot lacks (jemalloc maps as it goes). */
#define REREAD_MAX 32
/* No backtrace jemalloc takes is this long (prof_bt_max, 5.3.1: no real stack is). */
#define SELFCHECK_BT_MAX (1U << 20)
/* No usable size is this large: user space ends at 2^47 on x86-64. */
#define USIZE_MAX (1ULL << 47)

struct seen {
	uint64_t ptr, tctx, usize;
};

struct selfcheck {
	const struct jemalloc_target *t;
	const struct proc_maps *maps; /* t->maps, or own when re-read */
	struct proc_maps *own;
	unsigned int rereads;
	uint64_t attach_coarse_ns;
	unsigned int allocs, frees; /* passed */
	struct seen seen[SEEN_MAX];
	size_t nseen;
	bool confirmed;
	char why[1024];
};

int selfcheck__new(const struct jemalloc_target *t, uint64_t attach_coarse_ns,
		   struct selfcheck **out)
{
	struct selfcheck *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	sc->t = t;
	sc->maps = t->maps;
	sc->attach_coarse_ns = attach_coarse_ns;
	*out = sc;
	return 0;
}

void selfcheck__free(struct selfcheck *sc)
{
	if (!sc)
		return;
	proc_maps__free(sc->own);
	free(sc);
}

bool selfcheck__confirmed(const struct selfcheck *sc)
{
	return sc->confirmed;
}

const char *selfcheck__why(const struct selfcheck *sc)
{
	return sc->why[0] ? sc->why : NULL;
}

void selfcheck__counts(const struct selfcheck *sc, unsigned int *allocs, unsigned int *frees)
{
	*allocs = sc->allocs;
	*frees = sc->frees;
}

static bool perms_ok(const struct proc_map *m, char perm)
{
	return m && (perm == 'x' ? m->perms[2] == 'x' : m->perms[1] == 'w');
}

/*
 * addr inside a mapping with perm ('w' or 'x'): in the snapshot, else in a
 * fresh one (jemalloc maps new extents as it goes). A process whose mappings
 * cannot be read again (it exited) is not held against the layout.
 */
static bool in_maps(struct selfcheck *sc, uint64_t addr, char perm)
{
	struct proc_maps *m;

	if (perms_ok(proc_maps__find(sc->maps, addr), perm))
		return true;
	if (sc->t->pid <= 0 || sc->rereads >= REREAD_MAX)
		return false;
	sc->rereads++;
	if (proc_maps__read(sc->t->pid, &m))
		return true;
	proc_maps__free(sc->own);
	sc->own = m;
	sc->maps = m;
	return perms_ok(proc_maps__find(sc->maps, addr), perm);
}

/* The refusal: one sentence naming the version, the layout, how it was chosen and what failed. */
__attribute__((format(printf, 2, 3))) static int misfit(struct selfcheck *sc, const char *fmt, ...)
{
	const struct jemalloc_target *t = sc->t;
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return hb_fail(sc->why, sizeof(sc->why), -EPROTO,
		       "jemalloc %s in pid %d (%s) does not fit heapbpf's %s layout, which %s and "
		       "which neither a release string nor debug info confirms: %s (after %u "
		       "sampled allocations and %u frees that fit); heapbpf stopped at once; give "
		       "it the object's debug info, or force the right layout with "
		       "--jemalloc-layout",
		       t->version, t->pid, t->path, t->layout->name,
		       t->layout_forced ? "--jemalloc-layout forced" : "its version number names",
		       detail, sc->allocs, sc->frees);
}

/*
 * Where an event's object (when the function passes its pointer) and tctx
 * live: jemalloc's heap, so in writable mappings. whose_ptr and whose_tctx
 * begin the sentence ("a sampled object's", "a sample's").
 */
static int in_writable(struct selfcheck *sc, bool has_ptr, uint64_t ptr, uint64_t tctx,
		       const char *whose_ptr, const char *whose_tctx)
{
	if (has_ptr && !in_maps(sc, ptr, 'w'))
		return misfit(sc, "%s pointer 0x%llx lies in no writable mapping", whose_ptr,
			      (unsigned long long)ptr);
	if (tctx <= 1 || !in_maps(sc, tctx, 'w'))
		return misfit(sc, "%s tctx 0x%llx lies in no writable mapping", whose_tctx,
			      (unsigned long long)tctx);
	return 0;
}

static void done_one(struct selfcheck *sc)
{
	sc->confirmed = sc->allocs >= SELFCHECK_ALLOCS && sc->frees >= SELFCHECK_FREES;
}

static int check_frames(struct selfcheck *sc, const struct heapbpf_alloc_event *e)
{
	for (uint32_t i = 0; i < e->nframes; i++) {
		/* a return address: the call is just before it */
		if (!e->frames[i] || !in_maps(sc, e->frames[i] - 1, 'x'))
			return misfit(sc,
				      "a sampled backtrace holds 0x%llx"
				      ", which lies in no executable mapping",
				      (unsigned long long)e->frames[i]);
	}
	return 0;
}

int selfcheck__alloc(struct selfcheck *sc, const struct heapbpf_alloc_event *e)
{
	const struct heapbpf_layout *b = &sc->t->layout->bpf;
	int rc;

	if (sc->why[0])
		return -EPROTO;
	if (sc->confirmed)
		return 0;
	if (e->flags & HEAPBPF_F_READ_FAULT)
		return misfit(sc,
			      "reading a sample's backtrace through the tctx at 0x%llx"
			      " faulted",
			      (unsigned long long)e->tctx);
	/* above 128 (5.3.1's prof_bt_max): the BPF side kept the innermost 128 */
	if (e->bt_len < 1 ||
	    e->bt_len > (sc->t->layout->bt_max_opt ? SELFCHECK_BT_MAX : HEAPBPF_MAX_FRAMES) ||
	    e->nframes != (e->bt_len > HEAPBPF_MAX_FRAMES ? HEAPBPF_MAX_FRAMES : e->bt_len))
		return misfit(sc,
			      "a sampled backtrace is %llu"
			      " frames long (jemalloc's are "
			      "1 to 128, to its prof_bt_max in 5.3.1)",
			      (unsigned long long)e->bt_len);
	if (!e->usize || e->usize >= USIZE_MAX || (e->size && e->size > e->usize))
		return misfit(sc, "a sample's usable size reads %llu",
			      (unsigned long long)e->usize);
	rc = in_writable(sc, b->alloc_ptr_arg != HEAPBPF_ARG_NONE, e->ptr, e->tctx,
			 "a sampled object's", "a sample's");
	rc = rc ?: check_frames(sc, e);
	if (rc)
		return rc;
	if (sc->nseen < SEEN_MAX)
		sc->seen[sc->nseen++] = (struct seen){ e->ptr, e->tctx, e->usize };
	sc->allocs++;
	done_one(sc);
	return sc->confirmed ? 1 : 0;
}

static const struct seen *seen_by(const struct selfcheck *sc, uint64_t ptr, uint64_t tctx)
{
	for (size_t i = sc->nseen; i-- > 0;) {
		if ((ptr && sc->seen[i].ptr == ptr) || (!ptr && sc->seen[i].tctx == tctx))
			return &sc->seen[i];
	}
	return NULL;
}

static uint64_t coarse_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The free's own fields, before it is compared with the allocations. */
static int free_fields(struct selfcheck *sc, const struct heapbpf_free_event *e)
{
	const struct heapbpf_layout *b = &sc->t->layout->bpf;
	bool info = b->free_info_arg != HEAPBPF_ARG_NONE;
	int rc;

	if (e->flags & HEAPBPF_F_READ_FAULT)
		return misfit(sc,
			      "reading a sampled free's context at 0x%llx"
			      " faulted",
			      (unsigned long long)e->tctx);
	if (!e->usize || e->usize >= USIZE_MAX)
		return misfit(sc, "a sampled free's usable size reads %llu",
			      (unsigned long long)e->usize);
	rc = in_writable(sc, b->free_ptr_arg != HEAPBPF_ARG_NONE, e->ptr, e->tctx,
			 "a sampled free's", "a sampled free's");
	if (rc)
		return rc;
	if (info && (!e->alloc_size || e->alloc_size > e->usize))
		return misfit(sc,
			      "a sampled free's prof_info_t gives a requested size of %llu"
			      ", not within its usable size",
			      (unsigned long long)e->alloc_size);
	if (info && b->info_has_time &&
	    (!e->alloc_time_ns || e->alloc_time_ns > coarse_now() + 1000000000ULL))
		return misfit(sc,
			      "a sampled free's prof_info_t gives an allocation time of %llu"
			      " ns, in the future",
			      (unsigned long long)e->alloc_time_ns);
	return 0;
}

int selfcheck__free_event(struct selfcheck *sc, const struct heapbpf_free_event *e)
{
	const struct heapbpf_layout *b = &sc->t->layout->bpf;
	const struct seen *a;
	bool before;
	int rc;

	if (sc->why[0])
		return -EPROTO;
	if (sc->confirmed)
		return 0;
	rc = free_fields(sc, e);
	if (rc)
		return rc;
	a = seen_by(sc, b->free_ptr_arg != HEAPBPF_ARG_NONE ? e->ptr : 0, e->tctx);
	if (a && a->ptr == e->ptr && e->ptr && (a->usize != e->usize || a->tctx != e->tctx))
		return misfit(sc,
			      "the free of a sampled object gives another usable size or tctx "
			      "than its allocation (tctx 0x%llx"
			      ")",
			      (unsigned long long)e->tctx);
	/*
	 * A tctx no allocation showed: an object sampled before heapbpf attached
	 * (jemalloc's allocation time says so where it keeps one, its pointer
	 * where the free passes one), else a misread context.
	 */
	before = (e->alloc_time_ns && e->alloc_time_ns < sc->attach_coarse_ns) ||
		 b->free_ptr_arg != HEAPBPF_ARG_NONE;
	if (!a && !before)
		return misfit(sc,
			      "a sampled free's tctx 0x%llx"
			      " belongs to no sampled allocation",
			      (unsigned long long)e->tctx);
	sc->frees++;
	done_one(sc);
	return sc->confirmed ? 1 : 0;
}

int selfcheck__event(struct selfcheck *sc, const void *data, size_t len)
{
	__u32 head[2];

	if (len < sizeof(head))
		return 0;
	memcpy(head, data, sizeof(head));
	/* both records carry the process in their second field */
	if (sc->t->pid > 0 && head[1] != (__u32)sc->t->pid)
		return 0;
	if (head[0] == HEAPBPF_EV_ALLOC && len >= HEAPBPF_ALLOC_EVENT_SIZE(0)) {
		const struct heapbpf_alloc_event *a = data;

		/* a malformed record is the collector's to count, not the layout's fault */
		if (a->nframes > HEAPBPF_MAX_FRAMES || len < HEAPBPF_ALLOC_EVENT_SIZE(a->nframes))
			return 0;
		return selfcheck__alloc(sc, a);
	}
	if (head[0] == HEAPBPF_EV_FREE && len >= sizeof(struct heapbpf_free_event))
		return selfcheck__free_event(sc, data);
	return 0;
}
