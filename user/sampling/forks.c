// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "util/errmsg.h"
#include "sampling/forks.h"
#include "symbols/proc.h"

#define TRACEFS "/sys/kernel/tracing"

FILE *tracefs_format(const char *event)
{
	char path[256], debug[256];
	FILE *f;

	snprintf(path, sizeof(path), TRACEFS "/events/%s/format", event);
	snprintf(debug, sizeof(debug), "/sys/kernel/debug/tracing/events/%s/format", event);
	f = fopen(path, "re");
	if (f || errno != ENOENT)
		return f;
	f = fopen(debug, "re");
	if (f)
		return f;
	/* a machine that never mounted tracefs: mount it where the kernel documents it */
	if (mount("tracefs", TRACEFS, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return NULL;
	return fopen(path, "re");
}

int forks_child_pid_offset(uint32_t *off, char *err, size_t errlen)
{
	char line[256];
	unsigned int o, size;
	FILE *f = tracefs_format("sched/sched_process_fork");
	int rc = -ENOENT;

	if (!f)
		return hb_fail(err, errlen, -errno,
			       "cannot read the sched_process_fork tracepoint's format under %s "
			       "(tracefs): %s",
			       TRACEFS, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, " child_pid;");

		if (p && sscanf(p, " child_pid;\toffset:%u;\tsize:%u;", &o, &size) == 2 &&
		    size == 4) {
			*off = o;
			rc = 0;
			break;
		}
	}
	fclose(f);
	if (rc)
		return hb_fail(err, errlen, rc,
			       "the sched_process_fork tracepoint has no 4-byte child_pid field");
	return 0;
}

/* Tgid of task id, from /proc/ID/status; 0 when the task is gone. */
static pid_t tgid_of(pid_t id)
{
	char path[64], line[128];
	pid_t tgid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", id);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	}
	fclose(f);
	return tgid;
}

int forks__add(struct forks *f, pid_t child)
{
	uint64_t start;

	if (tgid_of(child) != child) {
		f->threads++;
		return 0;
	}
	start = proc_start_time(child);
	if (!start)
		return 0;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct fork_child *v = realloc(f->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = (struct fork_child){ .pid = child, .start = start };
	return 1;
}

void forks__exec(struct forks *f, pid_t pid)
{
	for (size_t i = 0; i < f->n; i++) {
		if (f->v[i].pid == pid)
			f->v[i].execed = true;
	}
}

void forks__prune(struct forks *f)
{
	size_t kept = 0;

	for (size_t i = 0; i < f->n; i++) {
		/* one that cannot be read now (out of file descriptors) is kept: it may live */
		if (!f->v[i].execed && !proc_gone(f->v[i].pid, f->v[i].start))
			f->v[kept++] = f->v[i];
	}
	f->pruned += f->n - kept;
	f->n = kept;
}

/* Still the object heapbpf restores in: its flag's address in the same jemalloc. */
static bool maps_object_at(pid_t pid, uint64_t addr, const char *path)
{
	struct proc_maps *maps = NULL;
	bool ok;

	if (proc_maps__read(pid, &maps))
		return false;
	ok = proc_maps__writable_in(maps, addr, path);
	proc_maps__free(maps);
	return ok;
}

int forks_restore_one(pid_t pid, uint64_t start, uint64_t addr, uint8_t orig, const char *path)
{
	uint8_t v;
	int rc;

	if (!start || proc_start_time(pid) != start || !maps_object_at(pid, addr, path))
		return -ESRCH;
	rc = proc_mem_read(pid, addr, &v, 1);
	if (rc)
		return rc;
	/* 0 already (the child switched it itself): nothing to do; not a bool: not ours */
	if (v == orig)
		return 0;
	if (v != 1)
		return -EILSEQ;
	return proc_mem_write(pid, addr, &orig, 1);
}

void forks__restore(const struct forks *f, uint64_t addr, uint8_t orig, const char *path,
		    struct forks_result *r)
{
	memset(r, 0, sizeof(*r));
	r->forked = f->n + f->pruned;
	r->gone = f->pruned;
	for (size_t i = 0; i < f->n; i++) {
		int rc = f->v[i].execed
				 ? -ESRCH
				 : forks_restore_one(f->v[i].pid, f->v[i].start, addr, orig, path);

		if (!rc)
			r->restored++;
		else if (rc == -ESRCH)
			r->gone++;
		else
			r->failed++;
	}
}

void forks__free(struct forks *f)
{
	free(f->v);
	memset(f, 0, sizeof(*f));
}
