// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every stack's in-use at the instant the estimated in-use peaked
 * (collector.h): copied, stack by stack, only where it changed since.
 */
#include <errno.h>
#include <string.h>

#include "collect/collector.h"
#include "collect/collector_state.h"

/* Before stack id's in-use changes: it is to be copied at the next peak. */
int peak_mark(struct collector *c, uint32_t id)
{
	uint32_t *d;

	if (c->stacks[id].peak_dirty)
		return 0;
	d = collector_room_for_one(c->dirty, &c->cap_dirty, c->ndirty, sizeof(*d));
	if (!d)
		return -ENOMEM;
	c->dirty = d;
	c->dirty[c->ndirty++] = id;
	c->stacks[id].peak_dirty = 1;
	return 0;
}

/* Stack s's peak copy, made if it has none; NULL: no memory. */
static struct hb_stack_peak *peak_of(struct collector *c, struct hb_stack *s)
{
	struct hb_stack_peak *p;

	if (s->peak_at)
		return &c->peaks[s->peak_at - 1];
	p = collector_room_for_one(c->peaks, &c->cap_peaks, c->npeaks, sizeof(*p));
	if (!p)
		return NULL;
	c->peaks = p;
	s->peak_at = (uint32_t)++c->npeaks;
	return &c->peaks[s->peak_at - 1];
}

/*
 * After an allocation at ts: a new peak copies only the stacks changed
 * since the last copy, so each change is copied at most once (amortized
 * O(1) per event) and the peak_* fields are exact, not checkpoint-grained.
 * The peak is the highest estimated in-use (what the summary, the timeline
 * and the page show), not the most sampled bytes: a few large objects,
 * each sampled at about their size, would otherwise outweigh many small
 * ones that each stand for far more.
 */
int peak_check(struct collector *c, uint64_t ts)
{
	if (c->now.inuse_space <= c->peak.inuse_space)
		return 0;
	for (size_t i = 0; i < c->ndirty; i++) {
		struct hb_stack *s = &c->stacks[c->dirty[i]];
		struct hb_stack_peak *p;

		/* nothing in use now and no copy: its copy would be zeros */
		if (!s->peak_at && !s->inuse_samples && !s->inuse_bytes && !s->inuse_objects &&
		    !s->inuse_space) {
			s->peak_dirty = 0;
			continue;
		}
		p = peak_of(c, s);
		if (!p) {
			/* the ones copied leave the list; the rest stay on it */
			memmove(c->dirty, c->dirty + i, (c->ndirty - i) * sizeof(*c->dirty));
			c->ndirty -= i;
			return -ENOMEM;
		}
		*p = (struct hb_stack_peak){ s->inuse_samples, s->inuse_bytes, s->inuse_objects,
					     s->inuse_space };
		s->peak_dirty = 0;
	}
	c->ndirty = 0;
	c->peak = c->now;
	c->peak.ts = ts;
	return 0;
}
