// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Parser for jemalloc's "heap_v2" heap profile dumps; see jedump.h for the
 * format. The input comes from a file some other process wrote, possibly
 * while being killed, so every byte is checked and anything unexpected is
 * -EINVAL rather than a guess.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jedump.h"

/* One line, without its '\n'. */
struct cursor {
	const char *p, *end;
};

static bool at_end(const struct cursor *c)
{
	return c->p == c->end;
}

static void skip_blanks(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

static bool eat(struct cursor *c, char ch)
{
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

static bool eat_str(struct cursor *c, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
		return false;
	c->p += n;
	return true;
}

/* Only trailing blanks may remain. */
static bool eat_eol(struct cursor *c)
{
	skip_blanks(c);
	return at_end(c);
}

static bool parse_dec(struct cursor *c, uint64_t *out)
{
	const char *start = c->p;
	uint64_t v = 0;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned int d = *c->p - '0';

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		c->p++;
	}
	*out = v;
	return c->p != start;
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Hex digits, with a "0x" prefix when allow_prefix (printf's %#x: but "0" for 0). */
static bool parse_hex(struct cursor *c, bool allow_prefix, uint64_t *out)
{
	const char *start;
	uint64_t v = 0;
	int d;

	if (allow_prefix && c->end - c->p > 2 && c->p[0] == '0' &&
	    (c->p[1] == 'x' || c->p[1] == 'X'))
		c->p += 2;
	start = c->p;
	while (c->p < c->end && (d = hex_digit(*c->p)) >= 0) {
		if (v >> 60)
			return false;
		v = v << 4 | d;
		c->p++;
	}
	*out = v;
	return c->p != start;
}

/* A token must end at a blank or the end of the line: rejects "12ab" read as hex "12". */
static bool at_token_end(const struct cursor *c)
{
	return at_end(c) || *c->p == ' ' || *c->p == '\t';
}

/* "curobjs: curbytes [accumobjs: accumbytes]" */
static bool parse_counts(struct cursor *c, uint64_t v[4])
{
	skip_blanks(c);
	if (!parse_dec(c, &v[0]) || !eat(c, ':'))
		return false;
	skip_blanks(c);
	if (!parse_dec(c, &v[1]))
		return false;
	skip_blanks(c);
	if (!eat(c, '['))
		return false;
	skip_blanks(c);
	if (!parse_dec(c, &v[2]) || !eat(c, ':'))
		return false;
	skip_blanks(c);
	if (!parse_dec(c, &v[3]))
		return false;
	skip_blanks(c);
	return eat(c, ']');
}

/* "  t*: <counts>" */
static bool parse_total_line(struct cursor *c, uint64_t v[4])
{
	skip_blanks(c);
	return eat_str(c, "t*:") && parse_counts(c, v) && eat_eol(c);
}

/*
 * "  t<thread uid>: <counts>[ <thread name>]". Only checked: the per-thread
 * split is not part of what the tests compare.
 */
static bool is_thread_line(struct cursor c)
{
	uint64_t uid, v[4];

	skip_blanks(&c);
	if (!eat(&c, 't') || !parse_dec(&c, &uid) || !eat(&c, ':') || !parse_counts(&c, v))
		return false;
	/* jemalloc separates a thread name by one space; the name is free text. */
	return at_end(&c) || *c.p == ' ' || *c.p == '\t';
}

/* Doubles *cap as needed so that n + 1 elements of size sz fit. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	if (ncap < *cap || ncap > SIZE_MAX / sz)
		return -ENOMEM;
	p = realloc(*arr, ncap * sz);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* "@ 0x55aa5381d890 0x55aa5381df81 ..."; the '@' already eaten. */
static int parse_frames(struct cursor *c, struct jedump_stack *s)
{
	size_t cap = 0;
	int err;

	for (;;) {
		uint64_t pc;

		if (!at_end(c) && !eat(c, ' ') && !eat(c, '\t'))
			return -EINVAL;
		skip_blanks(c);
		if (at_end(c))
			return 0;
		if (!parse_hex(c, true, &pc) || !at_token_end(c))
			return -EINVAL;
		err = grow((void **)&s->frames, &cap, s->nframes, sizeof(*s->frames));
		if (err)
			return err;
		s->frames[s->nframes++] = pc;
	}
}

/* A /proc/PID/maps line: "start-end perms offset major:minor inode   [path]". */
static int parse_map(struct cursor *c, struct jedump_map *m)
{
	uint64_t major, minor, inode;
	size_t i, len;

	if (!parse_hex(c, false, &m->start) || !eat(c, '-') || !parse_hex(c, false, &m->end) ||
	    m->end < m->start || !eat(c, ' '))
		return -EINVAL;
	for (i = 0; i < 4; i++) {
		if (at_end(c) || *c->p == ' ' || *c->p == '\t')
			return -EINVAL;
		m->perms[i] = *c->p++;
	}
	m->perms[4] = '\0';
	if (!eat(c, ' ') || !parse_hex(c, false, &m->offset) || !eat(c, ' ') ||
	    !parse_hex(c, false, &major) || !eat(c, ':') || !parse_hex(c, false, &minor) ||
	    !eat(c, ' ') || !parse_dec(c, &inode) || !at_token_end(c))
		return -EINVAL;
	skip_blanks(c);
	/* The kernel pads to a column before the path; the path itself is verbatim. */
	len = c->end - c->p;
	m->path = malloc(len + 1);
	if (!m->path)
		return -ENOMEM;
	memcpy(m->path, c->p, len);
	m->path[len] = '\0';
	return 0;
}

enum parse_state {
	ST_MAGIC,	/* expecting "heap_v2/N" */
	ST_TOTALS,	/* expecting the header's "t*:" */
	ST_BODY,	/* thread lines, stacks, the blank line, MAPPED_LIBRARIES: */
	ST_STACK_TOTAL, /* after "@ ...", expecting its "t*:" */
	ST_MAPS,	/* /proc/PID/maps lines */
};

static int parse_line(struct jedump *d, enum parse_state *st, struct cursor *c, size_t *stacks_cap,
		      size_t *maps_cap)
{
	uint64_t v[4];
	int err;

	switch (*st) {
	case ST_MAGIC:
		if (!eat_str(c, "heap_v2/") || !parse_dec(c, &d->sample_period) ||
		    !d->sample_period || !at_end(c))
			return -EINVAL;
		*st = ST_TOTALS;
		return 0;
	case ST_TOTALS:
		if (!parse_total_line(c, v))
			return -EINVAL;
		d->total_curobjs = v[0];
		d->total_curbytes = v[1];
		d->total_accumobjs = v[2];
		d->total_accumbytes = v[3];
		*st = ST_BODY;
		return 0;
	case ST_STACK_TOTAL: {
		struct jedump_stack *s = &d->stacks[d->nstacks - 1];

		if (!parse_total_line(c, v))
			return -EINVAL;
		s->curobjs = v[0];
		s->curbytes = v[1];
		s->accumobjs = v[2];
		s->accumbytes = v[3];
		*st = ST_BODY;
		return 0;
	}
	case ST_BODY:
		if (eat(c, '@')) {
			err = grow((void **)&d->stacks, stacks_cap, d->nstacks, sizeof(*d->stacks));
			if (err)
				return err;
			memset(&d->stacks[d->nstacks], 0, sizeof(d->stacks[0]));
			/* Counted before parsing, so that jedump__free() sees its frames. */
			d->nstacks++;
			*st = ST_STACK_TOTAL;
			return parse_frames(c, &d->stacks[d->nstacks - 1]);
		}
		if (eat_str(c, "MAPPED_LIBRARIES:")) {
			if (!at_end(c))
				return -EINVAL;
			*st = ST_MAPS;
			return 0;
		}
		if (eat_eol(c) || is_thread_line(*c))
			return 0;
		return -EINVAL;
	case ST_MAPS:
		err = grow((void **)&d->maps, maps_cap, d->nmaps, sizeof(*d->maps));
		if (err)
			return err;
		memset(&d->maps[d->nmaps], 0, sizeof(d->maps[0]));
		err = parse_map(c, &d->maps[d->nmaps]);
		if (err) {
			free(d->maps[d->nmaps].path);
			return err;
		}
		d->nmaps++;
		return 0;
	}
	return -EINVAL;
}

int jedump_parse(const char *text, size_t len, struct jedump **out)
{
	enum parse_state st = ST_MAGIC;
	size_t stacks_cap = 0, maps_cap = 0;
	const char *p, *end;
	struct jedump *d;
	int err = 0;

	*out = NULL;
	/* A NUL would end a path early: not text jemalloc writes. */
	if (!text || memchr(text, '\0', len))
		return -EINVAL;
	p = text;
	end = text + len;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;

	/* A final line without '\n' counts; the empty string after a final '\n' does not. */
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		struct cursor c = { p, nl ? nl : end };

		err = parse_line(d, &st, &c, &stacks_cap, &maps_cap);
		if (err)
			goto fail;
		p = nl ? nl + 1 : end;
	}
	/*
	 * Without MAPPED_LIBRARIES is fine (jemalloc could not read the maps);
	 * a missing header or a stack cut off before its counts is not.
	 */
	if (st != ST_BODY && st != ST_MAPS) {
		err = -EINVAL;
		goto fail;
	}
	*out = d;
	return 0;
fail:
	jedump__free(d);
	return err;
}

int jedump_parse_file(const char *path, struct jedump **out)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;
	int fd, err = 0;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 64 * 1024;
			char *nbuf = ncap > cap ? realloc(buf, ncap) : NULL;

			if (!nbuf) {
				err = -ENOMEM;
				break;
			}
			buf = nbuf;
			cap = ncap;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	if (!err)
		err = jedump_parse(buf ? buf : "", len, out);
	free(buf);
	return err;
}

void jedump__free(struct jedump *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->nstacks; i++)
		free(d->stacks[i].frames);
	for (i = 0; i < d->nmaps; i++)
		free(d->maps[i].path);
	free(d->stacks);
	free(d->maps);
	free(d);
}

const struct jedump_map *jedump_find_map(const struct jedump *d, uint64_t addr)
{
	size_t i;

	for (i = 0; i < d->nmaps; i++) {
		if (addr >= d->maps[i].start && addr < d->maps[i].end)
			return &d->maps[i];
	}
	return NULL;
}
