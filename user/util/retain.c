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

#include "errmsg.h"
#include "retain.h"

#define STALE_TEMP_S 3600 /* no write of one file takes an hour */

struct entry {
	char name[NAME_MAX + 1];
	char group[NAME_MAX + 1];
	uint64_t size;
};

struct listing {
	struct entry *e;
	size_t n, cap;
	uint64_t total;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->group, y->group);

	return c ? c : strcmp(x->name, y->name);
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

static int add_entry(struct listing *l, const char *name, const char *group, uint64_t size)
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
	l->e[l->n].size = size;
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
		char group[NAME_MAX + 1];
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
		rc = add_entry(l, de->d_name, group, (uint64_t)st.st_size);
	}
	closedir(d);
	return rc;
}

/* Deletes the oldest remaining group, the one that starts at *i; returns the bytes that went. */
static uint64_t delete_oldest(int dfd, const struct listing *l, size_t *i, struct retain_result *r)
{
	const char *group = l->e[*i].group;
	uint64_t bytes = 0;
	size_t j;

	for (j = *i; j < l->n && strcmp(l->e[j].group, group) == 0; j++) {
		if (unlinkat(dfd, l->e[j].name, 0) == 0 || errno == ENOENT) {
			r->deleted_files++;
			r->deleted_bytes += l->e[j].size;
			bytes += l->e[j].size;
		}
	}
	*i = j;
	return bytes;
}

/* l sorted: oldest groups go first, by count, then by size, never the newest one. */
static void prune_sorted(int dfd, const struct listing *l, const struct retain_rules *rules,
			 struct retain_result *r)
{
	uint64_t total = l->total;
	size_t groups = 0, i = 0;

	for (size_t k = 0; k < l->n; k++) {
		if (!k || strcmp(l->e[k].group, l->e[k - 1].group) != 0)
			groups++;
	}
	for (; rules->keep && groups > rules->keep; groups--)
		total -= delete_oldest(dfd, l, &i, r);
	for (; rules->max_bytes && total > rules->max_bytes && groups > 1; groups--)
		total -= delete_oldest(dfd, l, &i, r);
	r->groups = groups;
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
		qsort(l.e, l.n, sizeof(*l.e), cmp_entry);
	prune_sorted(dfd, &l, rules, r);
	if (r->deleted_files)
		fsync(dfd);
out:
	free(l.e);
	close(dfd); /* and with it the lock */
	return rc;
}
