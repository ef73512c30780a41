// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The values options take: counts, sizes, seconds, durations, file modes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/values.h"

int values_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "512", "64K", "256M", "2G" (powers of 1024) */
int values_bytes(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
		shift = 20;
		end++;
		break;
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* "16" (MiB), "512k", "64m": between 16 KiB and 1 GiB. */
int values_size(const char *s, size_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 20;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		shift = 10, end++;
	else if (*end == 'm' || *end == 'M')
		end++;
	if (*end || v > (1ULL << 30) >> shift || (v << shift) < (16ULL << 10))
		return -EINVAL;
	*out = (size_t)(v << shift);
	return 0;
}

int values_seconds(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(*out) || *out < 0 || *out > 31 * 24 * 3600.0)
		return -EINVAL;
	return 0;
}

/* "1ms", "250us", "2s", "0.5" (seconds): at most a day, in nanoseconds. */
int values_duration_ns(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		double ns;
	} units[] = { { "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "", 1e9 } };
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0 || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			v *= units[i].ns;
			if (v > 86400e9)
				return -EINVAL;
			*out = (uint64_t)llround(v);
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * --file-mode: "600", "0640", "0644": octal, read and write bits only (no
 * execute, setuid, setgid or sticky bit), the owner's read and write included.
 */
int values_file_mode(const char *s, mode_t *out)
{
	size_t n = strlen(s);
	unsigned long v;

	if (n < 3 || n > 4 || strspn(s, "01234567") != n)
		return -EINVAL;
	v = strtoul(s, NULL, 8);
	if (v & ~0666ul || (v & 0600) != 0600)
		return -EINVAL;
	*out = (mode_t)v;
	return 0;
}
