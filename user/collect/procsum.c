// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>

#include "collect/procsum.h"

struct procsum {
	struct collector_totals now, peak;
	struct collector_totals ckpts[COLLECTOR_MAX_CHECKPOINTS];
	size_t nckpts;
	uint64_t next_ckpt, ckpt_every;
};

int procsum__new(struct procsum **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void procsum__free(struct procsum *s)
{
	free(s);
}

/* Every other checkpoint goes, the first one stays: the collector's halving, totals only. */
static void halve(struct procsum *s)
{
	for (size_t i = 0; i < s->nckpts; i += 2)
		s->ckpts[i / 2] = s->ckpts[i];
	s->nckpts = (s->nckpts + 1) / 2;
	s->ckpt_every *= 2;
}

/* The checkpoints due before an event at ts, on the grid of the first event's time. */
static void checkpoints_before(struct procsum *s, uint64_t ts)
{
	if (!s->nckpts) {
		s->ckpt_every = CHECKPOINT_FIRST_NS;
		s->next_ckpt = ts;
	}
	while (s->next_ckpt != UINT64_MAX && ts >= s->next_ckpt) {
		if (s->nckpts == COLLECTOR_MAX_CHECKPOINTS)
			halve(s);
		s->ckpts[s->nckpts] = s->now;
		s->ckpts[s->nckpts++].ts = s->next_ckpt;
		if (s->next_ckpt > UINT64_MAX - s->ckpt_every || s->ckpt_every > UINT64_MAX / 4)
			s->next_ckpt = UINT64_MAX;
		else
			s->next_ckpt += s->ckpt_every;
	}
}

void procsum__add(struct procsum *s, const struct collector_totals *before,
		  const struct collector_totals *after)
{
	uint64_t ts = after->ts;

	if (after->inuse_bytes == before->inuse_bytes &&
	    after->inuse_samples == before->inuse_samples &&
	    after->inuse_space == before->inuse_space && after->alloc_space == before->alloc_space)
		return;
	checkpoints_before(s, ts);
	s->now.inuse_samples += after->inuse_samples - before->inuse_samples;
	s->now.inuse_bytes += after->inuse_bytes - before->inuse_bytes;
	s->now.inuse_space += after->inuse_space - before->inuse_space;
	s->now.alloc_space += after->alloc_space - before->alloc_space;
	if (ts > s->now.ts)
		s->now.ts = ts;
	/* the highest estimated in-use, as each collector's peak */
	if (s->now.inuse_space > s->peak.inuse_space) {
		s->peak = s->now;
		s->peak.ts = ts;
	}
}

void procsum__leave(struct procsum *s, const struct collector_totals *gone, uint64_t ts)
{
	struct collector_totals after = *gone;

	after.inuse_samples = 0;
	after.inuse_bytes = 0;
	after.inuse_space = 0;
	after.ts = ts > s->now.ts ? ts : s->now.ts;
	procsum__add(s, gone, &after);
}

const struct collector_totals *procsum__totals(const struct procsum *s)
{
	return &s->now;
}

const struct collector_totals *procsum__peak(const struct procsum *s)
{
	return &s->peak;
}

const struct collector_totals *procsum__checkpoints(const struct procsum *s, size_t *n)
{
	*n = s->nckpts;
	return s->ckpts;
}
