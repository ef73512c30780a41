// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "export/pyro_auth.h"

#define MAX_SECRET 4096

struct pyro_auth {
	char *tenant, *user, *password, *token; /* NULL when not configured */
	char *basic;				/* base64 of user:password */
	char tenant_hdr[MAX_SECRET + 32];
	const char *proxy;	    /* --pyroscope-proxy, or NULL */
	char pin[512];		    /* CURLOPT_RESOLVE entry for a credential over http */
	struct curl_slist *resolve; /* pin as libcurl takes it, or NULL */
};

static bool clean_secret(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		/* a CR or LF would end the header and start another one */
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	}
	return true;
}

/* The first line of path (named by fvar) into buf (MAX_SECRET + 2 bytes). */
static int secret_from_file(const char *path, const char *fvar, char *buf, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		hb_fail(err, errlen, -EINVAL, "cannot read %s (%s): %s", path, fvar,
			fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	n = read(fd, buf, MAX_SECRET + 1);
	if (n < 0) {
		rc = -errno;
		close(fd);
		return hb_fail(err, errlen, -EIO, "cannot read %s (%s): %s", path, fvar,
			       strerror(-rc));
	}
	close(fd);
	buf[n] = '\0';
	/* one line: a trailing newline (or CRLF) is not part of the secret */
	if (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (n && buf[n - 1] == '\r')
		buf[--n] = '\0';
	if ((size_t)n != strlen(buf) || n > MAX_SECRET || !clean_secret(buf))
		return hb_fail(err, errlen, -EINVAL,
			       "%s (%s) must hold one line of at most %d characters", path, fvar,
			       MAX_SECRET);
	return 0;
}

/* Reads $var, or the first line of the file named by $var_FILE; NULL when neither is set. */
static int secret_from_env(const char *var, char **out, char *err, size_t errlen)
{
	char fvar[128], buf[MAX_SECRET + 2];
	const char *v = getenv(var), *path;
	int rc;

	snprintf(fvar, sizeof(fvar), "%s_FILE", var);
	path = getenv(fvar);
	*out = NULL;
	if (v && path)
		return hb_fail(err, errlen, -EINVAL, "set %s or %s, not both", var, fvar);
	if (v) {
		if (!clean_secret(v) || strlen(v) > MAX_SECRET)
			return hb_fail(err, errlen, -EINVAL,
				       "%s is empty, too long or holds control characters", var);
		*out = strdup(v);
		return *out ? 0 : -ENOMEM;
	}
	if (!path)
		return 0;
	rc = secret_from_file(path, fvar, buf, err, errlen);
	if (!rc) {
		*out = strdup(buf);
		rc = *out ? 0 : -ENOMEM;
	}
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void pyro_auth__free(struct pyro_auth *a)
{
	if (!a)
		return;
	free_secret(a->tenant);
	free_secret(a->user);
	free_secret(a->password);
	free_secret(a->token);
	free_secret(a->basic);
	curl_slist_free_all(a->resolve);
	explicit_bzero(a->tenant_hdr, sizeof(a->tenant_hdr));
	free(a);
}

static bool loopback_addr(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24 == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

/* A host name libcurl looks up as written, so that a CURLOPT_RESOLVE entry for it applies. */
static bool plain_name(const char *h)
{
	for (; *h; h++) {
		if (!isalnum((unsigned char)*h) && *h != '-' && *h != '.' && *h != '_')
			return false;
	}
	return true;
}

/*
 * The addresses host resolves to, each a loopback one, appended to the
 * CURLOPT_RESOLVE entry in pin ("host:port:a,b,..."); -EINVAL with a
 * sentence when one is not, or host does not resolve.
 */
static int loopback_only(const char *host, const char *port, char *pin, size_t len, char *err,
			 size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	char addr[INET6_ADDRSTRLEN], name[256];
	size_t n;
	int rc;

	/* getaddrinfo() takes an IPv6 literal without its brackets */
	n = strlen(host);
	if (host[0] == '[' && n > 2 && host[n - 1] == ']')
		snprintf(name, sizeof(name), "%.*s", (int)(n - 2), host + 1);
	else if (snprintf(name, sizeof(name), "%s", host) >= (int)sizeof(name))
		return hb_fail(err, errlen, -EINVAL, "the --pyroscope host name is too long");
	hints.ai_flags = AI_NUMERICHOST;
	rc = getaddrinfo(name, NULL, &hints, &res);
	if (rc == 0) {
		/* an address: libcurl connects to it without a lookup */
		pin[0] = '\0';
	} else {
		if (!plain_name(name))
			return hb_fail(err, errlen, -EINVAL,
				       "credentials go over plain http only to a loopback address, "
				       "and the --pyroscope host %s is not a plain host name: use "
				       "an https:// URL",
				       name);
		hints.ai_flags = 0;
		rc = getaddrinfo(name, NULL, &hints, &res);
		if (rc)
			return hb_fail(err, errlen, -EINVAL,
				       "credentials go over plain http only to a loopback address, "
				       "and the --pyroscope host %s does not resolve (%s): use an "
				       "https:// URL",
				       name, gai_strerror(rc));
		snprintf(pin, len, "%s:%s:", name, port);
	}
	for (ai = res; ai; ai = ai->ai_next) {
		const void *in =
			ai->ai_family == AF_INET
				? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
				: (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		bool v6 = ai->ai_family == AF_INET6;

		if (!inet_ntop(ai->ai_family, in, addr, sizeof(addr)))
			snprintf(addr, sizeof(addr), "an address of family %d", ai->ai_family);
		if (!loopback_addr(ai->ai_addr))
			goto refuse;
		/* a name's entry lists every address: libcurl tries them in turn, as a lookup's */
		n = strlen(pin);
		if (n && snprintf(pin + n, len - n, "%s%s%s%s", pin[n - 1] == ':' ? "" : ",",
				  v6 ? "[" : "", addr, v6 ? "]" : "") >= (int)(len - n)) {
			freeaddrinfo(res);
			return hb_fail(err, errlen, -EINVAL,
				       "the --pyroscope host %s has too many addresses", name);
		}
	}
	freeaddrinfo(res);
	return 0;
refuse:
	freeaddrinfo(res);
	if (strcmp(name, addr) == 0)
		return hb_fail(err, errlen, -EINVAL,
			       "credentials would cross the network unencrypted: %s is not a "
			       "loopback address; use an https:// URL for --pyroscope",
			       name);
	return hb_fail(err, errlen, -EINVAL,
		       "credentials would cross the network unencrypted: %s resolves to %s, not a "
		       "loopback address; use an https:// URL for --pyroscope",
		       name, addr);
}

int pyro_auth_transport(const char *url, char *pin, size_t len, char *err, size_t errlen)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL;
	CURLU *u = curl_url();
	int rc = 0;

	pin[0] = '\0';
	if (!u)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	/* libcurl's own reading of the URL: the host it would connect to */
	if (curl_url_set(u, CURLUPART_URL, url, 0) ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
		rc = hb_fail(err, errlen, -EINVAL,
			     "--pyroscope needs a URL with a host, like "
			     "https://pyroscope.example:4040");
		goto out;
	}
	if (curl_url_get(u, CURLUPART_USER, &user, 0) != CURLUE_NO_USER) {
		rc = hb_fail(err, errlen, -EINVAL,
			     "--pyroscope must not carry credentials in the URL");
		goto out;
	}
	if (strcmp(scheme, "https") == 0) /* libcurl lowercases it */
		goto out;
	if (strcmp(scheme, "http") != 0) {
		rc = hb_fail(err, errlen, -EINVAL, "--pyroscope needs an http:// or https:// URL");
		goto out;
	}
	rc = loopback_only(host, port, pin, len, err, errlen);
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(user);
	curl_url_cleanup(u);
	return rc;
}

static bool proxy_scheme(const char *scheme)
{
	static const char *const known[] = { "http",   "https",	  "socks4", "socks4a",
					     "socks5", "socks5h", NULL };

	for (const char *const *k = known; *k; k++) {
		if (strcmp(scheme, *k) == 0)
			return true;
	}
	return false;
}

int pyro_auth_proxy_check(const char *proxy, char *err, size_t errlen)
{
	char *scheme = NULL, *user = NULL;
	CURLU *u = curl_url();
	int rc = 0;

	if (!u)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	if (curl_url_set(u, CURLUPART_URL, proxy, CURLU_NON_SUPPORT_SCHEME) ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) || !proxy_scheme(scheme))
		rc = hb_fail(err, errlen, -EINVAL,
			     "--pyroscope-proxy needs a URL like http://proxy.example:3128 "
			     "(http, https, socks4, socks4a, socks5 or socks5h)");
	else if (curl_url_get(u, CURLUPART_USER, &user, 0) != CURLUE_NO_USER)
		rc = hb_fail(err, errlen, -EINVAL,
			     "--pyroscope-proxy must not carry credentials in the URL (they would "
			     "show in the process list)");
	curl_free(scheme);
	curl_free(user);
	curl_url_cleanup(u);
	return rc;
}

/* The combinations that cannot work, or would leak a secret. */
static int check(struct pyro_auth *a, const char *url, const char *proxy, char *err, size_t errlen)
{
	if (!a->user != !a->password)
		return hb_fail(err, errlen, -EINVAL,
			       "basic auth needs both HEAPBPF_PYROSCOPE_USER and "
			       "HEAPBPF_PYROSCOPE_PASSWORD (or their _FILE forms)");
	if (a->user && strchr(a->user, ':'))
		return hb_fail(err, errlen, -EINVAL, "HEAPBPF_PYROSCOPE_USER must not contain ':'");
	if (a->user && a->token)
		return hb_fail(err, errlen, -EINVAL,
			       "set basic auth (HEAPBPF_PYROSCOPE_USER/PASSWORD) or a "
			       "bearer token (HEAPBPF_PYROSCOPE_TOKEN), not both");
	if (!a->password && !a->token)
		return 0;
	if (proxy && strncasecmp(url, "https://", 8) != 0)
		return hb_fail(err, errlen, -EINVAL,
			       "--pyroscope-proxy would see the credentials over plain http: use "
			       "an https:// URL for --pyroscope");
	return pyro_auth_transport(url, a->pin, sizeof(a->pin), err, errlen);
}

/* base64 of in into out (4 * ((len + 2) / 3) + 1 bytes). */
static void base64(const char *in, size_t len, char *out)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = (const unsigned char *)in;

	for (size_t i = 0; i < len; i += 3, out += 4) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0) |
			     (i + 2 < len ? s[i + 2] : 0);

		out[0] = b64[v >> 18 & 63];
		out[1] = b64[v >> 12 & 63];
		out[2] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		out[3] = i + 2 < len ? b64[v & 63] : '=';
	}
	*out = '\0';
}

