// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf --reset with no target: every flag a killed heapbpf's state
 * files name, restored in the process and the children it forked.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "jemalloc/target.h"
#include "sampling/guard.h"
#include "sampling/privs.h"
#include "run/reset.h"

/*
 * A state file whose process is gone (kill -9 of heapbpf, then of it): the
 * children it forked that still run its jemalloc, restored.
 */
static void reset_orphans(pid_t pid, size_t *restored)
{
	struct guard *g = NULL;
	struct guard_recovery rec;
	char err[2048];

	/* held: a heapbpf that runs now has it */
	if (guard__acquire_pid(pid, NULL, &g, err, sizeof(err)))
		hb_note("pid %d: %s", pid, err);
	else if (guard__recover_orphans(g, &rec, err, sizeof(err)))
		hb_error_clean(NULL, err, NULL);
	else if (rec.children) {
		hb_say("restored prof_active in %zu process(es) forked from pid %d (gone), left on "
		       "by a heapbpf run that was killed",
		       rec.children, pid);
		(*restored)++;
	}
	guard__release(g);
}

/* One state file's process: its flags restored if a killed run left them on. */
static void reset_one(pid_t pid, size_t *restored)
{
	struct jemalloc_target *t = NULL;
	struct guard *g = NULL;
	struct guard_recovery rec;
	char err[2048];
	int rc = jemalloc_target__find(pid, NULL, &t, err, sizeof(err));

	/* gone, or no jemalloc process under its pid now: its children may still be on */
	if (rc) {
		jemalloc_target__free(t);
		reset_orphans(pid, restored);
		return;
	}
	if (guard__acquire(t, &g, err, sizeof(err)) ||
	    guard__recover(g, t, &rec, err, sizeof(err))) {
		hb_note("pid %d: %s", pid, err);
	} else if (rec.parent || rec.children) {
		hb_say("restored prof_active in pid %d (and %zu process(es) it forked), left on by "
		       "a heapbpf run that was killed",
		       pid, rec.children);
		(*restored)++;
	}
	guard__release(g);
	jemalloc_target__free(t);
}

int reset_all(struct run *r, char *err, size_t errlen)
{
	DIR *dir = opendir(guard_dir());
	struct dirent *de;
	size_t restored = 0;
	int rc;

	(void)r;
	if (!dir && errno == ENOENT) {
		hb_note("nothing to reset: %s does not exist", guard_dir());
		return 0;
	}
	if (!dir)
		return hb_fail(err, errlen, -errno, "cannot read %s: %s", guard_dir(),
			       strerror(errno));
	rc = privs_check(err, errlen);
	while (!rc && (de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (pid > 0 && !strcmp(end, ".state"))
			reset_one((pid_t)pid, &restored);
	}
	closedir(dir);
	if (!rc && !restored)
		hb_note("nothing to reset");
	return rc;
}
