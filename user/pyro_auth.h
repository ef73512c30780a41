/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Pyroscope credentials. They come from the environment only, never from
 * the command line (where the process list would show them):
 *   HEAPBPF_PYROSCOPE_TENANT     X-Scope-OrgID (multi-tenant servers)
 *   HEAPBPF_PYROSCOPE_USER       basic auth (Grafana Cloud: the stack's user id)
 *   HEAPBPF_PYROSCOPE_PASSWORD   basic auth password (Grafana Cloud: a token)
 *   HEAPBPF_PYROSCOPE_TOKEN      bearer token (instead of basic auth)
 * each also as NAME_FILE=path (the value is the file's first line), e.g. a
 * systemd credential. No message ever contains one of them.
 */
#ifndef __HEAPBPF_PYRO_AUTH_H
#define __HEAPBPF_PYRO_AUTH_H

#include <stddef.h>

#include <curl/curl.h>

struct pyro_auth;

/*
 * Reads and checks the credentials for url (the /ingest URL): they must
 * fit together, and a password or token goes only over https or to the
 * loopback. On error a one-sentence message without secrets.
 */
int pyro_auth__new(const char *url, struct pyro_auth **out, char *err, size_t errlen);
/* Wipes the secrets from memory. */
void pyro_auth__free(struct pyro_auth *a);

/* Sets the credentials on the request c prepares; the tenant header goes to *hdrs. */
void pyro_auth__apply(const struct pyro_auth *a, CURL *c, struct curl_slist **hdrs);

/* Replaces every configured secret in msg (in place) by "***". */
void pyro_auth__redact(const struct pyro_auth *a, char *msg);

#endif /* __HEAPBPF_PYRO_AUTH_H */