/* user:password as basic auth sends it, which an echoing server may repeat. */
static int basic_value(struct pyro_auth *a)
{
	size_t ul = strlen(a->user), pl = strlen(a->password);
	char *pair = malloc(ul + pl + 2);

	a->basic = malloc(4 * ((ul + pl + 1 + 2) / 3) + 1);
	if (!pair || !a->basic) {
		free(pair);
		return -ENOMEM;
	}
	memcpy(pair, a->user, ul);
	pair[ul] = ':';
	memcpy(pair + ul + 1, a->password, pl);
	base64(pair, ul + pl + 1, a->basic);
	explicit_bzero(pair, ul + pl + 1);
	free(pair);
	return 0;
}

int pyro_auth__new(const char *url, const char *proxy, struct pyro_auth **out, char *err,
		   size_t errlen)
{
	struct pyro_auth *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	a->proxy = proxy;
	rc = secret_from_env("HEAPBPF_PYROSCOPE_TENANT", &a->tenant, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_USER", &a->user, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_PASSWORD", &a->password, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_TOKEN", &a->token, err, errlen);
	rc = rc ?: check(a, url, proxy, err, errlen);
	if (!rc && a->user && basic_value(a))
		rc = hb_fail(err, errlen, -ENOMEM, "out of memory");
	if (!rc && a->pin[0] && !(a->resolve = curl_slist_append(NULL, a->pin)))
		rc = hb_fail(err, errlen, -ENOMEM, "out of memory");
	if (rc) {
		pyro_auth__free(a);
		return rc;
	}
	if (a->tenant)
		snprintf(a->tenant_hdr, sizeof(a->tenant_hdr), "X-Scope-OrgID: %s", a->tenant);
	*out = a;
	return 0;
}

const char *pyro_auth__pin(const struct pyro_auth *a)
{
	return a->pin;
}

void pyro_auth__apply(const struct pyro_auth *a, CURL *c, struct curl_slist **hdrs)
{
	bool secret = a->password || a->token;

	if (a->proxy) {
		/* named by the operator: used for every request, whatever the environment says */
		curl_easy_setopt(c, CURLOPT_PROXY, a->proxy);
		curl_easy_setopt(c, CURLOPT_NOPROXY, "");
	} else if (secret) {
		/* no http_proxy, https_proxy or all_proxy from the environment sees a credential */
		curl_easy_setopt(c, CURLOPT_PROXY, "");
		curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	}
	/* the loopback addresses checked at the start: a second lookup cannot differ */
	if (secret && a->resolve)
		curl_easy_setopt(c, CURLOPT_RESOLVE, a->resolve);
	if (a->tenant)
		*hdrs = curl_slist_append(*hdrs, a->tenant_hdr);
	if (a->user) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, a->user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, a->password);
	} else if (a->token) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, a->token);
	}
}

