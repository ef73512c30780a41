// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <zstd.h>

#include "util/errmsg.h"
#include "profile/flamegraph.h"
#include "profile/folded.h"
#include "util/output.h"
#include "profile/pprof.h"
#include "export/pyroscope.h"
#include "export/sink.h"
#include "export/snapshot.h"

#define ZSTD_LEVEL 9 /* a profile is written once and kept long: spend a little CPU */

const char *sink_extension(enum out_format format, bool zstd)
{
	if (format == FMT_PPROF)
		return "pb.gz";
	/* a page to open in a browser: compressed, it would not open */
	if (format == FMT_HTML)
		return "html";
	return zstd ? "folded.zst" : "folded";
}

int sink_format_of_name(const char *path)
{
	static const struct {
		const char *suffix;
		enum out_format format;
	} known[] = {
		{ ".pb.gz", FMT_PPROF },   { ".pb", FMT_PPROF },	 { ".pprof", FMT_PPROF },
		{ ".folded", FMT_FOLDED }, { ".collapsed", FMT_FOLDED }, { ".html", FMT_HTML },
		{ ".htm", FMT_HTML },
	};
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strlen(base);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		size_t n = strlen(known[i].suffix);

		/* a name that is only the suffix (".html") names no format */
		if (len > n && strcasecmp(base + len - n, known[i].suffix) == 0)
			return known[i].format;
	}
	return -1;
}

const char *sink_format_name(enum out_format format)
{
	static const char *const names[FMT_COUNT] = {
		[FMT_PPROF] = "pprof",
		[FMT_FOLDED] = "folded",
		[FMT_HTML] = "html",
	};

	return format < FMT_COUNT ? names[format] : "?";
}

void sink_default_name(char *buf, size_t len, const char *what, enum out_format format)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1], safe[96];

	snapshot_stamp(time(NULL), stamp);
	snapshot_safe_comm(what, safe, sizeof(safe));
	snprintf(buf, len, "heap-%s-%s.%s", stamp, safe, sink_extension(format, false));
}

static int zstd_in_place(uint8_t **buf, size_t *len)
{
	size_t bound = ZSTD_compressBound(*len), clen;
	uint8_t *z = malloc(bound ? bound : 1);

	if (!z)
		return -ENOMEM;
	clen = ZSTD_compress(z, bound, *buf, *len, ZSTD_LEVEL);
	if (ZSTD_isError(clen)) {
		free(z);
		return -EIO;
	}
	free(*buf);
	*buf = z;
	*len = clen;
	return 0;
}

/* A text format written by @write_fn (folded_write, flamegraph_write) into a buffer. */
static int encode_text(const struct hb_profile *p, enum hb_value which,
		       int (*write_fn)(const struct hb_profile *, enum hb_value, FILE *),
		       uint8_t **buf, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&text, &n);
	int err;

	if (!m)
		return -ENOMEM;
	err = write_fn(p, which, m);
	if (fclose(m) && !err)
		err = -ENOMEM;
	if (err) {
		free(text);
		return err;
	}
	*buf = (uint8_t *)text;
	*len = n;
	return 0;
}

int sink_encode(const struct hb_profile *p, const struct sink *s, uint8_t **buf, size_t *len)
{
	int err;

	*buf = NULL;
	*len = 0;
	switch (s->format) {
	case FMT_PPROF:
		return pprof_encode(p, buf, len);
	case FMT_FOLDED:
		err = encode_text(p, s->sample_type, folded_write, buf, len);
		if (!err && s->zstd)
			err = zstd_in_place(buf, len);
		break;
	case FMT_HTML:
		err = encode_text(p, s->sample_type, flamegraph_write, buf, len);
		break;
	default:
		return -EINVAL;
	}
	if (err) {
		free(*buf);
		*buf = NULL;
	}
	return err;
}

struct text_job {
	const struct hb_profile *p;
	enum hb_value which;
	int (*write_fn)(const struct hb_profile *, enum hb_value, FILE *);
};

static int write_text(FILE *f, void *arg)
{
	const struct text_job *j = arg;

	return j->write_fn(j->p, j->which, f);
}

/*
 * An uncompressed text format straight into its file: a profile of 100k
 * stacks is tens of MiB of text, which a buffer would hold twice over.
 */
static int stream_text(const struct hb_profile *p, const struct sink *s, char *err, size_t errlen)
{
	struct text_job j = {
		.p = p,
		.which = s->sample_type,
		.write_fn = s->format == FMT_HTML ? flamegraph_write : folded_write,
	};
	int rc = output_write_atomic(s->path, write_text, &j);

	if (rc)
		hb_fail(err, errlen, rc, "cannot write %s: %s", s->path, output_strerror(rc));
	return rc;
}

int sink_write(const struct hb_profile *p, const struct sink *s, char *err, size_t errlen)
{
	const char *where = s->kind == SINK_SPOOL ? "the Pyroscope spool" : s->path;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	if (s->kind == SINK_SPOOL && s->format != FMT_PPROF)
		return hb_fail(err, errlen, -EINVAL, "Pyroscope takes pprof profiles only");
	if (s->kind == SINK_FILE &&
	    (s->format == FMT_HTML || (s->format == FMT_FOLDED && !s->zstd)))
		return stream_text(p, s, err, errlen);
	rc = sink_encode(p, s, &buf, &len);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot encode the profile for %s: %s", where,
			       strerror(-rc));
	if (s->kind == SINK_SPOOL) {
		rc = pyroscope__spool(s->pyro, s->name, s->from_s, s->until_s, buf, len, err,
				      errlen);
	} else {
		rc = output_write_buffer(s->path, buf, len);
		if (rc)
			hb_fail(err, errlen, rc, "cannot write %s: %s", s->path,
				output_strerror(rc));
	}
	free(buf);
	return rc;
}
