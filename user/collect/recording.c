// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include <zlib.h>
#include <zstd.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "util/files.h"
#include "heapbpf.h"
#include "util/output.h"
#include "collect/recording.h"

#define ALLOC_HDR offsetof(struct heapbpf_alloc_event, frames)
/* version 1's ALLOC header: the same without the coarse field */
#define COARSE_AT    offsetof(struct heapbpf_alloc_event, coarse)
#define ALLOC_HDR_V1 (ALLOC_HDR - sizeof(__u64))

/* ---- little-endian helpers (x86-64 and arm64 are little-endian; be explicit anyway) ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint32_t record_crc(uint32_t type, uint32_t len, const void *payload)
{
	uint8_t h[8];
	uLong c = crc32(0L, Z_NULL, 0);

	put32(h, type);
	put32(h + 4, len);
	c = crc32(c, h, sizeof(h));
	if (len)
		c = crc32(c, payload, len);
	return (uint32_t)c;
}

/* ---- writer ---- */

struct recorder {
	int fd;
	ZSTD_CCtx *cctx;
	uint8_t *out;
	size_t out_cap;
	uint8_t rec[8 + RECORDING_MAX_RECORD + 4];
	uint64_t last_flush_ms;
	uint64_t raw_bytes, file_bytes;
	int err;    /* sticky: the first error */
	bool ended; /* the zstd frame is closed */
};

static int write_all(struct recorder *r, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(r->fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
		r->file_bytes += n;
	}
	return 0;
}

/* Feeds in (may be empty) with mode, writing out what the compressor produces. */
static int zfeed(struct recorder *r, const void *in, size_t len, ZSTD_EndDirective mode)
{
	ZSTD_inBuffer ib = { in, len, 0 };
	size_t left;

	do {
		ZSTD_outBuffer ob = { r->out, r->out_cap, 0 };
		int err;

		left = ZSTD_compressStream2(r->cctx, &ob, &ib, mode);
		if (ZSTD_isError(left))
			return -EIO;
		err = write_all(r, r->out, ob.pos);
		if (err)
			return err;
	} while (mode == ZSTD_e_continue ? ib.pos < ib.size : left != 0);
	return 0;
}

static int start(struct recorder *r, struct recorder **out);

int recording__open(const char *path, struct recorder **out)
{
	struct recorder *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	/*
	 * a new file of ours, exactly --file-mode (0600), renamed over @path
	 * at once: a run killed midway leaves the prefix there to report;
	 * nothing planted at @path is followed, truncated or chmod'ed
	 */
	err = output_create_replacing(path, output_file_mode(), &r->fd);
	if (err) {
		free(r);
		return err;
	}
	return start(r, out);
}

int recording__open_fd(int fd, struct recorder **out)
{
	struct recorder *r = calloc(1, sizeof(*r));

	if (!r) {
		close(fd);
		return -ENOMEM;
	}
	r->fd = fd;
	return start(r, out);
}

/* The compressor and the header, for r->fd; r freed (its fd closed) on failure. */
static int start(struct recorder *r, struct recorder **out)
{
	uint8_t h[RECORDING_HEADER_LEN];
	int err;

	r->cctx = ZSTD_createCCtx();
	r->out_cap = ZSTD_CStreamOutSize();
	r->out = malloc(r->out_cap);
	if (!r->cctx || !r->out) {
		err = -ENOMEM;
		goto fail;
	}
	ZSTD_CCtx_setParameter(r->cctx, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(r->cctx, ZSTD_c_checksumFlag, 1);
	memcpy(h, RECORDING_MAGIC, 8);
	put32(h + 8, RECORDING_VERSION);
	put32(h + 12, 0);
	err = write_all(r, h, sizeof(h));
	if (err)
		goto fail;
	r->last_flush_ms = (uint64_t)(hb_clock_ns(CLOCK_MONOTONIC) / 1000000);
	*out = r;
	return 0;
fail:
	close(r->fd);
	ZSTD_freeCCtx(r->cctx);
	free(r->out);
	free(r);
	return err;
}

int recording__flush(struct recorder *r)
{
	if (!r->err)
		r->err = zfeed(r, NULL, 0, ZSTD_e_flush);
	r->last_flush_ms = (uint64_t)(hb_clock_ns(CLOCK_MONOTONIC) / 1000000);
	return r->err;
}

int recording__write(struct recorder *r, enum rec_type type, const void *payload, uint32_t len)
{
	if (r->err)
		return r->err;
	if (r->ended)
		return -EPIPE;
	if (len > RECORDING_MAX_RECORD)
		return -E2BIG;
	put32(r->rec, type);
	put32(r->rec + 4, len);
	if (len)
		memcpy(r->rec + 8, payload, len);
	put32(r->rec + 8 + len, record_crc(type, len, payload));
	r->raw_bytes += 12 + len;
	r->err = zfeed(r, r->rec, 12 + len, ZSTD_e_continue);
	if (!r->err && (uint64_t)(hb_clock_ns(CLOCK_MONOTONIC) / 1000000) - r->last_flush_ms >=
			       RECORDING_FLUSH_MS)
		recording__flush(r);
	return r->err;
}

int recording__meta(struct recorder *r, const char *key, const char *value)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s=%s", key, value ? value : "");

	if (n < 0 || (size_t)n >= sizeof(buf))
		return -E2BIG;
	return recording__write(r, REC_META, buf, n);
}