static int longest_first(const void *x, const void *y)
{
	size_t a = *(const char *const *)x ? strlen(*(const char *const *)x) : 0;
	size_t b = *(const char *const *)y ? strlen(*(const char *const *)y) : 0;

	return a < b ? 1 : a > b ? -1 : 0;
}

void pyro_auth__redact(const struct pyro_auth *a, char *msg)
{
	/* the Authorization header's value holds the token or the base64 of user:password */
	const char *secrets[] = { a->basic, a->password, a->token, a->user, a->tenant };

	/* the longest first: a shorter one redacted inside it would leave the rest of it */
	qsort(secrets, sizeof(secrets) / sizeof(secrets[0]), sizeof(secrets[0]), longest_first);
	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
		size_t n = secrets[i] ? strlen(secrets[i]) : 0;
		char *at = msg, *hit;

		/* a one- or two-character "secret" would redact half of every message */
		if (n < 3)
			continue;
		/* past each replacement: a secret of "***" would otherwise be found forever */
		while ((hit = strstr(at, secrets[i]))) {
			memcpy(hit, "***", 3);
			memmove(hit + 3, hit + n, strlen(hit + n) + 1);
			at = hit + 3;
		}
	}
}

/* ---- what a server's reply may hold ---- */

static int hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The value of the n hex digits at s (avail bytes there), or -1. */
static long hex_at(const unsigned char *s, size_t avail, size_t n)
{
	long v = 0;

	if (avail < n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int d = hex_digit(s[i]);

		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* cp as UTF-8 into out (4 bytes); its length. */
static size_t utf8(unsigned long cp, unsigned char *out)
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | cp >> 12);
		out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | cp >> 18);
	out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * A JSON, JavaScript or Python escape at s[0] == '\\': its length in s,
 * 0 when it is none; its bytes into out (never more than its length).
 */
