// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "util/retain.h"

#define STALE_TEMP_S 3600 /* no write of one file takes an hour */

struct entry {
	char name[NAME_MAX + 1];
	char group[NAME_MAX + 1];
	char series[NAME_MAX + 1]; /* "" without rules->series */
	uint64_t size;
	bool gone; /* deleted by keep (or tried: its group counts as gone) */
};

struct listing {
	struct entry *e;
	size_t n, cap;
	uint64_t total;
};

/* Oldest first: by group, then series, then name. */
static int cmp_time(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->group, y->group);

	c = c ?: strcmp(x->series, y->series);
	return c ? c : strcmp(x->name, y->name);
}

/* Each series together, oldest first within it. */
static int cmp_series(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->series, y->series);

	return c ? c : cmp_time(a, b);
}

/* Files of one group of one series: what retention deletes together. */
static bool same_unit(const struct entry *a, const struct entry *b)
{
	return strcmp(a->group, b->group) == 0 && strcmp(a->series, b->series) == 0;
}

/* An output_write_atomic() temporary ("MEMBER.tmp.XXXXXX") untouched for STALE_TEMP_S. */
static bool stale_temp(int dfd, const char *name, retain_member_fn *member)
{
	const char *t = strstr(name, ".tmp.");
	char base[NAME_MAX + 1], group[NAME_MAX + 1];
	struct stat st;

	if (!t || strlen(t) != 11 || (size_t)(t - name) >= sizeof(base))
		return false;
	snprintf(base, sizeof(base), "%.*s", (int)(t - name), name);
	if (!member(base, group))
		return false;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	       st.st_mtime < time(NULL) - STALE_TEMP_S;
}

static int add_entry(struct listing *l, const char *name, const char *group, const char *series,
		     uint64_t size)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		struct entry *ne = realloc(l->e, ncap * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		l->e = ne;
		l->cap = ncap;
	}
	snprintf(l->e[l->n].name, sizeof(l->e[0].name), "%s", name);
	snprintf(l->e[l->n].group, sizeof(l->e[0].group), "%s", group);
	snprintf(l->e[l->n].series, sizeof(l->e[0].series), "%s", series);
	l->e[l->n].size = size;
	l->e[l->n].gone = false;
	l->total += size;
	l->n++;
	return 0;
}

/* Names name in r->future, the list cut with "..." when full. */
static void note_future(struct retain_result *r, const char *name)
{
	size_t n = strlen(r->future), room = sizeof(r->future);

	r->future_files++;
	if (n >= 3 && strcmp(r->future + n - 3, "...") == 0)
		return;
	if (n + 2 + strlen(name) + 4 > room) {
		snprintf(r->future + n, room - n, "%s...", n ? ", " : "");
		return;
	}
	snprintf(r->future + n, room - n, "%s%s", n ? ", " : "", name);
}

/* Collects the members d lists (and closes d); deletes stale temporaries on the way. */
static int list_members(int dfd, DIR *d, const struct retain_rules *rules, struct listing *l,
			struct retain_result *r)
{
	retain_member_fn *member = rules->member;
	int64_t limit = (int64_t)time(NULL) + RETAIN_FUTURE_SLACK_S;
	struct dirent *de;
	int rc = 0;

	while (!rc && (de = readdir(d))) {
		char group[NAME_MAX + 1], series[NAME_MAX + 1] = "";
		struct stat st;

		/* what a run killed in the middle of a write left behind, once surely dead */
		if (stale_temp(dfd, de->d_name, member)) {
			unlinkat(dfd, de->d_name, 0);
			continue;
		}
		if (!member(de->d_name, group))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (rules->time && rules->time(group) > limit) {
			note_future(r, de->d_name);
			continue;
		}
		if (rules->series)
			rules->series(de->d_name, series);
		rc = add_entry(l, de->d_name, group, series, (uint64_t)st.st_size);
	}
	closedir(d);
	return rc;
}