int recording__map(struct recorder *r, const struct rec_map *m)
{
	uint8_t buf[8 * 3 + 4 + 1 + 80 + 2 + 4096];
	size_t bl = strnlen(m->build_id, 80), pl = strnlen(m->path, 4095), n = 0;

	put64(buf, m->start);
	put64(buf + 8, m->end);
	put64(buf + 16, m->offset);
	memcpy(buf + 24, m->perms, 4);
	n = 28;
	buf[n++] = (uint8_t)bl;
	memcpy(buf + n, m->build_id, bl);
	n += bl;
	buf[n++] = (uint8_t)(pl & 0xff);
	buf[n++] = (uint8_t)(pl >> 8);
	memcpy(buf + n, m->path, pl);
	n += pl;
	return recording__write(r, REC_MAP, buf, n);
}

int recording__event(struct recorder *r, const void *data, size_t len)
{
	struct heapbpf_alloc_event a;
	__u32 type;

	if (len < sizeof(type))
		return -EINVAL;
	memcpy(&type, data, sizeof(type));
	if (type == HEAPBPF_EV_FREE && len >= sizeof(struct heapbpf_free_event))
		return recording__write(r, REC_FREE, data, sizeof(struct heapbpf_free_event));
	if (type != HEAPBPF_EV_ALLOC || len < ALLOC_HDR)
		return -EINVAL;
	memcpy(&a, data, ALLOC_HDR);
	if (a.nframes > HEAPBPF_MAX_FRAMES || len < ALLOC_HDR + a.nframes * sizeof(__u64))
		return -EINVAL;
	return recording__write(r, REC_ALLOC, data, ALLOC_HDR + a.nframes * sizeof(__u64));
}

int recording__stop(struct recorder *r, const struct rec_stop *s)
{
	uint8_t b[9 * 8 + 4];
	const uint64_t v[9] = { s->stop_mono_ns, s->attach_coarse_ns, s->duration_ns,
				s->alloc_hits,	 s->free_hits,	      s->alloc_drops,
				s->free_drops,	 s->read_faults,      0 };

	for (int i = 0; i < 9; i++)
		put64(b + 8 * i, v[i]);
	put32(b + 72, s->reason);
	return recording__write(r, REC_STOP, b, sizeof(b));
}

void recording__sizes(const struct recorder *r, uint64_t *raw, uint64_t *file)
{
	*raw = r->raw_bytes;
	*file = r->file_bytes;
}

int recording__end(struct recorder *r)
{
	if (r->ended || r->err)
		return r->err;
	r->err = zfeed(r, NULL, 0, ZSTD_e_end);
	if (!r->err && fsync(r->fd))
		r->err = -errno;
	r->ended = true;
	return r->err;
}

int recording__close(struct recorder *r)
{
	int err;

	if (!r)
		return 0;
	err = recording__end(r);
	if (close(r->fd) && !err)
		err = -errno;
	ZSTD_freeCCtx(r->cctx);
	free(r->out);
	free(r);
	return err;
}

/* ---- reader ---- */

struct rec_reader {
	FILE *f;
	ZSTD_DCtx *dctx;
	uint8_t *in;
	size_t in_cap;
	ZSTD_inBuffer ib;
	bool eof;
	bool follow; /* recording_reader__follow: its end is where the writer is, not the end */
	size_t frame_left; /* last ZSTD_decompressStream result: 0 = frame complete */
	uint8_t *buf;	   /* decompressed, not yet consumed */
	size_t buf_len, buf_cap, consumed;
	uint64_t offset; /* decompressed offset of buf[0] */
	uint32_t version;
};

