/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf agent's budget of processes sampled at once, and its caps (run/budget.c). */
#ifndef __HEAPBPF_RUN_BUDGET_H
#define __HEAPBPF_RUN_BUDGET_H

#include <stddef.h>

struct agent;
struct agent_proc;
struct agent_target;

/*
 * Over --max-rss or --max-cpu (said in what): the sampled target holding
 * most, for the agent to let go, the budget one lower already; NULL when
 * none is to go (under the caps, too soon after the last, or one left).
 */
struct agent_target *budget_over_cap(struct agent *a, char *what, size_t len);
/* After a target let go for a cap: heapbpf's CPU is measured afresh. */
void budget_cap_done(struct agent *a);
/*
 * More processes match than the budget: how many of those sampled longest
 * make room for those waiting now (0 until the rotation is due).
 */
size_t budget_rotation_due(struct agent *a);
/* The sampled target in the budget longest. */
struct agent_target *budget_oldest(const struct agent *a);
/*
 * The waiting process whose turn it is while the budget has room: never
 * sampled first, then the longest idle; NULL when none is.
 */
struct agent_proc *budget_next_in(const struct agent *a);

#endif /* __HEAPBPF_RUN_BUDGET_H */
