/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every heapbpf that runs on the host, for `heapbpf status` and for the
 * message a run gives when another holds its target. A run that samples
 * registers itself as DIR/PID.run (DIR: guard_dir()), root's, 0600, holding an flock
 * on it while it runs (the kernel drops it when the run dies, kill -9
 * included), with what it is: its mode, since when, where it writes. Its
 * targets are the lock files (guard.h) that name it as their holder.
 */
#ifndef __HEAPBPF_RUNS_H
#define __HEAPBPF_RUNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct runs_entry {
	pid_t pid;
	char mode[32];	   /* "agent", "watch", "one-shot", "top", "interval" */
	char since[32];	   /* UTC, ISO 8601 */
	char output[1024]; /* where it writes, in words */
	pid_t targets[64]; /* the pids it holds (ntargets of them, the first 64 listed) */
	size_t ntargets;
};

struct runs_reg;

/* Registers this process in dir as a run of mode writing to output; the handle or NULL (said). */
struct runs_reg *runs_register(const char *dir, const char *mode, const char *output);
/* Removes the registration; takes NULL. */
void runs_unregister(struct runs_reg *r);
/*
 * Every live run (its file locked), oldest first, into *v (allocated, *n of
 * them); files and sockets of runs that are gone are removed. 0 or negative
 * errno.
 */
int runs_list(const char *dir, struct runs_entry **v, size_t *n);
/* The pid of the run that holds target's lock in dir now (-1: held, pid not said yet), else 0. */
pid_t runs_lock_holder(const char *dir, pid_t target);
/* The same in the directory open as dfd. */
pid_t runs_lock_holder_at(int dfd, pid_t target);
/* The live run holding target's lock in dir, into e; 0, or -ENOENT when none is known. */
int runs_holder_of(const char *dir, pid_t target, struct runs_entry *e);

#endif /* __HEAPBPF_RUNS_H */
