// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "folded.h"
#include "output.h"
#include "pprof.h"
#include "snapshot.h"

#define ZSTD_LEVEL   9	  /* a profile is written once and kept long: spend a little CPU */
#define STALE_TEMP_S 3600 /* no write of one profile takes an hour */

void snapshot_stamp(time_t t, char *buf)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, SNAPSHOT_STAMP_LEN + 1, "%Y%m%dT%H%M%SZ", &tm);
}

void snapshot_safe_comm(const char *comm, char *out, size_t len)
{
	size_t i = 0;

	for (; comm && *comm && i + 1 < len; comm++) {
		unsigned char c = (unsigned char)*comm;

		out[i++] = isalnum(c) || c == '.' || c == '_' || c == '-' ? (char)c : '_';
	}
	if (!i && len > 1)
		out[i++] = '_';
	out[i] = '\0';
}

int snapshot_name(char *buf, size_t len, const char *stamp, pid_t pid, const char *comm,
		  const char *ext)
{
	char safe[64];

	snapshot_safe_comm(comm, safe, sizeof(safe));
	if (snprintf(buf, len, "heap-%s-%d-%s.%s", stamp, (int)pid, safe, ext) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static bool valid_stamp(const char *s)
{
	for (int i = 0; i < SNAPSHOT_STAMP_LEN; i++) {
		if (i == 8 ? s[i] != 'T' : i == 15 ? s[i] != 'Z' : !isdigit((unsigned char)s[i]))
			return false;
	}
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool snapshot_parse_name(const char *name, char stamp[SNAPSHOT_STAMP_LEN + 1])
{
	const char *p = name + 5;

	if (strncmp(name, "heap-", 5) != 0 || strlen(name) < 5 + SNAPSHOT_STAMP_LEN + 4 ||
	    !valid_stamp(p) || p[SNAPSHOT_STAMP_LEN] != '-')
		return false;
	p += SNAPSHOT_STAMP_LEN + 1;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p != '-')
		return false;
	/* output_write_atomic's temporaries end in .tmp.XXXXXX: never theirs */
	if (strstr(p, ".tmp."))
		return false;
	if (!ends_with(p, ".pb.gz") && !ends_with(p, ".folded") && !ends_with(p, ".folded.zst"))
		return false;
	memcpy(stamp, name + 5, SNAPSHOT_STAMP_LEN);
	stamp[SNAPSHOT_STAMP_LEN] = '\0';
	return true;
}

struct folded_arg {
	const struct hb_profile *p;
	enum hb_value which;
};

static int write_folded(FILE *f, void *arg)
{
	struct folded_arg *a = arg;

	return folded_write(a->p, a->which, f);
}

int snapshot_write_folded_zst(const char *path, const struct hb_profile *p, enum hb_value which)
{
	char *text = NULL;
	size_t len = 0, bound, clen;
	void *z;
	FILE *f;
	int err;

	f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	err = folded_write(p, which, f);
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(text);
		return err;
	}
	bound = ZSTD_compressBound(len);
	z = malloc(bound ? bound : 1);
	if (!z) {
		free(text);
		return -ENOMEM;
	}
	clen = ZSTD_compress(z, bound, text, len, ZSTD_LEVEL);
	free(text);
	if (ZSTD_isError(clen)) {
		free(z);
		return -EIO;
	}
	err = output_write_buffer(path, z, clen);
	free(z);
	return err;
}

int snapshot_write(const struct snapshot_opts *o, const struct hb_profile *p, char *err,
		   size_t errlen)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	int rc = 0;

	if (o->formats & SNAP_PPROF) {
		uint8_t *buf = NULL;
		size_t len = 0;

		rc = snapshot_name(name, sizeof(name), o->stamp, o->pid, o->comm, "pb.gz");
		snprintf(path, sizeof(path), "%s/%s", o->dir, name);
		rc = rc ?: pprof_encode(p, &buf, &len);
		rc = rc ?: output_write_buffer(path, buf, len);
		free(buf);
		if (rc)
			goto fail;
	}
	if (o->formats & SNAP_FOLDED) {
		struct folded_arg fa = { .p = p, .which = o->folded };

		rc = snapshot_name(name, sizeof(name), o->stamp, o->pid, o->comm,
				   o->zstd ? "folded.zst" : "folded");
		snprintf(path, sizeof(path), "%s/%s", o->dir, name);
		if (!rc)
			rc = o->zstd ? snapshot_write_folded_zst(path, p, o->folded)
				     : output_write_atomic(path, write_folded, &fa);
		if (rc)
			goto fail;
	}
	return 0;
fail:
	snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
	return rc;
}

