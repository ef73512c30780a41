// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
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

#include "util/hooks.h"
#include "util/errmsg.h"
#include "sampling/forks.h"
#include "sampling/guard.h"
#include "util/output.h"
#include "symbols/proc.h"
#include "sampling/runs.h"
#include "sampling/toggle.h"

struct guard {
	pid_t pid;
	int dfd; /* guard_dir(), checked */
	int lock_fd;
	char state[32];	 /* "PID.state", in dfd */
	char lock[32];	 /* "PID.lock", in dfd: removed at release */
	char path[4096]; /* the jemalloc object, as the target's maps name it */
};

/* 0 when fd is a regular file owned by heapbpf's user (root), else -OUTPUT_ESPECIAL. */
static int regular_of_ours(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	return S_ISREG(st.st_mode) && st.st_uid == geteuid() ? 0 : -OUTPUT_ESPECIAL;
}

const char *guard_dir(void)
{
	const char *d = hb_hook(HB_HOOK_STATE_DIR);

	return d ? d : "/run/heapbpf";
}

/* dfd/name is, still, the file open as fd (not removed or replaced since). */
static bool named_file(int dfd, const char *name, int fd)
{
	struct stat held, named;

	return !fstat(fd, &held) && !fstatat(dfd, name, &named, AT_SYMLINK_NOFOLLOW) &&
	       held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

/*
 * Locks dfd/name (created if missing) into *fd: 0, -EBUSY (*fd open: another
 * run holds it), or another negative errno. Lock files are removed by their
 * holder at the end: the lock taken is kept only if name still leads to the
 * locked file, else it is tried again.
 */
static int lock_at(int dfd, const char *name, int *fd)
{
	for (int tries = 0; tries < 16; tries++) {
		int n;

		*fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			     0600);
		n = *fd < 0 ? -errno : regular_of_ours(*fd);
		if (n) {
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
			return n;
		}
		if (flock(*fd, LOCK_EX | LOCK_NB))
			return -EBUSY;
		if (named_file(dfd, name, *fd))
			return 0;
		/* removed (or replaced) by the run that held it: over again */
		close(*fd);
	}
	*fd = -1;
	return -EAGAIN;
}

/*
 * Lock files no run holds (a heapbpf killed with -9 leaves its own; earlier
 * versions left every one): removed, each under its own lock so that none a
 * run holds or is taking goes.
 */
static void sweep_stale_locks(int dfd)
{
	int d = dup(dfd);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	struct dirent *e;

	if (!dir) {
		if (d >= 0)
			close(d);
		return;
	}
	while ((e = readdir(dir))) {
		size_t len = strlen(e->d_name);
		int fd;

		if (len < 6 || strcmp(e->d_name + len - 5, ".lock") != 0 ||
		    strspn(e->d_name, "0123456789") != len - 5)
			continue;
		fd = openat(dfd, e->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!regular_of_ours(fd) && !flock(fd, LOCK_EX | LOCK_NB) &&
		    named_file(dfd, e->d_name, fd))
			unlinkat(dfd, e->d_name, 0);
		close(fd);
	}
	closedir(dir);
}

/*
 * pid held by another run: who holds it (its mode, since when, where it
 * writes, as it registered: runs.h) and what to do instead.
 */
static int busy(pid_t pid, const char *holder, char *err, size_t errlen)
{
	struct runs_entry e;
	bool daemon;

	if (runs_holder_of(guard_dir(), pid, &e))
		return hb_fail(err, errlen, -EBUSY,
			       "another heapbpf (pid %s) is already profiling pid %d; wait for it "
			       "to finish or stop it (heapbpf status lists every run)",
			       holder, pid);
	daemon = !strcmp(e.mode, "agent") || !strcmp(e.mode, "watch") ||
		 !strcmp(e.mode, "interval");
	/* what this run cannot have served (--interval, a watch, --record), and instead */
	return hb_fail(err, errlen, -EBUSY,
		       "another heapbpf (pid %d) is already profiling pid %d: held by heapbpf "
		       "%s, pid %d, since %s, writing %s; %s; a one-shot run (heapbpf --pid %d -d "
		       "SECONDS) or heapbpf top gets its view from it",
		       e.pid, pid, e.mode, e.pid, e.since, e.output[0] ? e.output : "nothing",
		       daemon ? "its profiles of it are there, and `kill -USR1` to its pid asks it "
				"for one of every process it holds now"
			      : "wait for it to finish or stop it",
		       pid);
}

