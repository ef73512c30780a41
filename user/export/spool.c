// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "util/output.h"
#include "export/snapshot.h"
#include "export/spool.h"

#define SPOOL_MAGIC "HBSPOOL1\n"
#define SPOOL_EXT   ".spool"
#define LOCK_FILE   ".deliver.lock"
/* every file of the spool: heapbpf reads back only files of its own of this mode */
#define SPOOL_FILE_MODE 0600

struct spool {
	char dir[PATH_MAX];
	size_t keep;
	uint64_t max_bytes;
	int lock_fd;  /* -1 unless this process holds the delivery lock */
	bool removed; /* files deleted under the lock */
};

int spool__new(const char *dir, size_t keep, uint64_t max_bytes, struct spool **out)
{
	struct spool *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return -ENOMEM;
	if (snprintf(sp->dir, sizeof(sp->dir), "%s", dir) >= (int)sizeof(sp->dir)) {
		free(sp);
		return -ENAMETOOLONG;
	}
	sp->keep = keep;
	sp->max_bytes = max_bytes;
	sp->lock_fd = -1;
	*out = sp;
	return 0;
}

void spool__free(struct spool *sp)
{
	if (!sp)
		return;
	spool__unlock(sp);
	free(sp);
}

const char *spool__dir(const struct spool *sp)
{
	return sp->dir;
}

/* A finished spool file: never the lock, a hidden file or an atomic write's temporary. */
static bool spool_file(const char *name)
{
	size_t n = strlen(name), m = strlen(SPOOL_EXT);

	return name[0] != '.' && n > m && strcmp(name + n - m, SPOOL_EXT) == 0 &&
	       !strstr(name, ".tmp.");
}

/* ---- writing ---- */

static int write_profile(FILE *f, void *arg)
{
	const struct spool_profile *p = arg;

	fprintf(f, SPOOL_MAGIC "name=%s\nfrom=%" PRId64 "\nuntil=%" PRId64 "\n\n", p->name, p->from,
		p->until);
	fwrite(p->body, 1, p->len, f);
	return ferror(f) ? -EIO : 0;
}

int spool__put(struct spool *sp, const struct spool_profile *p, char *err, size_t errlen)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1], name[NAME_MAX + 1];
	struct timespec ts;
	int dfd, rc;

	/* the name is a header line: a line break would forge the rest of the header */
	if (strpbrk(p->name, "\r\n"))
		return hb_fail(err, errlen, -EINVAL, "a Pyroscope name holds a line break");
	clock_gettime(CLOCK_REALTIME, &ts);
	snapshot_stamp(ts.tv_sec, stamp);
	/* sorts by time; pid and nanoseconds keep concurrent heapbpf runs apart */
	if (snprintf(name, sizeof(name), "%s-%09ld-%d" SPOOL_EXT, stamp, ts.tv_nsec,
		     (int)getpid()) >= (int)sizeof(name) ||
	    strlen(sp->dir) + strlen(name) + 2 > PATH_MAX)
		return hb_fail(err, errlen, -ENAMETOOLONG,
			       "the spool directory %s has too long a name", sp->dir);
	dfd = output_open_dir(sp->dir, OUTPUT_DIR_PRIVATE);
	if (dfd < 0)
		return hb_fail(err, errlen, dfd, "cannot use the spool directory %s: %s", sp->dir,
			       output_strerror(dfd));
	/* heapbpf's own queue, in a 0700 directory: 0600 whatever --file-mode says */
	rc = output_write_atomic_in(dfd, name, SPOOL_FILE_MODE, write_profile, (void *)p);
	close(dfd);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot write %s/%s to the spool: %s", sp->dir,
			       name, output_strerror(rc));
	return 0;
}

/* ---- retention ---- */

static bool spool_member(const char *name, char *group)
{
	if (!spool_file(name))
		return false;
	/* every file alone: a profile is delivered or dropped by itself */
	snprintf(group, NAME_MAX + 1, "%s", name);
	return true;
}

int spool__prune(struct spool *sp, struct retain_result *r, char *err, size_t errlen)
{
	const struct retain_rules rules = {
		.member = spool_member,
		.keep = sp->keep,
		.max_bytes = sp->max_bytes,
	};

	return retain_prune(sp->dir, &rules, r, err, errlen);
}

/* ---- delivery ---- */