/* Deletes the unit (a group of one series) that starts at *i, *i moved past it; the bytes that went. */
static uint64_t delete_unit(int dfd, struct listing *l, size_t *i, struct retain_result *r)
{
	const struct entry *first = &l->e[*i];
	uint64_t bytes = 0;
	size_t j;

	for (j = *i; j < l->n && same_unit(&l->e[j], first); j++) {
		if (unlinkat(dfd, l->e[j].name, 0) == 0 || errno == ENOENT) {
			r->deleted_files++;
			r->deleted_bytes += l->e[j].size;
			bytes += l->e[j].size;
		}
		l->e[j].gone = true;
	}
	*i = j;
	return bytes;
}

/* The units of l->e[from, to), which sort as cmp_time or cmp_series put them. */
static size_t count_units(const struct listing *l, size_t from, size_t to)
{
	size_t units = 0;

	for (size_t k = from; k < to; k++) {
		if (k == from || !same_unit(&l->e[k], &l->e[k - 1]))
			units++;
	}
	return units;
}

/* keep: the oldest groups of each series beyond keep; the bytes that went. */
static uint64_t prune_keep(int dfd, struct listing *l, size_t keep, struct retain_result *r)
{
	uint64_t bytes = 0;
	size_t end;

	qsort(l->e, l->n, sizeof(*l->e), cmp_series);
	for (size_t start = 0; start < l->n; start = end) {
		size_t units, i = start;

		for (end = start; end < l->n && !strcmp(l->e[end].series, l->e[start].series);)
			end++;
		for (units = count_units(l, start, end); units > keep; units--)
			bytes += delete_unit(dfd, l, &i, r);
	}
	return bytes;
}

/* Oldest first: by count (of each series), then by size, never the newest group. */
static void prune(int dfd, struct listing *l, const struct retain_rules *rules,
		  struct retain_result *r)
{
	uint64_t total = l->total;
	size_t units, i = 0, n = 0;

	if (rules->keep)
		total -= prune_keep(dfd, l, rules->keep, r);
	/* what keep left, oldest first over every series */
	for (size_t k = 0; k < l->n; k++) {
		if (!l->e[k].gone)
			l->e[n++] = l->e[k];
	}
	l->n = n;
	qsort(l->e, l->n, sizeof(*l->e), cmp_time);
	for (units = count_units(l, 0, l->n);
	     rules->max_bytes && total > rules->max_bytes && units > 1; units--)
		total -= delete_unit(dfd, l, &i, r);
	r->groups = units;
	r->bytes = total;
	r->newest_over = rules->max_bytes && total > rules->max_bytes;
}

int retain_prune(const char *dir, const struct retain_rules *rules, struct retain_result *r,
		 char *err, size_t errlen)
{
	struct listing l = {};
	int dfd, rc;
	DIR *d;

	memset(r, 0, sizeof(*r));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		return hb_fail(err, errlen, rc, "cannot open %s: %s", dir, strerror(-rc));
	}
	/* one heapbpf at a time decides what goes: they share the directory */
	if (flock(dfd, LOCK_EX)) {
		rc = -errno;
		hb_fail(err, errlen, rc, "cannot lock %s: %s", dir, strerror(-rc));
		goto out;
	}
	d = fdopendir(dup(dfd));
	if (!d) {
		rc = -errno;
		hb_fail(err, errlen, rc, "cannot read %s: %s", dir, strerror(-rc));
		goto out;
	}
	rc = list_members(dfd, d, rules, &l, r);
	if (rc) {
		hb_fail(err, errlen, rc, "cannot list %s: %s", dir, strerror(-rc));
		goto out;
	}
	if (l.n)
		prune(dfd, &l, rules, r);
	if (r->deleted_files)
		fsync(dfd);
out:
	free(l.e);
	close(dfd); /* and with it the lock */
	return rc;
}
