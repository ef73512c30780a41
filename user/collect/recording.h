/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf recordings: the raw event stream of a profiling session plus what a
 * later report needs (mappings with build-ids, jemalloc identity and sampling
 * rate, times, drop counters), so every report can be made offline.
 *
 * File layout (version 2), all integers little-endian:
 *
 *   "HBPFREC\n"  u32 version  u32 flags(0)          16 bytes, uncompressed
 *   zstd stream of records, flushed every RECORDING_FLUSH_MS so that a killed
 *   run leaves a readable prefix:
 *     u32 type  u32 len  payload[len]  u32 crc32(type, len, payload)
 *
 * Records: META (key=value lines), MAP (one mapping), ALLOC and FREE (the BPF
 * events, frames cut to nframes), STOP (end time, counters, why it ended).
 * A reader refuses records longer than RECORDING_MAX_RECORD, unknown versions,
 * bad checksums, and never allocates more than a record at a time.
 *
 * Version 1 is read too: its ALLOC records have no coarse field (the probe's
 * CLOCK_MONOTONIC_COARSE, after ts), which reads as 0 (not known).
 */
#ifndef __HEAPBPF_RECORDING_H
#define __HEAPBPF_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RECORDING_MAGIC	      "HBPFREC\n"
#define RECORDING_VERSION     2
#define RECORDING_VERSION_MIN 1	 /* the oldest this reader reads */
#define RECORDING_HEADER_LEN  16 /* magic, version, flags: before the zstd stream */
#define RECORDING_MAX_RECORD  65536
#define RECORDING_FLUSH_MS    1000

enum rec_type {
	REC_META = 1,
	REC_MAP = 2,
	REC_ALLOC = 3,
	REC_FREE = 4,
	REC_STOP = 5,
};

/* One recorded mapping (REC_MAP payload, decoded). */
struct rec_map {
	uint64_t start, end, offset;
	char perms[5];
	char build_id[81]; /* hex, "" when unknown */
	char path[4096];
};

/* REC_STOP payload, decoded. */
struct rec_stop {
	uint64_t stop_mono_ns;	   /* sampling switched off */
	uint64_t attach_coarse_ns; /* objects sampled before this are not ours */
	uint64_t duration_ns;
	uint64_t alloc_hits, free_hits, alloc_drops, free_drops, read_faults;
	uint32_t reason; /* enum stop_reason */
};

/* ---- writing ---- */

struct recorder;

/* Creates path anew (output_create_replacing) and writes the header; -errno or -OUTPUT_E*. */
int recording__open(const char *path, struct recorder **out);
/* The same into fd (taken: closed by recording__close, or at once on failure), as it is. */
int recording__open_fd(int fd, struct recorder **out);
/* Appends one record; flushes the compressor when RECORDING_FLUSH_MS has passed. */
int recording__write(struct recorder *r, enum rec_type type, const void *payload, uint32_t len);
int recording__meta(struct recorder *r, const char *key, const char *value);
int recording__map(struct recorder *r, const struct rec_map *m);
/* A ring-buffer event as it came (ALLOC frames cut to nframes). */
int recording__event(struct recorder *r, const void *data, size_t len);
int recording__stop(struct recorder *r, const struct rec_stop *s);
/* Makes everything written so far decodable on disk. */
int recording__flush(struct recorder *r);
/* Ends the stream and fsyncs (nothing can be written after); sizes are final then. */
int recording__end(struct recorder *r);
/* Ends the stream if not yet, fsyncs and closes; frees r even on error. */
int recording__close(struct recorder *r);
/* Bytes of events given / bytes written to the file so far (for the summary). */
void recording__sizes(const struct recorder *r, uint64_t *raw, uint64_t *file);

/* ---- reading ---- */

struct rec_reader;

struct rec_record {
	enum rec_type type;
	uint32_t len;
	const uint8_t *payload; /* valid until the next recording_reader__next */
	uint64_t offset;	/* of the record in the decompressed stream */
	uint32_t version;	/* the recording's; 0 reads as RECORDING_VERSION */
};

/*
 * Opens a recording; checks magic and version. err gets a one-sentence
 * reason on failure.
 */
int recording_reader__open(const char *path, struct rec_reader **out, char *err, size_t errlen);
/*
 * The next record: 1 when there is one, 0 at a clean end, -EBADMSG for a bad
 * checksum or malformed record, -ENODATA when the file ends mid-record
 * (truncated: everything before was valid). err says where and why.
 */
int recording_reader__next(struct rec_reader *rd, struct rec_record *rec, char *err, size_t errlen);
/*
 * A recording its writer is still writing (on): at the end of what is
 * there, recording_reader__next returns -EAGAIN and reads on from there when
 * called again. Off once the writer is done, its end is the end.
 */
void recording_reader__follow(struct rec_reader *rd, bool on);
/* Bytes of the file read so far: nothing before them is read again. */
uint64_t recording_reader__file_offset(const struct rec_reader *rd);
void recording_reader__free(struct rec_reader *rd);

/* Payload decoders; -EBADMSG when the payload is malformed. */
int recording_decode_map(const struct rec_record *rec, struct rec_map *m);
int recording_decode_stop(const struct rec_record *rec, struct rec_stop *s);
/* META: key and value views into the payload ("key=value"). */
int recording_decode_meta(const struct rec_record *rec, const char **key, size_t *klen,
			  const char **val, size_t *vlen);
/* ALLOC/FREE: validates sizes and copies into a full-size event buffer. */
int recording_decode_event(const struct rec_record *rec, void *event, size_t event_size);

#endif /* __HEAPBPF_RECORDING_H */
