// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errmsg.h"
#include "snapshot.h"

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
	if (!ends_with(p, ".pb.gz") && !ends_with(p, ".folded") && !ends_with(p, ".folded.zst") &&
	    !ends_with(p, ".html"))
		return false;
	memcpy(stamp, name + 5, SNAPSHOT_STAMP_LEN);
	stamp[SNAPSHOT_STAMP_LEN] = '\0';
	return true;
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

int snapshot_prune(const char *dir, size_t keep, uint64_t max_bytes, struct retain_result *r,
		   char *err, size_t errlen)
{
	const struct retain_rules rules = {
		.member = snapshot_parse_name, /* grouped by stamp: one window */
		.keep = keep,
		.max_bytes = max_bytes,
		.time = snapshot_stamp_time,
	};

	return retain_prune(dir, &rules, r, err, errlen);
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
