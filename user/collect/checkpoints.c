// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The in-use of every stack at checkpoints (collector.h): taken before the
 * events due after them, by the events' own clock; kept as the changes
 * since the checkpoint before; halved when full.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collector.h"
#include "collect/collector_state.h"

void checkpoints_clear(struct collector_checkpoint *k)
{
	free(k->inuse);
	free(k->ids);
}

/* Where stack i is in k's changes, or k->nids. */
static size_t ckpt_find(const struct collector_checkpoint *k, size_t i)
{
	size_t lo = 0, hi = k->nids;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->ids[mid] < i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->nids && k->ids[lo] == i ? lo : k->nids;
}

float collector_ckpt_inuse(const struct collector_checkpoint *ck, size_t k, size_t i)
{
	for (size_t j = k + 1; j-- > 0;) {
		size_t at;

		if (i >= ck[j].nstacks)
			return 0.0f;
		at = ckpt_find(&ck[j], i);
		if (at < ck[j].nids)
			return ck[j].inuse[at];
	}
	return 0.0f;
}

void collector_ckpt_add_series(const struct collector_checkpoint *ck, size_t n, size_t i, float *y)
{
	float v = 0.0f;

	for (size_t k = 0; k < n; k++) {
		size_t at = ckpt_find(&ck[k], i);

		if (at < ck[k].nids)
			v = ck[k].inuse[at];
		y[k] += v;
	}
}

/* The same bits (-0.0 is a change from 0.0: reads give back exactly the value). */
static bool same_float(float a, float b)
{
	uint32_t x, y;

	memcpy(&x, &a, sizeof(x));
	memcpy(&y, &b, sizeof(y));
	return x == y;
}

/* c->last with room for every stack, the new ones 0. */
static int last_room(struct collector *c)
{
	float *nl;

	if (c->nlast >= c->nstacks)
		return 0;
	nl = reallocarray(c->last, c->nstacks, sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	memset(nl + c->nlast, 0, (c->nstacks - c->nlast) * sizeof(*nl));
	c->last = nl;
	c->nlast = c->nstacks;
	return 0;
}

/*
 * The stacks whose in-use changed since the last checkpoint (or that the
 * carry names) into k: a run whose stacks hold their in-use costs little
 * per checkpoint, where a float per stack would cost 400 KB at 100k stacks.
 */
static int checkpoint_fill(struct collector *c, struct collector_checkpoint *k)
{
	size_t nz = 0, n = c->nstacks, ci = 0;
	int err = last_room(c);

	k->nids = 0;
	k->ids = NULL;
	k->inuse = NULL;
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		bool carried = ci < c->ncarry && c->carry[ci] == i;

		ci += carried;
		nz += carried || !same_float((float)c->stacks[i].inuse_space, c->last[i]);
	}
	k->inuse = malloc((nz ? nz : 1) * sizeof(*k->inuse));
	k->ids = malloc((nz ? nz : 1) * sizeof(*k->ids));
	if (!k->inuse || !k->ids) {
		checkpoints_clear(k);
		return -ENOMEM;
	}
	ci = 0;
	for (size_t i = 0; i < n; i++) {
		float v = (float)c->stacks[i].inuse_space;
		bool carried = ci < c->ncarry && c->carry[ci] == i;

		ci += carried;
		if (carried || !same_float(v, c->last[i])) {
			k->ids[k->nids] = (uint32_t)i;
			k->inuse[k->nids++] = v;
			c->last[i] = v;
		}
	}
	free(c->carry);
	c->carry = NULL;
	c->ncarry = 0;
	return 0;
}

static int checkpoint_take(struct collector *c, uint64_t ts)
{
	struct collector_checkpoint *k = &c->ckpts[c->nckpts];
	double sum = 0;
	int err = checkpoint_fill(c, k);

	if (err)
		return err;
	for (size_t i = 0; i < c->nstacks; i++)
		sum += c->stacks[i].inuse_space;
	k->ts = ts;
	k->inuse_space = sum;
	k->alloc_space = c->now.alloc_space;
	k->nstacks = c->nstacks;
	c->nckpts++;
	return 0;
}

/* a's changes then b's, into b (b's values win): b then holds the changes since before a. */
static int checkpoint_merge(const struct collector_checkpoint *a, struct collector_checkpoint *b)
{
	size_t n = a->nids + b->nids, i = 0, j = 0, m = 0;
	uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	float *v = malloc((n ? n : 1) * sizeof(*v));

	if (!ids || !v) {
		free(ids);
		free(v);
		return -ENOMEM;
	}
	while (i < a->nids || j < b->nids) {
		if (j == b->nids || (i < a->nids && a->ids[i] < b->ids[j])) {
			ids[m] = a->ids[i];
			v[m++] = a->inuse[i++];
		} else {
			i += i < a->nids && a->ids[i] == b->ids[j];
			ids[m] = b->ids[j];
			v[m++] = b->inuse[j++];
		}
	}
	free(b->ids);
	free(b->inuse);
	b->ids = ids;
	b->inuse = v;
	b->nids = m;
	return 0;
}

/*
 * Every other checkpoint goes, the first one stays: twice the spacing, half
 * the count. A dropped one's changes go into the next one kept; the last
 * one's (nckpts is even here) into the next one taken, as the carry.
 */
static int checkpoints_halve(struct collector *c)
{
	struct collector_checkpoint *last = &c->ckpts[c->nckpts - 1];

	for (size_t i = 1; i + 1 < c->nckpts; i += 2) {
		int err = checkpoint_merge(&c->ckpts[i], &c->ckpts[i + 1]);

		if (err)
			return err;
	}
	if (c->nckpts % 2 == 0) {
		/* what the next checkpoint records against is what the dropped one holds */
		c->carry = last->ids;
		c->ncarry = last->nids;
		last->ids = NULL;
	}
	for (size_t i = 0; i < c->nckpts; i++) {
		if (i % 2)
			checkpoints_clear(&c->ckpts[i]);
		else
			c->ckpts[i / 2] = c->ckpts[i];
	}
	c->nckpts = (c->nckpts + 1) / 2;
	c->ckpt_every *= 2;
	return 0;
}

/*
 * The checkpoints due before an event at ts, each the state before it: the
 * events' own clock drives them, so a replay takes the same ones as the
 * live run. Nothing after sampling was switched off.
 */
int checkpoints_before(struct collector *c, uint64_t ts)
{
	int err;

	if (ts < c->next_ckpt || c->next_ckpt == UINT64_MAX || (c->stop_ns && ts >= c->stop_ns))
		return 0;
	if (!c->nckpts) {
		c->ckpt_every = CHECKPOINT_FIRST_NS;
		c->next_ckpt = ts;
	}
	while (ts >= c->next_ckpt) {
		/* next_ckpt is ckpts[0].ts + nckpts * ckpt_every, before and after halving */
		err = c->nckpts == COLLECTOR_MAX_CHECKPOINTS ? checkpoints_halve(c) : 0;
		err = err ?: checkpoint_take(c, c->next_ckpt);
		if (err)
			return err;
		/* a clock near 2^64 ns (a corrupt recording): the last checkpoint */
		if (c->next_ckpt > UINT64_MAX - c->ckpt_every || c->ckpt_every > UINT64_MAX / 4) {
			c->next_ckpt = UINT64_MAX;
			return 0;
		}
		c->next_ckpt += c->ckpt_every;
	}
	return 0;
}