int recording_reader__open(const char *path, struct rec_reader **out, char *err, size_t errlen)
{
	struct rec_reader *rd;
	uint8_t h[RECORDING_HEADER_LEN];
	uint32_t version;
	int fd;

	rd = calloc(1, sizeof(*rd));
	if (!rd)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	/* a pipe or a device named as the recording: refused, never waited on */
	fd = files_open_regular_ro(path);
	rd->f = fd < 0 ? NULL : fdopen(fd, "rb");
	if (!rd->f) {
		int e = fd < 0 ? fd : -errno;

		if (fd >= 0)
			close(fd);
		free(rd);
		return hb_fail(err, errlen, e, "cannot open %s: %s", path,
			       files_open_regular_strerror(e));
	}
	if (fread(h, 1, sizeof(h), rd->f) != sizeof(h) || memcmp(h, RECORDING_MAGIC, 8) != 0) {
		recording_reader__free(rd);
		return hb_fail(err, errlen, -EBADMSG, "%s is not a heapbpf recording", path);
	}
	version = get32(h + 8);
	if (version < RECORDING_VERSION_MIN || version > RECORDING_VERSION) {
		recording_reader__free(rd);
		return hb_fail(err, errlen, -EPROTONOSUPPORT,
			       "%s is a version %u recording; this heapbpf reads versions %d to %d",
			       path, version, RECORDING_VERSION_MIN, RECORDING_VERSION);
	}
	rd->version = version;
	rd->dctx = ZSTD_createDCtx();
	rd->in_cap = ZSTD_DStreamInSize();
	rd->in = malloc(rd->in_cap);
	/* one whole record plus one decompression step, at most */
	rd->buf_cap = 8 + RECORDING_MAX_RECORD + 4 + ZSTD_DStreamOutSize();
	rd->buf = malloc(rd->buf_cap);
	if (!rd->dctx || !rd->in || !rd->buf) {
		recording_reader__free(rd);
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	}
	rd->frame_left = 1;
	*out = rd;
	return 0;
}

void recording_reader__free(struct rec_reader *rd)
{
	if (!rd)
		return;
	if (rd->f)
		fclose(rd->f);
	ZSTD_freeDCtx(rd->dctx);
	free(rd->in);
	free(rd->buf);
	free(rd);
}

void recording_reader__follow(struct rec_reader *rd, bool on)
{
	rd->follow = on;
}

uint64_t recording_reader__file_offset(const struct rec_reader *rd)
{
	off_t off = ftello(rd->f);

	return off > 0 ? (uint64_t)off : 0;
}

/*
 * Decompresses more into buf; 1 when it produced bytes or may, 0 at end of
 * input, 2 at the end of what a writer it follows has written so far.
 */
static int fill(struct rec_reader *rd, char *err, size_t errlen)
{
	/* drop what the previous record used */
	if (rd->consumed) {
		memmove(rd->buf, rd->buf + rd->consumed, rd->buf_len - rd->consumed);
		rd->buf_len -= rd->consumed;
		rd->offset += rd->consumed;
		rd->consumed = 0;
	}
	for (;;) {
		ZSTD_outBuffer ob = { rd->buf + rd->buf_len, rd->buf_cap - rd->buf_len, 0 };
		size_t r;

		if (rd->ib.pos == rd->ib.size) {
			if (rd->eof)
				return 0;
			rd->ib.size = fread(rd->in, 1, rd->in_cap, rd->f);
			rd->ib.src = rd->in;
			rd->ib.pos = 0;
			if (rd->ib.size == 0) {
				if (ferror(rd->f))
					return hb_fail(err, errlen, -EIO, "read error");
				if (rd->follow) {
					/* the next fread reads again what was written since */
					clearerr(rd->f);
					return 2;
				}
				rd->eof = true;
				return 0;
			}
		}
		if (!ob.size)
			return 1;
		r = ZSTD_decompressStream(rd->dctx, &ob, &rd->ib);
		if (ZSTD_isError(r))
			return hb_fail(err, errlen, -EBADMSG,
				       "corrupt compressed data near byte %llu of the records: %s",
				       (unsigned long long)(rd->offset + rd->buf_len),
				       ZSTD_getErrorName(r));
		rd->frame_left = r;
		rd->buf_len += ob.pos;
		if (ob.pos)
			return 1;
	}
}

