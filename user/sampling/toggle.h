/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Switching jemalloc's prof_active flag in the target from outside. The only
 * write heapbpf ever makes into another process: one byte, at an address
 * validated to lie in a writable segment of the jemalloc object, read back.
 */
#ifndef __HEAPBPF_TOGGLE_H
#define __HEAPBPF_TOGGLE_H

#include <stdbool.h>
#include <stdint.h>

#include "jemalloc/target.h"

/*
 * The program image the flag belongs to: the jemalloc object's file mapping
 * holding the flag (or right before the anonymous .bss holding it), and the
 * 16 random bytes the kernel put on the image's stack (auxv AT_RANDOM). An
 * exec replaces both (another file or address; new random bytes even where
 * nothing moves, ASLR off), so a write never lands in a new image. And the
 * process's start time: a process forked from the same image and given the
 * pid when the target is gone has both alike, but started later.
 */
struct prof_toggle_home {
	uint64_t start, inode;
	uint64_t started; /* the process's start time (proc_start_time) */
	unsigned int dev_major, dev_minor;
	uint8_t random[16];
};

struct prof_toggle {
	pid_t pid;
	uint64_t addr;
	uint8_t orig;		      /* value found before heapbpf touched it */
	bool changed;		      /* heapbpf wrote 1 and owes a restore */
	struct prof_toggle_home home; /* as when the target was found */
};

/* Checks that the flag address lies in a writable mapping of the jemalloc object. */
int toggle_validate(const struct jemalloc_target *t, uint64_t addr);

/*
 * Sets tg up for t's flag (pid, address, the image it lies in as t's maps
 * snapshot says), nothing owed yet; -ESTALE when that snapshot has no mapping there.
 */
int toggle__init(struct prof_toggle *tg, const struct jemalloc_target *t);

/* Called with the flag's address and original value right before heapbpf writes it. */
typedef int (*prof_toggle_hook)(void *arg, uint64_t addr, uint8_t orig);

/*
 * Reads the flag; writes 1 if it was 0 (after before_write, if given, agreed);
 * reads it back. -EIO if the write did not stick. Every write goes through
 * /proc/PID/mem opened first, which stays bound to the process it opened,
 * then re-reads the process's start time and /proc/PID/maps: -ESTALE,
 * nothing written, when the process exec'd since t was found (the flag's
 * image is gone) or the pid is another process's now; so a byte is never
 * written into a process that took the pid, even between check and write.
 */
int toggle__on(struct prof_toggle *tg, const struct jemalloc_target *t,
	       prof_toggle_hook before_write, void *arg);
/*
 * Writes the original value back if heapbpf changed it; -ESRCH when the
 * target is gone, -ESTALE (nothing written, nothing owed any more) when it
 * exec'd: the flag went with the old image.
 */
int toggle__restore(struct prof_toggle *tg);
/* Reads the flag's current value. */
int toggle__read(const struct prof_toggle *tg, uint8_t *val);

#endif /* __HEAPBPF_TOGGLE_H */