static size_t backslash(const unsigned char *s, size_t avail, unsigned char *out, size_t *outlen)
{
	static const char from[] = "\"\\/'bfnrt", to[] = "\"\\/'\b\f\n\r\t";
	const char *at = avail > 1 && s[1] ? strchr(from, s[1]) : NULL;
	long cp, lo;

	*outlen = 1;
	if (at) {
		out[0] = (unsigned char)to[at - from];
		return 2;
	}
	if (avail > 1 && s[1] == 'x' && (cp = hex_at(s + 2, avail - 2, 2)) >= 0) {
		out[0] = (unsigned char)cp;
		return 4;
	}
	if (avail < 2 || s[1] != 'u' || (cp = hex_at(s + 2, avail - 2, 4)) < 0)
		return 0;
	/* a UTF-16 surrogate pair is one character; a lone surrogate goes as it is */
	if (cp >= 0xd800 && cp < 0xdc00 && avail >= 12 && s[6] == '\\' && s[7] == 'u' &&
	    (lo = hex_at(s + 8, avail - 8, 4)) >= 0xdc00 && lo < 0xe000) {
		*outlen = utf8(0x10000 + ((unsigned long)(cp - 0xd800) << 10) +
				       (unsigned long)(lo - 0xdc00),
			       out);
		return 12;
	}
	*outlen = utf8((unsigned long)cp, out);
	return 6;
}