int spool__lock(struct spool *sp, bool wait, char *err, size_t errlen)
{
	struct stat st;
	int dfd, fd, rc;

	if (sp->lock_fd >= 0)
		return 0;
	dfd = output_open_dir(sp->dir, OUTPUT_DIR_PRIVATE);
	if (dfd < 0)
		return hb_fail(err, errlen, dfd, "cannot use the spool directory %s: %s", sp->dir,
			       output_strerror(dfd));
	/* a link or a pipe planted as the lock is neither followed nor waited on */
	fd = openat(dfd, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	rc = fd < 0 ? -errno : 0;
	close(dfd);
	if (!rc && (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()))
		rc = -OUTPUT_ESPECIAL;
	if (rc) {
		if (fd >= 0)
			close(fd);
		return hb_fail(err, errlen, rc, "cannot open %s/" LOCK_FILE ": %s", sp->dir,
			       rc == -ELOOP ? output_strerror(-OUTPUT_ESYMLINK)
			       : rc == -OUTPUT_ESPECIAL
				       ? "it is not a regular file of heapbpf's; remove it"
				       : output_strerror(rc));
	}
	if (flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB)) {
		rc = -errno;
		close(fd);
		return hb_fail(err, errlen, rc, "cannot lock %s/" LOCK_FILE ": %s", sp->dir,
			       strerror(-rc));
	}
	sp->lock_fd = fd;
	sp->removed = false;
	return 0;
}

void spool__unlock(struct spool *sp)
{
	if (sp->lock_fd < 0)
		return;
	if (sp->removed) {
		/* the deletions are what says "delivered": make them durable */
		int dfd = open(sp->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	close(sp->lock_fd);
	sp->lock_fd = -1;
}

static int list_filter(const struct dirent *de)
{
	return spool_file(de->d_name);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int spool__list(const struct spool *sp, struct dirent ***files)
{
	int n = scandir(sp->dir, files, list_filter, by_name);

	return n < 0 ? -errno : n;
}

void spool_list_free(struct dirent **files, int n)
{
	for (int i = 0; i < n; i++)
		free(files[i]);
	free(files);
}

void spool__remove(struct spool *sp, const char *file)
{
	int dfd = output_open_dir(sp->dir, OUTPUT_DIR_PRIVATE);

	if (dfd < 0)
		return;
	if (!strchr(file, '/') && unlinkat(dfd, file, 0) == 0)
		sp->removed = true;
	close(dfd);
}

/* ---- reading ---- */

/*
 * The whole file, NUL-terminated, or NULL with a negative errno in *rc:
 * -EPERM for a file heapbpf did not write (another owner, another mode, a
 * second link), which is left alone and never pushed.
 */
static char *read_whole(int dfd, const char *file, size_t *len, int *rc)
{
	char *data = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		*rc = errno == ELOOP ? -EPERM : -errno;
		return NULL;
	}
	*rc = -EPERM;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != SPOOL_FILE_MODE || st.st_nlink != 1)
		goto fail;
	*rc = -EBADMSG;
	if ((size_t)st.st_size > SPOOL_MAX_FILE)
		goto fail;
	*rc = -ENOMEM;
	data = malloc(st.st_size + 1);
	if (!data)
		goto fail;
	*rc = -EIO;
	n = read(fd, data, st.st_size);
	if (n != st.st_size)
		goto fail;
	close(fd);
	data[n] = '\0';
	*len = n;
	*rc = 0;
	return data;
fail:
	close(fd);
	free(data);
	return NULL;
}

/* "HBSPOOL1\nname=...\nfrom=N\nuntil=N\n\n" then the body; data is NUL-terminated. */
static int parse(char *data, size_t len, struct spool_profile *p)
{
	char *line, *end;

	if (strncmp(data, SPOOL_MAGIC, strlen(SPOOL_MAGIC)) != 0)
		return -EBADMSG;
	line = data + strlen(SPOOL_MAGIC);
	if (strncmp(line, "name=", 5) != 0 || !(end = strchr(line, '\n')))
		return -EBADMSG;
	*end = '\0';
	p->name = line + 5;
	line = end + 1;
	if (sscanf(line, "from=%" SCNd64 "\nuntil=%" SCNd64 "\n", &p->from, &p->until) != 2)
		return -EBADMSG;
	end = strstr(line, "\n\n");
	if (!end)
		return -EBADMSG;
	p->body = end + 2;
	p->len = len - (size_t)(end + 2 - data);
	return p->len ? 0 : -EBADMSG;
}

int spool__read(const struct spool *sp, const char *file, struct spool_profile *p, char **data)
{
	size_t len = 0;
	int dfd, rc;

	memset(p, 0, sizeof(*p));
	*data = NULL;
	if (strchr(file, '/'))
		return -EINVAL;
	dfd = output_open_dir(sp->dir, OUTPUT_DIR_PRIVATE);
	if (dfd < 0)
		return dfd;
	*data = read_whole(dfd, file, &len, &rc);
	close(dfd);
	return *data ? parse(*data, len, p) : rc;
}
