/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The processes forked from the target while prof_active was on. A fork
 * copies the flag's byte, and the uprobes (filtered to the target's pid) do
 * not follow the child: without heapbpf the child would sample for the rest
 * of its life. The BPF side reports every fork and exec in the target's
 * process tree (grandchildren included); this keeps the list of children
 * that still run the target's jemalloc and switches their flag back when
 * the target's is restored.
 */
#ifndef __HEAPBPF_FORKS_H
#define __HEAPBPF_FORKS_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Offset of child_pid in the sched_process_fork tracepoint record, from the
 * tracepoint's format file (tracefs is mounted at /sys/kernel/tracing if no
 * tracefs is there: libbpf needs it to attach as well).
 */
int forks_child_pid_offset(uint32_t *off, char *err, size_t errlen);

struct fork_child {
	pid_t pid;
	uint64_t start; /* /proc/PID/stat starttime: tells a reused pid */
	bool execed;	/* called exec: a fresh jemalloc, not ours */
};

struct forks {
	struct fork_child *v;
	size_t n, cap;
	size_t pruned;	  /* children left out by forks__prune: exited or exec'ed */
	uint64_t threads; /* new tasks that were threads of a tracked process */
};

/* What a restore did, for the summary and the profile's comments. */
struct forks_result {
	size_t forked;	 /* child processes seen */
	size_t restored; /* flag switched back */
	size_t gone;	 /* had exited, or exec'ed */
	size_t failed;	 /* alive with our jemalloc, but the write failed */
};

/*
 * A task forked by a tracked process: added when it is a process (not a
 * thread); returns 1 if added, 0 for a thread or a task already gone, or
 * -ENOMEM.
 */
int forks__add(struct forks *f, pid_t child);
/* pid called exec (its flag is its new jemalloc's own). */
void forks__exec(struct forks *f, pid_t pid);
/*
 * Leaves out the children that exited or exec'ed (nothing to restore in
 * them), counted as gone by forks__restore: a service that forks
 * short-lived children for days keeps the list (and the state file that
 * lists it) as long as the children alive.
 */
void forks__prune(struct forks *f);

/*
 * Writes orig to addr in every child that is still the same process, has not
 * exec'ed and still maps the jemalloc object path there (a writable mapping
 * of path, or the anonymous .bss right after it), when it reads 1.
 */
void forks__restore(const struct forks *f, uint64_t addr, uint8_t orig, const char *path,
		    struct forks_result *r);

/* The same for one pid whose start time is known (recovery after kill -9); 0 or -errno. */
int forks_restore_one(pid_t pid, uint64_t start, uint64_t addr, uint8_t orig, const char *path);

void forks__free(struct forks *f);

/*
 * The format file of a tracepoint ("sched/sched_process_fork") under tracefs
 * (mounted at /sys/kernel/tracing if no tracefs is), or NULL with errno.
 */
FILE *tracefs_format(const char *event);

#endif /* __HEAPBPF_FORKS_H */
