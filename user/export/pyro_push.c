// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "push/v1/push.pb-c.h"
#include "export/pyro_push.h"

#define INGEST_SUFFIX "/ingest"

int pyro_push_url(const char *ingest_url, char *out, size_t len)
{
	size_t n = strlen(ingest_url), m = strlen(INGEST_SUFFIX);

	if (n < m || strcmp(ingest_url + n - m, INGEST_SUFFIX) != 0)
		return -EINVAL;
	if (snprintf(out, len, "%.*s" PYRO_PUSH_PATH, (int)(n - m), ingest_url) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- labels ---- */

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const struct pyro_label *)a)->key, ((const struct pyro_label *)b)->key);
}

/* "k=v,k=v" (cut in place) appended to out[*n]; -EINVAL for anything else. */
static int split_pairs(char *s, struct pyro_label *out, size_t max, size_t *n)
{
	while (*s) {
		char *comma = strchr(s, ','), *eq;

		if (comma)
			*comma = '\0';
		eq = strchr(s, '=');
		if (!eq || *n >= max)
			return -EINVAL;
		*eq = '\0';
		if (!pyro_labels_valid_key(s) || strcmp(s, "service_name") == 0 ||
		    !pyro_labels_valid_value(eq + 1))
			return -EINVAL;
		out[(*n)++] = (struct pyro_label){ s, eq + 1 };
		if (!comma)
			break;
		s = comma + 1;
	}
	return 0;
}

int pyro_push_labels(const char *name, struct pyro_label *out, size_t max, char *buf, size_t buflen)
{
	size_t n = 0, len = strlen(name);
	char *brace;

	if (len + 1 > buflen || max < PYRO_PUSH_EXTRA_LABELS)
		return -EINVAL;
	memcpy(buf, name, len + 1);
	brace = strchr(buf, '{');
	if (brace) {
		if (buf[len - 1] != '}')
			return -EINVAL;
		buf[len - 1] = '\0';
		*brace = '\0';
	}
	if (!pyro_labels_valid_service(buf))
		return -EINVAL;
	out[n++] = (struct pyro_label){ "__delta__", "false" };
	out[n++] = (struct pyro_label){ "__name__", PYRO_PUSH_PROFILE_NAME };
	out[n++] = (struct pyro_label){ "service_name", buf };
	if (brace && split_pairs(brace + 1, out, max, &n))
		return -EINVAL;
	if (n > PYRO_PUSH_MAX_LABELS)
		return -EINVAL;
	qsort(out, n, sizeof(*out), cmp_label);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(out[i].key, out[i - 1].key) == 0)
			return -EINVAL;
	}
	return (int)n;
}

/* ---- the request body ---- */

int pyro_push_encode(const struct pyro_label *labels, size_t n, const void *profile, size_t len,
		     const char *id, uint8_t **out, size_t *outlen)
{
	Types__V1__LabelPair *pairs = calloc(n ? n : 1, sizeof(*pairs));
	Types__V1__LabelPair **pp = calloc(n ? n : 1, sizeof(*pp));
	Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT, *sp = &sample;
	Push__V1__RawProfileSeries series = PUSH__V1__RAW_PROFILE_SERIES__INIT, *serp = &series;
	Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
	int rc = -ENOMEM;
	size_t size;

	*out = NULL;
	*outlen = 0;
	if (!pairs || !pp)
		goto out;
	for (size_t i = 0; i < n; i++) {
		types__v1__label_pair__init(&pairs[i]);
		pairs[i].name = (char *)labels[i].key;
		pairs[i].value = (char *)labels[i].value;
		pp[i] = &pairs[i];
	}
	sample.raw_profile.data = (uint8_t *)profile;
	sample.raw_profile.len = len;
	sample.id = (char *)id;
	series.n_labels = n;
	series.labels = pp;
	series.n_samples = 1;
	series.samples = &sp;
	req.n_series = 1;
	req.series = &serp;
	size = push__v1__push_request__get_packed_size(&req);
	*out = malloc(size ? size : 1);
	if (!*out)
		goto out;
	*outlen = push__v1__push_request__pack(&req, *out);
	rc = 0;
out:
	free(pairs);
	free(pp);
	return rc;
}

int pyro_push_request(const char *name, const void *profile, size_t len, const char *id,
		      uint8_t **out, size_t *outlen)
{
	struct pyro_label labels[PYRO_MAX_LABELS + PYRO_PUSH_EXTRA_LABELS];
	char *buf = malloc(strlen(name) + 1);
	int n, rc;

	*out = NULL;
	*outlen = 0;
	if (!buf)
		return -ENOMEM;
	n = pyro_push_labels(name, labels, sizeof(labels) / sizeof(labels[0]), buf,
			     strlen(name) + 1);
	rc = n < 0 ? n : pyro_push_encode(labels, (size_t)n, profile, len, id, out, outlen);
	free(buf);
	return rc;
}

