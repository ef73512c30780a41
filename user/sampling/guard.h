/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One heapbpf per target, and recovery after heapbpf was killed -9.
 *
 * A lock file per target pid under /run/heapbpf (flock: released by the
 * kernel when heapbpf dies, however it dies) keeps a second heapbpf away.
 * Before the prof_active flag is written, a state file records the address
 * and the original value, and later every child forked while it is on; it
 * is removed once the flag is restored in all of them. A state
 * file found by the next run (or `heapbpf --reset --pid N`) for the same
 * process means an earlier run never restored the flag: it is restored then.
 */
#ifndef __HEAPBPF_GUARD_H
#define __HEAPBPF_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampling/forks.h"
#include "jemalloc/target.h"

struct guard;

/* The directory for locks and state: $HEAPBPF_STATE_DIR or /run/heapbpf. */
const char *guard_dir(void);

/* Takes t's pid's lock; -EBUSY with a one-sentence err when another heapbpf holds it. */
int guard__acquire(const struct jemalloc_target *t, struct guard **out, char *err, size_t errlen);
/* The same for a pid whose jemalloc is not at hand; object: its path, or NULL. */
int guard__acquire_pid(pid_t pid, const char *object, struct guard **out, char *err, size_t errlen);
/* What a recovery restored. */
struct guard_recovery {
	bool parent;	  /* the target's own flag */
	size_t children;  /* processes forked from it during the killed run */
	size_t failed;	  /* of those, still running with the flag on: not restored */
	pid_t failed_pid; /* the first of them */
	int failed_rc;	  /* and why */
};

/*
 * Restores a flag an earlier, killed run left on in this same process (the
 * state file matches its start time and its jemalloc's flag address), and
 * in the children it had forked meanwhile that still run that jemalloc.
 * Stale state of an earlier process with the same pid is discarded, after
 * its children are restored.
 */
int guard__recover(struct guard *g, const struct jemalloc_target *t, struct guard_recovery *r,
		   char *err, size_t errlen);
/*
 * A killed run's state for a process that is gone (its pid free, or
 * another process's now): the children it had forked that still run its
 * jemalloc restored, each checked by its start time and path, and the
 * state forgotten once none is left on. -EAGAIN (the file kept) when the
 * process itself still runs: guard__recover is for it.
 */
int guard__recover_orphans(struct guard *g, struct guard_recovery *r, char *err, size_t errlen);
/*
 * Records addr and its original value (and the children forked while it is
 * on, if any), durably, before the flag is written and at each new child.
 */
int guard__save(struct guard *g, uint64_t addr, uint8_t orig, const struct forks *children);
/* The flag is back: forget the state. */
int guard__clear(struct guard *g);
/* Unlocks; NULL is fine. */
void guard__release(struct guard *g);

#endif /* __HEAPBPF_GUARD_H */