int guard__acquire(const struct jemalloc_target *t, struct guard **out, char *err, size_t errlen)
{
	return guard__acquire_pid(t->pid, t->path, out, err, errlen);
}

int guard__acquire_pid(pid_t pid, const char *object, struct guard **out, char *err, size_t errlen)
{
	struct guard *g = calloc(1, sizeof(*g));
	char path[4096], holder[32] = "?";
	int n;

	if (!g)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	g->pid = pid;
	snprintf(g->path, sizeof(g->path), "%s", object ? object : "");
	if (mkdir(guard_dir(), 0700) && errno != EEXIST) {
		n = -errno;
		free(g);
		return hb_fail(err, errlen, n, "cannot create %s: %s", guard_dir(), strerror(-n));
	}
	snprintf(g->state, sizeof(g->state), "%d.state", pid);
	/* root's own: a lock or a state file planted by another user is never used */
	g->dfd = output_open_dir(guard_dir(), OUTPUT_DIR_PRIVATE);
	if (g->dfd < 0) {
		n = g->dfd;
		free(g);
		return hb_fail(err, errlen, n, "cannot use %s: %s", guard_dir(),
			       output_strerror(n));
	}
	snprintf(path, sizeof(path), "%d.lock", pid);
	sweep_stale_locks(g->dfd);
	n = lock_at(g->dfd, path, &g->lock_fd);
	if (n == -EBUSY) {
		n = pread(g->lock_fd, holder, sizeof(holder) - 1, 0);
		holder[n > 0 ? n : 0] = '\0';
		holder[strcspn(holder, "\n")] = '\0';
		close(g->lock_fd);
		close(g->dfd);
		free(g);
		return busy(pid, holder[0] ? holder : "?", err, errlen);
	}
	if (n) {
		close(g->dfd);
		free(g);
		return hb_fail(err, errlen, n, "cannot open %s/%s: %s", guard_dir(), path,
			       n == -ELOOP ? output_strerror(-OUTPUT_ESYMLINK)
					   : output_strerror(n));
	}
	snprintf(g->lock, sizeof(g->lock), "%d.lock", pid);
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
	/*
	 * Removed while still locked: a run that opened it before sees, once it
	 * holds the lock, that the name no longer leads to it, and starts over
	 * (lock_at).
	 */
	unlinkat(g->dfd, g->lock, 0);
	close(g->lock_fd);
	close(g->dfd);
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

struct text {
	const char *buf;
	size_t len;
};

static int write_text(FILE *f, void *arg)
{
	const struct text *t = arg;

	return fwrite(t->buf, 1, t->len, f) == t->len ? 0 : -EIO;
}

int guard__save(struct guard *g, uint64_t addr, uint8_t orig, const struct forks *children)
{
	struct text t = { 0 };
	char *buf = state_text(g, addr, orig, children, &t.len);
	int err;

	if (!buf)
		return -ENOMEM;
	t.buf = buf;
	/*
	 * a new file renamed into place: a kill -9 leaves the old state or the
	 * new. Not synced: it is rewritten at each fork of a target, and only
	 * has to outlive heapbpf (a reboot ends the processes it names)
	 */
	err = output_write_state_in(g->dfd, g->state, 0600, write_text, &t);
	free(buf);
	return err;
}

int guard__clear(struct guard *g)
{
	if (unlinkat(g->dfd, g->state, 0) && errno != ENOENT)
		return -errno;
	fsync(g->dfd);
	return 0;
}

struct state {
	int pid;
	unsigned long long start, addr;
	unsigned int orig;
	char path[4096];
	pid_t *child; /* every child the file lists: no cap */
	uint64_t *child_start;
	size_t nchildren, cap;
};

static void free_state(struct state *st)
{
	free(st->child);
	free(st->child_start);
	st->child = NULL;
	st->child_start = NULL;
}

static int add_child(struct state *st, pid_t pid, uint64_t start)
{
	if (st->nchildren == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 64;
		pid_t *c = realloc(st->child, cap * sizeof(*c));
		uint64_t *s;

		if (!c)
			return -ENOMEM;
		st->child = c;
		s = realloc(st->child_start, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		st->child_start = s;
		st->cap = cap;
	}
	st->child[st->nchildren] = pid;
	st->child_start[st->nchildren++] = start;
	return 0;
}

static int read_state(int dfd, const char *file, struct state *st)
{
	char line[4200];
	int fd, rc = 0;
	FILE *f;

	memset(st, 0, sizeof(*st));
	st->orig = 2;
	fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = regular_of_ours(fd);
	f = rc ? NULL : fdopen(fd, "re");
	if (!f) {
		rc = rc ?: -errno;
		close(fd);
		return rc;
	}
	while (!rc && fgets(line, sizeof(line), f)) {
		unsigned long long cs;
		int cp;

		line[strcspn(line, "\n")] = '\0';
		sscanf(line, "pid=%d", &st->pid);
		sscanf(line, "starttime=%llu", &st->start);
		sscanf(line, "addr=%llx", &st->addr);
		sscanf(line, "orig=%u", &st->orig);
		if (strncmp(line, "path=", 5) == 0)
			snprintf(st->path, sizeof(st->path), "%.4000s", line + 5);
		if (sscanf(line, "child=%d %llu", &cp, &cs) == 2)
			rc = add_child(st, cp, cs);
	}
	fclose(f);
	if (rc)
		free_state(st);
	return rc;
}

/*
 * Children a killed run left sampling: each checked to be the same process
 * with our jemalloc. Those that still run it with the flag on and could not
 * be restored are counted in r->failed, the first of them in r->failed_pid.
 */
static void recover_children(const struct state *st, struct guard_recovery *r)
{
	if (st->orig > 1 || !st->path[0])
		return;
	for (size_t i = 0; i < st->nchildren; i++) {
		int rc = forks_restore_one(st->child[i], st->child_start[i], st->addr,
					   (uint8_t)st->orig, st->path);

		if (!rc) {
			r->children++;
		} else if (rc != -ESRCH) {
			if (!r->failed++) {
				r->failed_pid = st->child[i];
				r->failed_rc = rc;
			}
		}
	}
}

/* The children of every thread of pid (/proc/PID/task/TID/children) appended to *v. */
static int children_of(pid_t pid, pid_t **v, size_t *n, size_t *cap)
{
	char path[64];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return 0; /* gone: nothing below it to reach */
	while ((de = readdir(d))) {
		char file[320];
		FILE *f;
		int c;

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "/proc/%d/task/%s/children", pid, de->d_name);
		f = fopen(file, "re");
		while (f && fscanf(f, "%d", &c) == 1) {
			if (*n == *cap) {
				size_t nc = *cap ? 2 * *cap : 256;
				pid_t *nv = realloc(*v, nc * sizeof(*nv));

				if (!nv) {
					fclose(f);
					closedir(d);
					return -ENOMEM;
				}
				*v = nv;
				*cap = nc;
			}
			(*v)[(*n)++] = c;
		}
		if (f)
			fclose(f);
	}
	closedir(d);
	return 0;
}

/*
 * Every descendant of the killed run's target that runs its jemalloc with
 * the flag on, listed in the state file or not (a run killed while it was
 * behind on the fork events listed only some): each restored like a
 * listed child, unless another heapbpf holds it. Counted in r as
 * recover_children does.
 */
static void recover_descendants(int dfd, const struct state *st, struct guard_recovery *r)
{
	uint8_t image[PROC_EXEC_RANDOM], its[PROC_EXEC_RANDOM];
	pid_t *v = NULL;
	size_t n = 0, cap = 0;

	if (st->orig > 1 || !st->path[0] || !st->start || proc_start_time(st->pid) != st->start ||
	    proc_exec_random(st->pid, image))
		return;
	/* breadth first: v grows as each one's children are read; a pid once */
	if (children_of(st->pid, &v, &n, &cap))
		n = 0;
	for (size_t i = 0; i < n; i++) {
		bool listed = false;
		int rc;

		for (size_t j = 0; j < i && !listed; j++)
			listed = v[j] == v[i];
		for (size_t j = 0; j < st->nchildren && !listed; j++)
			listed = st->child[j] == v[i] &&
				 st->child_start[j] == proc_start_time(v[i]);
		if (children_of(v[i], &v, &n, &cap))
			break;
		/* a fork of the target's image, never one that exec'ed (its flag is its own) */
		if (listed || runs_lock_holder_at(dfd, v[i]) || proc_exec_random(v[i], its) ||
		    memcmp(its, image, sizeof(image)) != 0)
			continue;
		rc = forks_restore_one(v[i], proc_start_time(v[i]), st->addr, (uint8_t)st->orig,
				       st->path);
		if (!rc) {
			r->children++;
		} else if (rc != -ESRCH && !r->failed++) {
			r->failed_pid = v[i];
			r->failed_rc = rc;
		}
	}
	free(v);
}

/*
 * The state file's temporary copies a killed run left ("PID.state.tmp.*"):
 * removed, as g's lock says no run of pid writes them now.
 */
static void sweep_temps(const struct guard *g)
{
	char prefix[48];
	struct dirent *de;
	int fd = openat(g->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	snprintf(prefix, sizeof(prefix), "%s.tmp.", g->state);
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, prefix, strlen(prefix)))
			unlinkat(g->dfd, de->d_name, 0);
	}
	closedir(d);
}