void pyro_push_uuid(char out[37])
{
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		/* no entropy source: unique enough from the time and pid */
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)((uint64_t)ts.tv_nsec >> (i % 8 * 8) ^
					       (uint64_t)ts.tv_sec >> (i % 4 * 8) ^
					       (unsigned int)getpid() >> (i % 2 * 8));
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/* ---- answers ---- */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/*
 * The JSON string at p (*p == '"') into out (escapes kept simple: \x as x,
 * \uXXXX as '?'), when out is not NULL; the character after it, or NULL.
 */
static const char *json_string(const char *p, char *out, size_t len)
{
	size_t n = 0;

	for (p++; *p && *p != '"'; p++) {
		char c = *p;

		if (c == '\\') {
			if (!*++p)
				return NULL;
			c = *p;
			if (c == 'u') {
				for (int i = 0; i < 4; i++) {
					if (!p[1])
						return NULL;
					p++;
				}
				c = '?';
			}
		}
		if (out && n + 1 < len)
			out[n++] = c;
	}
	if (out && len)
		out[n] = '\0';
	return *p == '"' ? p + 1 : NULL;
}

/* Past one JSON value of any kind at p (at the ',' or '}' after it); NULL when it does not end. */
static const char *json_skip(const char *p)
{
	int depth = 0;

	while (p && *p) {
		if (*p == '"') {
			p = json_string(p, NULL, 0);
			continue;
		}
		if (!depth && (*p == ',' || *p == '}' || *p == ']'))
			return p;
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		p++;
	}
	return NULL;
}

int pyro_push_connect_error(const char *body, char *code, size_t codelen, char *msg, size_t msglen)
{
	const char *p = skip_ws(body);

	code[0] = '\0';
	msg[0] = '\0';
	if (*p != '{')
		return -EINVAL;
	p = skip_ws(p + 1);
	while (p && *p == '"') {
		char key[16];

		p = json_string(p, key, sizeof(key));
		p = p ? skip_ws(p) : NULL;
		if (!p || *p != ':')
			break;
		p = skip_ws(p + 1);
		if (*p == '"' && strcmp(key, "code") == 0) {
			p = json_string(p, code, codelen);
			if (!p) /* cut inside the code: not a code */
				code[0] = '\0';
		} else if (*p == '"' && strcmp(key, "message") == 0)
			p = json_string(p, msg, msglen);
		else
			p = json_skip(p);
		p = p ? skip_ws(p) : NULL;
		if (!p || *p != ',')
			break;
		p = skip_ws(p + 1);
	}
	/* the answer's start may be all there is of a long body: the code suffices */
	return code[0] ? 0 : -EINVAL;
}

static bool one_of(const char *code, const char *const *list)
{
	for (; *list; list++) {
		if (strcmp(code, *list) == 0)
			return true;
	}
	return false;
}

bool pyro_push_connect_code(const char *code)
{
	static const char *const codes[] = { "canceled",
					     "unknown",
					     "invalid_argument",
					     "deadline_exceeded",
					     "not_found",
					     "already_exists",
					     "permission_denied",
					     "resource_exhausted",
					     "failed_precondition",
					     "aborted",
					     "out_of_range",
					     "unimplemented",
					     "internal",
					     "unavailable",
					     "data_loss",
					     "unauthenticated",
					     NULL };

	return code && one_of(code, codes);
}

enum pyro_push_answer pyro_push_classify(long status, const char *code)
{
	static const char *const retry[] = {
		"unavailable", "resource_exhausted", "deadline_exceeded", "aborted", "canceled",
		"unknown",     "internal",	     "data_loss",	  NULL
	};
	static const char *const auth[] = { "unauthenticated", "permission_denied", NULL };

	if (status >= 200 && status < 300)
		return PUSH_SENT;
	/*
	 * Not served here: a plain 404, or Connect's unimplemented (HTTP 501 in
	 * today's protocol, 404 in its first version): fall back to /ingest.
	 */
	if (status == 404 || (code && strcmp(code, "unimplemented") == 0))
		return PUSH_NOT_SERVED;
	if (code && code[0]) {
		if (one_of(code, auth))
			return PUSH_AUTH;
		return one_of(code, retry) ? PUSH_RETRY : PUSH_REJECTED;
	}
	/* no Connect error body (a proxy, a load balancer): as /ingest's answers */
	if (status == 401 || status == 403)
		return PUSH_AUTH;
	if (status == 408 || status == 429 || status >= 500 || status < 200)
		return PUSH_RETRY;
	return PUSH_REJECTED;
}