int recording_reader__next(struct rec_reader *rd, struct rec_record *rec, char *err, size_t errlen)
{
	for (;;) {
		size_t avail = rd->buf_len - rd->consumed;
		const uint8_t *p = rd->buf + rd->consumed;

		if (avail >= 8) {
			uint32_t type = get32(p), len = get32(p + 4);

			if (len > RECORDING_MAX_RECORD || type < REC_META || type > REC_STOP)
				return hb_fail(err, errlen, -EBADMSG,
					       "malformed record at byte %llu (type %u, length %u)",
					       (unsigned long long)(rd->offset + rd->consumed),
					       type, len);
			if (avail >= 12 + (size_t)len) {
				if (get32(p + 8 + len) != record_crc(type, len, p + 8))
					return hb_fail(
						err, errlen, -EBADMSG,
						"checksum mismatch in the record at byte %llu: "
						"the recording is corrupt",
						(unsigned long long)(rd->offset + rd->consumed));
				rec->type = type;
				rec->len = len;
				rec->payload = p + 8;
				rec->offset = rd->offset + rd->consumed;
				rec->version = rd->version;
				rd->consumed += 12 + len;
				return 1;
			}
		}
		int r = fill(rd, err, errlen);

		if (r < 0)
			return r;
		if (r == 2)
			return -EAGAIN;
		if (r == 0) {
			if (rd->buf_len - rd->consumed == 0 && rd->frame_left == 0)
				return 0;
			return hb_fail(err, errlen, -ENODATA,
				       "the recording is truncated after byte %llu of its records "
				       "(heapbpf was stopped before it finished writing)",
				       (unsigned long long)(rd->offset + rd->consumed));
		}
	}
}

int recording_decode_map(const struct rec_record *rec, struct rec_map *m)
{
	const uint8_t *p = rec->payload;
	size_t n = 28, bl, pl;

	if (rec->type != REC_MAP || rec->len < 28 + 1 + 2)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	m->start = get64(p);
	m->end = get64(p + 8);
	m->offset = get64(p + 16);
	memcpy(m->perms, p + 24, 4);
	bl = p[n++];
	if (bl > 80 || n + bl + 2 > rec->len)
		return -EBADMSG;
	memcpy(m->build_id, p + n, bl);
	n += bl;
	pl = p[n] | (size_t)p[n + 1] << 8;
	n += 2;
	if (pl > 4095 || n + pl != rec->len || m->end <= m->start)
		return -EBADMSG;
	memcpy(m->path, p + n, pl);
	/* text fields must be text */
	if (memchr(m->path, '\0', pl) || memchr(m->build_id, '\0', bl) || memchr(m->perms, '\0', 4))
		return -EBADMSG;
	return 0;
}

int recording_decode_stop(const struct rec_record *rec, struct rec_stop *s)
{
	const uint8_t *p = rec->payload;

	if (rec->type != REC_STOP || rec->len != 9 * 8 + 4)
		return -EBADMSG;
	s->stop_mono_ns = get64(p);
	s->attach_coarse_ns = get64(p + 8);
	s->duration_ns = get64(p + 16);
	s->alloc_hits = get64(p + 24);
	s->free_hits = get64(p + 32);
	s->alloc_drops = get64(p + 40);
	s->free_drops = get64(p + 48);
	s->read_faults = get64(p + 56);
	s->reason = get32(p + 72);
	return 0;
}

int recording_decode_meta(const struct rec_record *rec, const char **key, size_t *klen,
			  const char **val, size_t *vlen)
{
	const char *p = (const char *)rec->payload;
	const char *eq = rec->type == REC_META ? memchr(p, '=', rec->len) : NULL;

	if (!eq || eq == p || memchr(p, '\0', rec->len))
		return -EBADMSG;
	*key = p;
	*klen = eq - p;
	*val = eq + 1;
	*vlen = rec->len - *klen - 1;
	return 0;
}

int recording_decode_event(const struct rec_record *rec, void *event, size_t event_size)
{
	if (rec->type == REC_FREE) {
		struct heapbpf_free_event *f = event;

		if (rec->len != sizeof(*f) || event_size < sizeof(*f))
			return -EBADMSG;
		memcpy(f, rec->payload, sizeof(*f));
		return f->type == HEAPBPF_EV_FREE ? 0 : -EBADMSG;
	}
	if (rec->type == REC_ALLOC) {
		struct heapbpf_alloc_event *a = event;
		/* version 1: no coarse field, the rest of the header one field earlier */
		bool v1 = rec->version == 1;
		size_t hdr = v1 ? ALLOC_HDR_V1 : ALLOC_HDR;

		if (rec->len < hdr || event_size < sizeof(*a))
			return -EBADMSG;
		if (v1) {
			memcpy(a, rec->payload, COARSE_AT);
			a->coarse = 0;
			memcpy((uint8_t *)a + COARSE_AT + sizeof(a->coarse),
			       rec->payload + COARSE_AT, ALLOC_HDR_V1 - COARSE_AT);
		} else {
			memcpy(a, rec->payload, ALLOC_HDR);
		}
		if (a->type != HEAPBPF_EV_ALLOC || a->nframes > HEAPBPF_MAX_FRAMES ||
		    rec->len != hdr + a->nframes * sizeof(__u64))
			return -EBADMSG;
		memcpy(a->frames, rec->payload + hdr, a->nframes * sizeof(__u64));
		return 0;
	}
	return -EBADMSG;
}