/* Any child left on: the state file stays, for another --reset, and the run stops. */
static int children_left_on(struct guard *g, pid_t pid, const struct guard_recovery *r, char *err,
			    size_t errlen)
{
	return hb_fail(err, errlen, r->failed_rc,
		       "cannot restore prof_active in %zu process(es) forked from pid %d (pid %d: "
		       "%s); %s/%s is kept: run --reset again once the cause is fixed",
		       r->failed, pid, r->failed_pid, strerror(-r->failed_rc), guard_dir(),
		       g->state);
}

int guard__recover(struct guard *g, const struct jemalloc_target *t, struct guard_recovery *r,
		   char *err, size_t errlen)
{
	struct prof_toggle tg;
	struct state st;
	int rc;

	memset(r, 0, sizeof(*r));
	sweep_temps(g);
	rc = read_state(g->dfd, g->state, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return hb_fail(err, errlen, rc, "cannot read %s/%s: %s", guard_dir(), g->state,
			       rc == -ELOOP ? output_strerror(-OUTPUT_ESYMLINK)
					    : output_strerror(rc));
	/* another process that had this pid before: only its children may still be ours */
	if (st.pid != t->pid || st.start != proc_start_time(t->pid)) {
		recover_children(&st, r);
		free_state(&st);
		if (r->failed)
			return children_left_on(g, t->pid, r, err, errlen);
		guard__clear(g);
		return 0;
	}
	if (st.orig > 1 || st.addr != t->active_addr || toggle_validate(t, st.addr)) {
		free_state(&st);
		return hb_fail(err, errlen, -EINVAL,
			       "%s/%s does not match jemalloc in pid %d; remove it if no heapbpf "
			       "is running",
			       guard_dir(), g->state, t->pid);
	}
	rc = toggle__init(&tg, t);
	tg.orig = (uint8_t)st.orig;
	tg.changed = true;
	rc = rc ?: toggle__restore(&tg);
	if (rc) {
		free_state(&st);
		return hb_fail(err, errlen, rc, "cannot restore prof_active in pid %d: %s", t->pid,
			       strerror(-rc));
	}
	r->parent = true;
	recover_children(&st, r);
	recover_descendants(g->dfd, &st, r);
	free_state(&st);
	if (r->failed)
		return children_left_on(g, t->pid, r, err, errlen);
	return guard__clear(g);
}

int guard__recover_orphans(struct guard *g, struct guard_recovery *r, char *err, size_t errlen)
{
	struct state st;
	int rc;

	memset(r, 0, sizeof(*r));
	sweep_temps(g);
	rc = read_state(g->dfd, g->state, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return hb_fail(err, errlen, rc, "cannot read %s/%s: %s", guard_dir(), g->state,
			       rc == -ELOOP ? output_strerror(-OUTPUT_ESYMLINK)
					    : output_strerror(rc));
	/* the process itself still runs: its own flag may be on, the file stays */
	if (st.pid == g->pid && st.start && st.start == proc_start_time(g->pid)) {
		free_state(&st);
		return hb_fail(err, errlen, -EAGAIN,
			       "pid %d still runs but its jemalloc cannot be read; %s/%s is kept",
			       g->pid, guard_dir(), g->state);
	}
	recover_children(&st, r);
	free_state(&st);
	if (r->failed)
		return children_left_on(g, g->pid, r, err, errlen);
	return guard__clear(g);
}
