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
#include "guard.h"
#include "procmaps.h"
#include "toggle.h"

struct guard {
	pid_t pid;
	int lock_fd;
	char state[4096];
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

int guard__acquire(pid_t pid, struct guard **out, char *err, size_t errlen)
{
	struct guard *g = calloc(1, sizeof(*g));
	char path[4096], holder[32] = "?";
	int n;

	if (!g)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	g->pid = pid;
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

int guard__save(struct guard *g, uint64_t addr, uint8_t orig)
{
	char tmp[4200], buf[256];
	int fd, n, err = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", g->state);
	n = snprintf(buf, sizeof(buf),
		     "pid=%d\nstarttime=%" PRIu64 "\naddr=0x%" PRIx64 "\norig=%u\n", g->pid,
		     proc_start_time(g->pid), addr, orig);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, n) != n || fsync(fd))
		err = errno ? -errno : -EIO;
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

int guard__recover(struct guard *g, const struct jemalloc_target *t, bool *restored, char *err,
		   size_t errlen)
{
	unsigned long long start = 0, addr = 0;
	unsigned int orig = 2;
	struct prof_toggle tg = { .pid = t->pid };
	char line[256];
	int pid = 0, rc;
	FILE *f;

	*restored = false;
	f = fopen(g->state, "re");
	if (!f)
		return errno == ENOENT ? 0
				       : hb_fail(err, errlen, -errno, "cannot read %s", g->state);
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "pid=%d", &pid);
		sscanf(line, "starttime=%llu", &start);
		sscanf(line, "addr=%llx", &addr);
		sscanf(line, "orig=%u", &orig);
	}
	fclose(f);
	/* another process that had this pid before: nothing of ours is in this one */
	if (pid != t->pid || start != proc_start_time(t->pid)) {
		guard__clear(g);
		return 0;
	}
	if (orig > 1 || addr != t->active_addr || prof_toggle_validate(t, addr))
		return hb_fail(err, errlen, -EINVAL,
			       "%s does not match jemalloc in pid %d; remove it if no heapbpf is "
			       "running",
			       g->state, t->pid);
	tg.addr = addr;
	tg.orig = (uint8_t)orig;
	tg.changed = true;
	rc = prof_toggle__restore(&tg);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot restore prof_active in pid %d: %s", t->pid,
			       strerror(-rc));
	*restored = true;
	return guard__clear(g);
}
