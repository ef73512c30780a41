/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pprof output: a gzip-compressed perftools.profiles.Profile following the
 * Go heap profile convention, so that `go tool pprof`, Grafana Pyroscope and
 * friends read it like a Go heap profile. The message is built and parsed
 * with the protobuf-c code generated from the profile.proto pprof ships.
 */
#ifndef __HEAPBPF_PPROF_H
#define __HEAPBPF_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "util/profile.h"
#include "profile.pb-c.h"

/*
 * What pprof_decode() may hold (gzip bomb guards): at most PPROF_DECODE_MAX
 * decompressed bytes, and these plus the unpacked message at most
 * PPROF_MEM_MAX (protobuf-c spends some 85 bytes on a 1-byte element).
 */
#define PPROF_MEM_MAX	 ((size_t)128 << 20)
#define PPROF_DECODE_MAX PPROF_MEM_MAX

/* The comment added to profiles whose values are raw sampled counts. */
#define PPROF_RAW_COMMENT "heapbpf: raw sampled counts (not unbiased)"

/*
 * Encodes @p as a gzip-compressed serialized Profile. On success returns 0
 * and sets *out (malloc'ed, the caller frees it) and *out_len. Returns
 * -EINVAL when @p refers to a location or mapping it does not have,
 * -ENOMEM on allocation failure; *out is untouched on failure.
 */
int pprof_encode(const struct hb_profile *p, uint8_t **out, size_t *out_len);

/*
 * Gunzips @gz (at most PPROF_DECODE_MAX bytes of output) and unpacks the
 * Profile (with the decompressed bytes, at most PPROF_MEM_MAX). On success
 * returns 0 and sets *out, which the caller frees with
 * perftools__profiles__profile__free_unpacked(*out, NULL). Returns -EBADMSG
 * for input that is not gzip or not a Profile, -EFBIG when the decompressed
 * output would be too large, -E2BIG when the unpacked message would be,
 * -ENOMEM on allocation failure.
 */
int pprof_decode(const uint8_t *gz, size_t len, Perftools__Profiles__Profile **out);

/* pprof_decode() with an explicit limit on the uncompressed size. */
int pprof_decode_max(const uint8_t *gz, size_t len, size_t max_len,
		     Perftools__Profiles__Profile **out);

/* pprof_decode_max() with an explicit budget for the decompressed bytes and the message. */
int pprof_decode_mem(const uint8_t *gz, size_t len, size_t max_len, size_t max_mem,
		     Perftools__Profiles__Profile **out);

#endif /* __HEAPBPF_PPROF_H */