struct entry {
	char name[NAME_MAX + 1];
	char group[NAME_MAX + 1];
	uint64_t size;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->group, y->group);

	return c ? c : strcmp(x->name, y->name);
}

static bool spool_name(const char *name)
{
	return name[0] != '.' && ends_with(name, ".spool") && !strstr(name, ".tmp.");
}

/* An output_write_atomic() temporary of ours, untouched for STALE_TEMP_S. */
static bool stale_temp(int dfd, const char *name, enum retain_kind kind)
{
	const char *t = strstr(name, ".tmp.");
	char base[NAME_MAX + 1], stamp[SNAPSHOT_STAMP_LEN + 1];
	struct stat st;

	if (!t || strlen(t) != 11 || (size_t)(t - name) >= sizeof(base))
		return false;
	snprintf(base, sizeof(base), "%.*s", (int)(t - name), name);
	if (kind == RETAIN_SNAPSHOTS ? !snapshot_parse_name(base, stamp) : !spool_name(base))
		return false;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	       st.st_mtime < time(NULL) - STALE_TEMP_S;
}

/* Deletes the entries of group [i, j); returns how many bytes went. */
static uint64_t delete_group(int dfd, struct entry *e, size_t i, size_t j, struct retain_result *r)
{
	uint64_t bytes = 0;

	for (; i < j; i++) {
		if (unlinkat(dfd, e[i].name, 0) == 0 || errno == ENOENT) {
			r->deleted_files++;
			r->deleted_bytes += e[i].size;
			bytes += e[i].size;
		}
	}
	return bytes;
}

int snapshot_retain(const char *dir, enum retain_kind kind, size_t keep, uint64_t max_bytes,
		    struct retain_result *r, char *err, size_t errlen)
{
	struct entry *e = NULL;
	size_t n = 0, cap = 0, ngroups = 0, *starts = NULL, first = 0;
	uint64_t total = 0;
	struct dirent *de;
	int dfd, rc = 0;
	DIR *d;

	memset(r, 0, sizeof(*r));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
		return rc;
	}
	/* one heapbpf at a time decides what goes: they share the directory */
	if (flock(dfd, LOCK_EX)) {
		rc = -errno;
		snprintf(err, errlen, "cannot lock %s: %s", dir, strerror(errno));
		close(dfd);
		return rc;
	}
	d = fdopendir(dup(dfd));
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
		goto out;
	}
	while ((de = readdir(d))) {
		char stamp[SNAPSHOT_STAMP_LEN + 1];
		struct stat st;

		/* what a run killed in the middle of a write left behind, once surely dead */
		if (stale_temp(dfd, de->d_name, kind)) {
			unlinkat(dfd, de->d_name, 0);
			continue;
		}
		if (kind == RETAIN_SNAPSHOTS ? !snapshot_parse_name(de->d_name, stamp)
					     : !spool_name(de->d_name))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct entry *ne = realloc(e, ncap * sizeof(*ne));

			if (!ne) {
				rc = -ENOMEM;
				break;
			}
			e = ne;
			cap = ncap;
		}
		snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
		snprintf(e[n].group, sizeof(e[n].group), "%s",
			 kind == RETAIN_SNAPSHOTS ? stamp : de->d_name);
		e[n].size = (uint64_t)st.st_size;
		total += e[n].size;
		n++;
	}
	closedir(d);
	if (rc) {
		snprintf(err, errlen, "cannot list %s: %s", dir, strerror(-rc));
		goto out;
	}
	if (n)
		qsort(e, n, sizeof(*e), cmp_entry);
	starts = calloc(n + 1, sizeof(*starts));
	if (!starts) {
		rc = -ENOMEM;
		snprintf(err, errlen, "cannot list %s: %s", dir, strerror(ENOMEM));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!i || strcmp(e[i].group, e[i - 1].group) != 0)
			starts[ngroups++] = i;
	}
	starts[ngroups] = n;
	/* oldest groups first: by count, then by size, never the newest one */
	while (keep && ngroups - first > keep) {
		total -= delete_group(dfd, e, starts[first], starts[first + 1], r);
		first++;
	}
	while (max_bytes && total > max_bytes && ngroups - first > 1) {
		total -= delete_group(dfd, e, starts[first], starts[first + 1], r);
		first++;
	}
	r->groups = ngroups - first;
	r->bytes = total;
	r->newest_over = max_bytes && total > max_bytes;
	if (r->deleted_files)
		fsync(dfd);
out:
	free(starts);
	free(e);
	close(dfd); /* and with it the lock */
	return rc;
}

int snapshot_mkdir(const char *dir)
{
	char path[PATH_MAX];
	size_t n;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	n = strlen(path);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0750) && errno != EEXIST)
			return -errno;
		path[i] = i == n ? '\0' : '/';
	}
	return 0;
}
