// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "forks.h"
#include "guard.h"
#include "procmaps.h"
#include "toggle.h"

struct guard {
	pid_t pid;
	int lock_fd;
	char state[4096];
	char path[4096]; /* the jemalloc object, as the target's maps name it */
};

const char *guard_dir(void)
{
	const char *d = getenv("HEAPBPF_STATE_DIR");

	return d && d[0] ? d : "/run/heapbpf";
}

uint64_t proc_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	/* the command name may hold spaces and ')': fields resume after the last ')' */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* after ") " come fields 3..; starttime is field 22 */
	if (sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu",
		   &v) != 1)
		return 0;
	return v;
}

int guard__acquire(const struct jemalloc_target *t, struct guard **out, char *err, size_t errlen)
{
	struct guard *g = calloc(1, sizeof(*g));
	char path[4096], holder[32] = "?";
	pid_t pid = t->pid;
	int n;

	if (!g)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	g->pid = pid;
	snprintf(g->path, sizeof(g->path), "%s", t->path);
	if (mkdir(guard_dir(), 0700) && errno != EEXIST) {
		n = -errno;
		free(g);
		return hb_fail(err, errlen, n, "cannot create %s: %s", guard_dir(), strerror(-n));
	}
	snprintf(path, sizeof(path), "%s/%d.lock", guard_dir(), pid);
	snprintf(g->state, sizeof(g->state), "%s/%d.state", guard_dir(), pid);
	g->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (g->lock_fd < 0) {
		n = -errno;
		free(g);
		return hb_fail(err, errlen, n, "cannot open %s: %s", path, strerror(-n));
	}
	if (flock(g->lock_fd, LOCK_EX | LOCK_NB)) {
		n = pread(g->lock_fd, holder, sizeof(holder) - 1, 0);
		holder[n > 0 ? n : 0] = '\0';
		holder[strcspn(holder, "\n")] = '\0';
		close(g->lock_fd);
		free(g);
		return hb_fail(
			err, errlen, -EBUSY,
			"another heapbpf (pid %s) is already profiling pid %d; wait for it to "
			"finish or stop it",
			holder[0] ? holder : "?", pid);
	}
	/* who holds it, for the message above */
	n = snprintf(holder, sizeof(holder), "%d\n", getpid());
	if (ftruncate(g->lock_fd, 0) == 0 && pwrite(g->lock_fd, holder, n, 0) != n) {
		/* only the message would lack the holder's pid */
	}
	*out = g;
	return 0;
}

void guard__release(struct guard *g)
{
	if (!g)
		return;
	/* the lock file stays: unlinking it would let two runs lock different inodes */
	if (ftruncate(g->lock_fd, 0)) {
		/* harmless: the next holder overwrites it */
	}
	close(g->lock_fd);
	free(g);
}

/* The state file's text: the target, its flag, and each child forked while it was on. */
static char *state_text(const struct guard *g, uint64_t addr, uint8_t orig,
			const struct forks *children, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	fprintf(f, "pid=%d\nstarttime=%" PRIu64 "\naddr=0x%" PRIx64 "\norig=%u\npath=%s\n", g->pid,
		proc_start_time(g->pid), addr, orig, g->path);
	for (size_t i = 0; children && i < children->n; i++) {
		if (!children->v[i].execed)
			fprintf(f, "child=%d %" PRIu64 "\n", children->v[i].pid,
				children->v[i].start);
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

int guard__save(struct guard *g, uint64_t addr, uint8_t orig, const struct forks *children)
{
	char tmp[4200];
	size_t n = 0;
	char *buf = state_text(g, addr, orig, children, &n);
	int fd, err = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s.tmp", g->state);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	if (write(fd, buf, n) != (ssize_t)n || fsync(fd))
		err = errno ? -errno : -EIO;
	free(buf);
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, g->state))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int guard__clear(struct guard *g)
{
	if (unlink(g->state) && errno != ENOENT)
		return -errno;
	return 0;
}

struct state {
	int pid;
	unsigned long long start, addr;
	unsigned int orig;
	char path[4096];
	pid_t child[256];
	uint64_t child_start[256];
	size_t nchildren;
};

static int read_state(const char *file, struct state *st)
{
	char line[4200];
	FILE *f = fopen(file, "re");

	memset(st, 0, sizeof(*st));
	st->orig = 2;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long cs;
		int cp;

		line[strcspn(line, "\n")] = '\0';
		sscanf(line, "pid=%d", &st->pid);
		sscanf(line, "starttime=%llu", &st->start);
		sscanf(line, "addr=%llx", &st->addr);
		sscanf(line, "orig=%u", &st->orig);
		if (strncmp(line, "path=", 5) == 0)
			snprintf(st->path, sizeof(st->path), "%.4000s", line + 5);
		if (sscanf(line, "child=%d %llu", &cp, &cs) == 2 && st->nchildren < 256) {
			st->child[st->nchildren] = cp;
			st->child_start[st->nchildren++] = cs;
		}
	}
	fclose(f);
	return 0;
}

/* Children a killed run left sampling: each checked to be the same process with our jemalloc. */
static void recover_children(const struct state *st, struct guard_recovery *r)
{
	if (st->orig > 1 || !st->path[0])
		return;
	for (size_t i = 0; i < st->nchildren; i++) {
		if (!forks_restore_one(st->child[i], st->child_start[i], st->addr,
				       (uint8_t)st->orig, st->path))
			r->children++;
	}
}

int guard__recover(struct guard *g, const struct jemalloc_target *t, struct guard_recovery *r,
		   char *err, size_t errlen)
{
	struct prof_toggle tg = { .pid = t->pid };
	struct state st;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = read_state(g->state, &st);
	if (rc)
		return rc == -ENOENT ? 0 : hb_fail(err, errlen, rc, "cannot read %s", g->state);
	/* another process that had this pid before: only its children may still be ours */
	if (st.pid != t->pid || st.start != proc_start_time(t->pid)) {
		recover_children(&st, r);
		guard__clear(g);
		return 0;
	}
	if (st.orig > 1 || st.addr != t->active_addr || prof_toggle_validate(t, st.addr))
		return hb_fail(err, errlen, -EINVAL,
			       "%s does not match jemalloc in pid %d; remove it if no heapbpf is "
			       "running",
			       g->state, t->pid);
	tg.addr = st.addr;
	tg.orig = (uint8_t)st.orig;
	tg.changed = true;
	rc = prof_toggle__restore(&tg);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot restore prof_active in pid %d: %s", t->pid,
			       strerror(-rc));
	r->parent = true;
	recover_children(&st, r);
	return guard__clear(g);
}
