// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "util/output.h"
#include "export/snapshot.h"

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

int snapshot_name_seq(char *buf, size_t len, const char *stamp, unsigned int seq, pid_t pid,
		      const char *comm, const char *ext)
{
	char safe[64], num[16] = "";

	if (!seq || seq > SNAPSHOT_MAX_SEQ)
		return -ERANGE;
	if (seq > 1)
		snprintf(num, sizeof(num), ".%u", seq);
	snapshot_safe_comm(comm, safe, sizeof(safe));
	if (snprintf(buf, len, "heap-%s%s-%d-%s.%s", stamp, num, (int)pid, safe, ext) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

int snapshot_name(char *buf, size_t len, const char *stamp, pid_t pid, const char *comm,
		  const char *ext)
{
	return snapshot_name_seq(buf, len, stamp, 1, pid, comm, ext);
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

/*
 * ".SEQ" as snapshot_name_seq() writes it after a stamp (2 to
 * SNAPSHOT_MAX_SEQ, no leading zero) at *p, which moves past it; 1 when
 * there is none, 0 when it is not one.
 */
static unsigned int parse_seq(const char **p)
{
	const char *s = *p;
	unsigned int seq = 0;

	if (*s != '.')
		return 1;
	s++;
	if (*s == '0')
		return 0;
	for (int digits = 0; isdigit((unsigned char)*s); s++) {
		if (++digits > 4)
			return 0;
		seq = seq * 10 + (unsigned int)(*s - '0');
	}
	if (seq < 2 || seq > SNAPSHOT_MAX_SEQ)
		return 0;
	*p = s;
	return seq;
}

/*
 * A complete snapshot file's stamp, number (1: none) and where its pid
 * starts; false for any other name.
 */
static bool parse(const char *name, char stamp[SNAPSHOT_STAMP_LEN + 1], unsigned int *seq,
		  const char **pid)
{
	const char *p = name + 5;

	if (strncmp(name, "heap-", 5) != 0 || strlen(name) < 5 + SNAPSHOT_STAMP_LEN + 4 ||
	    !valid_stamp(p))
		return false;
	p += SNAPSHOT_STAMP_LEN;
	*seq = parse_seq(&p);
	if (!*seq || *p != '-')
		return false;
	p++;
	*pid = p;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p != '-')
		return false;
	/* output_write_atomic's temporaries end in .tmp.XXXXXX: never theirs */
	if (strstr(p, ".tmp."))
		return false;
	if (!ends_with(p, ".pb.gz") && !ends_with(p, ".folded") && !ends_with(p, ".folded.zst") &&
	    !ends_with(p, ".html") && !ends_with(p, ".rss.json"))
		return false;
	memcpy(stamp, name + 5, SNAPSHOT_STAMP_LEN);
	stamp[SNAPSHOT_STAMP_LEN] = '\0';
	return true;
}

bool snapshot_parse_name(const char *name, char stamp[SNAPSHOT_STAMP_LEN + 1])
{
	unsigned int seq;
	const char *pid;

	return parse(name, stamp, &seq, &pid);
}

/*
 * Retention's group of a snapshot file: its stamp, and a numbered one's
 * number, zero-padded so that groups sort as they were written
 * ("STAMP" < "STAMP.0002" < "STAMP.0010" < the next second's).
 */
static bool member(const char *name, char *group)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1];
	unsigned int seq;
	const char *pid;

	if (!parse(name, stamp, &seq, &pid))
		return false;
	if (seq > 1)
		snprintf(group, NAME_MAX + 1, "%s.%04u", stamp, seq);
	else
		snprintf(group, NAME_MAX + 1, "%s", stamp);
	return true;
}

/* Retention's series of a snapshot file (member() holds): its pid. */
static void pid_of(const char *name, char *series)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1];
	unsigned int seq;
	const char *pid = NULL;

	if (parse(name, stamp, &seq, &pid))
		snprintf(series, NAME_MAX + 1, "%.*s", (int)strspn(pid, "0123456789"), pid);
	else
		series[0] = '\0';
}

int64_t snapshot_stamp_time(const char *stamp)
{
	struct tm tm = { 0 };
	const char *end;

	end = strptime(stamp, "%Y%m%dT%H%M%SZ", &tm);
	if (!end || *end)
		return -1;
	return (int64_t)timegm(&tm);
}

/* The time of a group member() made: its stamp's. */
static int64_t group_time(const char *group)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1];

	snprintf(stamp, sizeof(stamp), "%s", group);
	return snapshot_stamp_time(stamp);
}

int snapshot_prune(const char *dir, size_t keep, uint64_t max_bytes, struct retain_result *r,
		   char *err, size_t errlen)
{
	const struct retain_rules rules = {
		.member = member, /* grouped by stamp: one window */
		.keep = keep,
		.max_bytes = max_bytes,
		.time = group_time,
	};

	return retain_prune(dir, &rules, r, err, errlen);
}

int snapshot_prune_per_process(const char *dir, size_t keep, uint64_t max_bytes,
			       struct retain_result *r, char *err, size_t errlen)
{
	const struct retain_rules rules = {
		.member = member,
		.series = pid_of,
		.keep = keep,
		.max_bytes = max_bytes,
		.time = group_time,
	};

	return retain_prune(dir, &rules, r, err, errlen);
}

static int name_of(unsigned int seq, char *buf, size_t len, void *arg)
{
	const struct snapshot_file *f = arg;

	return snapshot_name_seq(buf, len, f->stamp, seq, f->pid, f->who, f->ext);
}

int snapshot_write(struct snapshot_file *f, int (*write_fn)(FILE *out, void *arg), void *arg,
		   char *err, size_t errlen)
{
	char name[NAME_MAX + 1];
	int dfd, rc;

	rc = name_of(f->seq, name, sizeof(name), f);
	/* room for a number's digits after it, too */
	if (rc ||
	    snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name) >= (int)sizeof(f->path) ||
	    strlen(f->path) + 8 > sizeof(f->path))
		return hb_fail(err, errlen, -ENAMETOOLONG,
			       "cannot name a snapshot in %s: the name is too long", f->dir);
	dfd = output_open_dir(f->dir, OUTPUT_DIR_FILES);
	if (dfd < 0)
		return hb_fail(err, errlen, dfd, "cannot write %s: %s", f->path,
			       output_strerror(dfd));
	rc = output_write_new_in(dfd, output_file_mode(), name_of, f, &f->seq, name, sizeof(name),
				 write_fn, arg);
	close(dfd);
	if (rc == -EEXIST || rc == -ERANGE)
		return hb_fail(err, errlen, -EEXIST,
			       "cannot write %s: files hold that name and every number after it "
			       "up to %d",
			       f->path, SNAPSHOT_MAX_SEQ);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot write %s: %s", f->path,
			       output_strerror(rc));
	if (snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name) >= (int)sizeof(f->path))
		return hb_fail(err, errlen, -ENAMETOOLONG, "cannot name a snapshot in %s", f->dir);
	return 0;
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
