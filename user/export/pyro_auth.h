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

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

struct pyro_auth;

/*
 * Reads and checks the credentials for url (the /ingest URL): they must
 * fit together, and a password or token goes only over https, or over http
 * to a host that is, or resolves only to, loopback addresses (see
 * pyro_auth_transport()). proxy (--pyroscope-proxy, or NULL) is used for
 * every request; without it the environment's proxy is used for requests
 * without a password or token only. On error a one-sentence message
 * without secrets.
 */
int pyro_auth__new(const char *url, const char *proxy, struct pyro_auth **out, char *err,
		   size_t errlen);
/* Wipes the secrets from memory. */
void pyro_auth__free(struct pyro_auth *a);

/*
 * Sets the credentials, the proxy and the pinned addresses on the request c
 * prepares; the tenant header goes to *hdrs.
 */
void pyro_auth__apply(const struct pyro_auth *a, CURL *c, struct curl_slist **hdrs);

/*
 * Replaces every configured secret of three characters or more in msg (in
 * place) by "***": the password, the token, the base64 of user:password
 * (the Authorization header's value), the user and the tenant, as they are
 * (a last guard for heapbpf's own messages; a server's reply is checked
 * with pyro_auth__holds() and withheld whole instead).
 */
void pyro_auth__redact(const struct pyro_auth *a, char *msg);

/*
 * Whether text (len bytes, any bytes) holds a configured secret of at
 * least shortest characters (those pyro_auth__redact() names) in any form
 * a server may echo it in: as it is, percent-encoded (either case of hex,
 * '+' for a space), JSON-, JavaScript- or HTML-escaped, any of these
 * nested, in upper or lower case. Both the text and each secret are
 * decoded (pyro_auth_unescape()) and lower-cased again and again, and each form
 * of a secret is looked for in each form of the text. A text that still
 * decodes further after PYRO_UNESCAPE_ROUNDS rounds, or one that memory is
 * too short to check, counts as holding one.
 */
bool pyro_auth__holds(const struct pyro_auth *a, const void *text, size_t len, size_t shortest);

/* The CURLOPT_RESOLVE entry pyro_auth__apply() pins a credential's requests to, or "". */
const char *pyro_auth__pin(const struct pyro_auth *a);

/* ---- pure helpers (unit-tested) ---- */

/*
 * Whether url may carry a credential, as libcurl's URL parser reads it:
 * 0 for https to any host; for http, 0 when its host is a loopback address
 * (127.0.0.0/8, ::1) or a name whose every address (getaddrinfo) is one;
 * then pin (len bytes) gets the CURLOPT_RESOLVE entry "name:port:addr,..."
 * that keeps libcurl on those addresses ("" for an address). -EINVAL with a
 * sentence for anything else: another address, a name that does not
 * resolve, userinfo, another scheme.
 */
int pyro_auth_transport(const char *url, char *pin, size_t len, char *err, size_t errlen);

/* --pyroscope-proxy: an http, https or socks URL without credentials; -EINVAL otherwise. */
int pyro_auth_proxy_check(const char *proxy, char *err, size_t errlen);

#define PYRO_UNESCAPE_ROUNDS 8

/*
 * One round of decoding of in (len bytes) into out (len bytes at least):
 * %XX in either case, '+' as a space, the JSON escapes (\" \\ \/ \b \f \n
 * \r \t, \uXXXX with surrogate pairs, as UTF-8), JavaScript's and Python's
 * \' and \xXX, and HTML's &#N; &#xX; &quot; &amp; &apos; &lt; &gt;.
 * Anything else is copied. Returns the length of out, never more than len.
 */
size_t pyro_auth_unescape(const char *in, size_t len, char *out);

#endif /* __HEAPBPF_PYRO_AUTH_H */
