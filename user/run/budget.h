/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf agent's budget of processes sampled at once, and its caps (run/budget.c). */
#ifndef __HEAPBPF_RUN_BUDGET_H
#define __HEAPBPF_RUN_BUDGET_H

struct agent;

/*
 * Over --max-rss or --max-cpu: the target holding most let go, and one
 * fewer sampled at once from then on.
 */
void budget_hold_caps(struct agent *a);
/* More processes match than the budget: those sampled longest make room for those waiting. */
void budget_rotate(struct agent *a);
/* Waiting processes into the budget while it has room. */
void budget_fill(struct agent *a);

#endif /* __HEAPBPF_RUN_BUDGET_H */
