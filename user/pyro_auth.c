// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "pyro_auth.h"

#define MAX_SECRET 4096

struct pyro_auth {
	char *tenant, *user, *password, *token; /* NULL when not configured */
	char tenant_hdr[MAX_SECRET + 32];
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
	explicit_bzero(a->tenant_hdr, sizeof(a->tenant_hdr));
	free(a);
}

static bool loopback_host(const char *url)
{
	const char *h = strstr(url, "://");

	h = h ? h + 3 : url;
	return strncmp(h, "127.", 4) == 0 || strncmp(h, "localhost", 9) == 0 ||
	       strncmp(h, "[::1]", 5) == 0;
}

/* The combinations that cannot work, or would leak a secret. */
static int check(const struct pyro_auth *a, const char *url, char *err, size_t errlen)
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
	if ((a->password || a->token) && strncmp(url, "https://", 8) != 0 && !loopback_host(url))
		return hb_fail(err, errlen, -EINVAL,
			       "credentials would cross the network unencrypted: use an "
			       "https:// URL for --pyroscope");
	return 0;
}

int pyro_auth__new(const char *url, struct pyro_auth **out, char *err, size_t errlen)
{
	struct pyro_auth *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	rc = secret_from_env("HEAPBPF_PYROSCOPE_TENANT", &a->tenant, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_USER", &a->user, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_PASSWORD", &a->password, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_TOKEN", &a->token, err, errlen);
	rc = rc ?: check(a, url, err, errlen);
	if (rc) {
		pyro_auth__free(a);
		return rc;
	}
	if (a->tenant)
		snprintf(a->tenant_hdr, sizeof(a->tenant_hdr), "X-Scope-OrgID: %s", a->tenant);
	*out = a;
	return 0;
}

void pyro_auth__apply(const struct pyro_auth *a, CURL *c, struct curl_slist **hdrs)
{
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

void pyro_auth__redact(const struct pyro_auth *a, char *msg)
{
	const char *secrets[] = { a->password, a->token, a->user, a->tenant };

	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
		size_t n = secrets[i] ? strlen(secrets[i]) : 0;
		char *hit;

		/* a one- or two-character "secret" would redact half of every message */
		if (n < 3)
			continue;
		while ((hit = strstr(msg, secrets[i]))) {
			memcpy(hit, "***", 3);
			memmove(hit + 3, hit + n, strlen(hit + n) + 1);
		}
	}
}
