/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Grafana Pyroscope's push API: /push.v1.PusherService/Push, a Connect
 * unary call (POST, Content-Type application/proto, Connect-Protocol-Version
 * 1) whose body is a push.v1.PushRequest (proto/push/v1/push.proto): one
 * series with the profile's labels and one sample, the gzip-compressed pprof
 * as raw_profile and a random UUID as its ID.
 *
 * The labels come from the spooled name= (pyro_labels.h), so a spooled
 * profile goes through either API: service{k=v,...} becomes service_name
 * and the k=v labels, plus __name__=memory and __delta__=false (the
 * allocations are already the window's deltas: without it Pyroscope would
 * difference them again and drop the first window), sorted by name.
 *
 * Answers: 2xx delivered; a Connect error is a JSON body {code, message}
 * with an HTTP status of its code. Retried: unavailable, resource_exhausted,
 * deadline_exceeded, aborted, canceled, unknown, internal, data_loss (and,
 * without a Connect body, 408, 429 and 5xx as /ingest); unauthenticated and
 * permission_denied (401/403) are credentials; 404, or Connect's
 * unimplemented (501), means the server does not serve push (pyroscope.c
 * then falls back to /ingest); anything else, such
 * as invalid_argument, refuses this profile for good.
 */
#ifndef __HEAPBPF_PYRO_PUSH_H
#define __HEAPBPF_PYRO_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export/pyro_labels.h"

#define PYRO_PUSH_PATH	       "/push.v1.PusherService/Push"
#define PYRO_PUSH_CTYPE	       "application/proto"
#define PYRO_PUSH_MAX_LABELS   30 /* Pyroscope's default max_label_names_per_series */
#define PYRO_PUSH_EXTRA_LABELS 3  /* __delta__, __name__, service_name */

/* Pyroscope's memory profiles: their alloc_* values are deltas unless told otherwise. */
#define PYRO_PUSH_PROFILE_NAME "memory"

/*
 * The push URL for the /ingest URL pyroscope_ingest_url() made: its "/ingest"
 * replaced by PYRO_PUSH_PATH. -ENAMETOOLONG, or -EINVAL when url does not
 * end in /ingest.
 */
int pyro_push_url(const char *ingest_url, char *out, size_t len);

/*
 * The push labels of a name= ("service{k=v,...}", as pyro_labels_build_name()
 * writes it): __delta__=false, __name__=memory, service_name=service and
 * each k=v, sorted by name. Values point into buf (a copy of name, at
 * least strlen(name) + 1 bytes). Returns the count, or -EINVAL for a name
 * that is not of that form, has an invalid or repeated label name, or
 * would carry more than PYRO_PUSH_MAX_LABELS labels.
 */
int pyro_push_labels(const char *name, struct pyro_label *out, size_t max, char *buf,
		     size_t buflen);

/*
 * The serialized PushRequest of one series with these labels (in this
 * order) and one sample: profile as raw_profile, id as its ID. *out is
 * malloc'ed. 0 or -ENOMEM.
 */
int pyro_push_encode(const struct pyro_label *labels, size_t n, const void *profile, size_t len,
		     const char *id, uint8_t **out, size_t *outlen);

/* PushRequest for a spooled profile: pyro_push_labels() of name, then pyro_push_encode(). */
int pyro_push_request(const char *name, const void *profile, size_t len, const char *id,
		      uint8_t **out, size_t *outlen);

/* A random (version 4) UUID, 36 characters and a NUL, for RawSample.ID. */
void pyro_push_uuid(char out[37]);

/*
 * The code and message of a Connect error body ({"code": "...", "message":
 * "...", ...}); 0, or -EINVAL when body is not such an object (a proxy's
 * page, for instance). code and msg are always NUL-terminated.
 */
int pyro_push_connect_error(const char *body, char *code, size_t codelen, char *msg, size_t msglen);

/* Whether code is one of Connect's error codes ("unauthenticated", ...): a word to show. */
bool pyro_push_connect_code(const char *code);

enum pyro_push_answer {
	PUSH_SENT,
	PUSH_RETRY,	 /* worth sending again, after a backoff */
	PUSH_AUTH,	 /* credentials refused */
	PUSH_REJECTED,	 /* this profile will never be accepted */
	PUSH_NOT_SERVED, /* 404: the server has no push API */
};

/*
 * What an answer to a push means: HTTP status (0: no answer at all) and
 * the Connect code of its body, or "" when it had none.
 */
enum pyro_push_answer pyro_push_classify(long status, const char *code);

#endif /* __HEAPBPF_PYRO_PUSH_H */