/* An HTML character reference at s[0] == '&': as backslash(). */
static size_t entity(const unsigned char *s, size_t avail, unsigned char *out, size_t *outlen)
{
	static const struct {
		const char *name;
		char c;
	} named[] = { { "&quot;", '"' },
		      { "&amp;", '&' },
		      { "&apos;", '\'' },
		      { "&lt;", '<' },
		      { "&gt;", '>' } };
	unsigned long cp = 0;
	size_t i = 2, digits = 0;
	bool hex;

	*outlen = 1;
	for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
		size_t n = strlen(named[k].name);

		if (avail >= n && memcmp(s, named[k].name, n) == 0) {
			out[0] = (unsigned char)named[k].c;
			return n;
		}
	}
	if (avail < 4 || s[1] != '#')
		return 0;
	hex = s[2] == 'x' || s[2] == 'X';
	for (i += hex; i < avail && digits < 8; i++, digits++) {
		int d = hex ? hex_digit(s[i]) : s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1;

		if (d < 0)
			break;
		cp = cp * (hex ? 16 : 10) + (unsigned long)d;
	}
	/* its UTF-8 is never longer than the reference: "&#9;" is 4 bytes, U+10FFFF 4 */
	if (!digits || i >= avail || s[i] != ';' || cp > 0x10ffff)
		return 0;
	*outlen = utf8(cp, out);
	return i + 1;
}

/* One round of pyro_auth_unescape(); *changed when anything was decoded. out may be in. */
static size_t unescape(const char *in, size_t len, char *out, bool *changed)
{
	const unsigned char *s = (const unsigned char *)in;
	unsigned char *o = (unsigned char *)out;
	size_t i = 0, n = 0;

	/* each escape is read whole before its bytes are written, at or behind it */
	*changed = false;
	while (i < len) {
		size_t used = 0, olen = 1;
		long v;

		if (s[i] == '%' && (v = hex_at(s + i + 1, len - i - 1, 2)) >= 0) {
			o[n] = (unsigned char)v;
			used = 3;
		} else if (s[i] == '+') {
			o[n] = ' ';
			used = 1;
		} else if (s[i] == '\\') {
			used = backslash(s + i, len - i, o + n, &olen);
		} else if (s[i] == '&') {
			used = entity(s + i, len - i, o + n, &olen);
		}
		if (used)
			*changed = true;
		else
			o[n] = s[i];
		i += used ? used : 1;
		n += used ? olen : 1;
	}
	return n;
}

size_t pyro_auth_unescape(const char *in, size_t len, char *out)
{
	bool changed;

	return unescape(in, len, out, &changed);
}

static void lower(char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		s[i] = (char)tolower((unsigned char)s[i]);
}

/*
 * Whether a form of secret (each round of decoding, lower-cased) of at
 * least shortest bytes is in text; form has room for the secret.
 */
static bool secret_in(const char *secret, const char *text, size_t len, size_t shortest, char *form)
{
	size_t n = strlen(secret);
	bool changed = true;

	memcpy(form, secret, n);
	lower(form, n);
	for (int round = 0; changed && round <= PYRO_UNESCAPE_ROUNDS; round++) {
		if (n >= shortest && memmem(text, len, form, n))
			return true;
		n = unescape(form, n, form, &changed);
		lower(form, n);
	}
	return false;
}

/*
 * Masking each encoding of each secret would have to list them all (which
 * characters an encoder escapes is its choice, and they nest): the text is
 * decoded instead, as far as it goes, and so is each secret, so that an
 * escape the secret holds itself ("%41" in a password) is decoded alike on
 * both sides. What this cannot tell, it counts as holding one.
 */
bool pyro_auth__holds(const struct pyro_auth *a, const void *text, size_t len, size_t shortest)
{
	const char *secrets[] = { a->basic, a->password, a->token, a->user, a->tenant };
	size_t longest = 0, n = len;
	char *cur = malloc(len + 1), *form;
	bool found = false, changed = true;
	int round;

	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
		if (secrets[i] && strlen(secrets[i]) > longest)
			longest = strlen(secrets[i]);
	}
	form = malloc(longest + 1);
	if (!cur || !form) {
		free(cur);
		free(form);
		return true;
	}
	memcpy(cur, text, len);
	lower(cur, n);
	for (round = 0; !found && changed && round <= PYRO_UNESCAPE_ROUNDS; round++) {
		for (size_t i = 0; !found && i < sizeof(secrets) / sizeof(secrets[0]); i++)
			found = secrets[i] && secret_in(secrets[i], cur, n, shortest, form);
		n = unescape(cur, n, cur, &changed);
		lower(cur, n);
	}
	/* still decoding after the last round: nested deeper than is checked */
	if (changed && round > PYRO_UNESCAPE_ROUNDS)
		found = true;
	explicit_bzero(cur, len);
	explicit_bzero(form, longest);
	free(cur);
	free(form);
	return found;
}
