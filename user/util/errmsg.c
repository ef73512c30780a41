// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/errmsg.h"

static bool quiet, stamps;

void hb_set_quiet(bool q)
{
	quiet = q;
}

void hb_set_timestamps(bool on)
{
	stamps = on;
}

/* prefix, the message and a newline on stderr, in one write when memory allows. */
static void say_line(const char *prefix0, const char *fmt, va_list ap)
{
	char buf[1024], *line = buf, stamped[128];
	const char *prefix = prefix0;
	size_t plen, len;
	va_list aq;
	int n;

	if (stamps) {
		struct timespec ts;
		struct tm tm;
		size_t k;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		k = strftime(stamped, 32, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(stamped + k, sizeof(stamped) - k, ".%03ldZ %s", ts.tv_nsec / 1000000,
			 prefix0);
		prefix = stamped;
	}
	plen = strlen(prefix);

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return;
	len = plen + (size_t)n + 1;
	if (len > sizeof(buf))
		line = malloc(len);
	if (!line) {
		fputs(prefix, stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		return;
	}
	memcpy(line, prefix, plen);
	vsnprintf(line + plen, (size_t)n + 1, fmt, ap);
	line[len - 1] = '\n';
	fwrite(line, 1, len, stderr);
	if (line != buf)
		free(line);
}

void hb_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say_line("heapbpf: ", fmt, ap);
	va_end(ap);
}

void hb_error_clean(const char *what, const char *err, const char *fallback)
{
	char clean[HB_CLEAN_SIZE(2048)];

	hb_clean(clean, sizeof(clean), err && err[0] ? err : fallback ? fallback : "");
	if (what)
		hb_error("%s: %s", what, clean);
	else
		hb_error("%s", clean);
}

void hb_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say_line("heapbpf: warning: ", fmt, ap);
	va_end(ap);
}

void hb_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say_line("heapbpf: ", fmt, ap);
	va_end(ap);
}

void hb_note(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	say_line("heapbpf: ", fmt, ap);
	va_end(ap);
}

void hb_note_more(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	say_line("", fmt, ap);
	va_end(ap);
}

int hb_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* c as the terminal sees it, into out (5 bytes); returns its length. */
static size_t clean_byte(unsigned char c, char *out)
{
	if (c >= 0x20 && c < 0x7f) {
		out[0] = (char)c;
		out[1] = '\0';
		return 1;
	}
	return (size_t)snprintf(out, 5, "\\x%02x", c);
}

const char *hb_clean(char *dst, size_t len, const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t total = 0, n = 0, room;
	char one[5];

	if (!len)
		return dst;
	for (const unsigned char *p = s; *p; p++)
		total += clean_byte(*p, one);
	/* too long: what fits before "..." */
	room = total < len ? len - 1 : len > 4 ? len - 4 : len - 1;
	for (; *s; s++) {
		size_t k = clean_byte(*s, one);

		if (n + k > room)
			break;
		memcpy(dst + n, one, k);
		n += k;
	}
	if (*s && len > 4) {
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
	return dst;
}
