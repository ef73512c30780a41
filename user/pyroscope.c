// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli.h"
#include "output.h"
#include "pyroscope.h"
#include "snapshot.h"

#define SPOOL_MAGIC	  "HBSPOOL1\n"
#define MAX_SECRET	  4096
#define BACKOFF_FIRST_MS  1000
#define BACKOFF_MAX_MS	  8000
#define RETRY_AFTER_MAX_S 30
#define BODY_SNIPPET	  200

struct pyro {
	struct pyro_opts o;
	char url[2048]; /* .../ingest */
	bool loopback;
	char *tenant, *user, *password, *token; /* NULL when not configured */
	char tenant_hdr[MAX_SECRET + 32];
	CURL *curl;
};

/* ---- pure helpers ---- */

bool pyro_valid_label_key(const char *k)
{
	if (!k || !(isalpha((unsigned char)k[0]) || k[0] == '_') || strncmp(k, "__", 2) == 0)
		return false;
	for (; *k; k++) {
		if (!isalnum((unsigned char)*k) && *k != '_')
			return false;
	}
	return true;
}

static bool service_char(unsigned char c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

bool pyro_valid_service(const char *s)
{
	if (!s || !*s || strlen(s) > 256)
		return false;
	for (; *s; s++) {
		if (!service_char((unsigned char)*s))
			return false;
	}
	return true;
}

static bool value_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != ',' && c != '{' && c != '}' && c != '=' && c != '"';
}

bool pyro_valid_label_value(const char *v)
{
	if (!v || !*v || strlen(v) > 1024)
		return false;
	for (; *v; v++) {
		if (!value_char((unsigned char)*v))
			return false;
	}
	return true;
}

void pyro_sanitize(const char *in, bool service, char *out, size_t len)
{
	size_t i = 0;

	for (; in && *in && i + 1 < len; in++) {
		unsigned char c = (unsigned char)*in;

		out[i++] = (service ? service_char(c) : value_char(c)) ? (char)c : '_';
	}
	if (!i && len > 1)
		out[i++] = '_';
	out[i] = '\0';
}

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const struct pyro_label *)a)->key, ((const struct pyro_label *)b)->key);
}

int pyro_build_name(char *buf, size_t len, const char *service, const struct pyro_label *labels,
		    size_t n)
{
	struct pyro_label sorted[PYRO_MAX_LABELS];
	size_t off;

	if (!pyro_valid_service(service) || n > PYRO_MAX_LABELS)
		return -EINVAL;
	if (n) {
		memcpy(sorted, labels, n * sizeof(*labels));
		qsort(sorted, n, sizeof(*sorted), cmp_label);
	}
	off = snprintf(buf, len, "%s{", service);
	for (size_t i = 0; i < n && off < len; i++) {
		if (!pyro_valid_label_key(sorted[i].key) ||
		    !pyro_valid_label_value(sorted[i].value) ||
		    (i && strcmp(sorted[i].key, sorted[i - 1].key) == 0))
			return -EINVAL;
		off += snprintf(buf + off, len - off, "%s%s=%s", i ? "," : "", sorted[i].key,
				sorted[i].value);
	}
	if (off < len)
		off += snprintf(buf + off, len - off, "}");
	return off < len ? 0 : -ENAMETOOLONG;
}

int pyro_ingest_url(const char *url, char *out, size_t len, char *err, size_t errlen)
{
	const char *host, *slash;
	size_t n;

	if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else {
		snprintf(err, errlen, "--pyroscope needs an http:// or https:// URL");
		return -EINVAL;
	}
	slash = strchr(host, '/');
	/* user:password@host would put a secret on the command line: refuse, without echoing it */
	if (memchr(host, '@', slash ? (size_t)(slash - host) : strlen(host))) {
		snprintf(err, errlen,
			 "--pyroscope must not carry credentials in the URL (they would show in "
			 "the process list); set HEAPBPF_PYROSCOPE_USER and "
			 "HEAPBPF_PYROSCOPE_PASSWORD(_FILE) or HEAPBPF_PYROSCOPE_TOKEN(_FILE)");
		return -EINVAL;
	}
	if (strpbrk(url, "?# \t\r\n") || !*host || *host == '/') {
		snprintf(err, errlen,
			 "--pyroscope needs a URL with a host and without a query, "
			 "like https://pyroscope.example:4040");
		return -EINVAL;
	}
	n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	if (n >= 7 && strncmp(url + n - 7, "/ingest", 7) == 0)
		n -= 7;
	if (snprintf(out, len, "%.*s/ingest", (int)n, url) >= (int)len) {
		snprintf(err, errlen, "the --pyroscope URL is too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

/* ---- secrets ---- */

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

/* Reads $var, or the first line of the file named by $var_FILE; NULL when neither is set. */
static int secret_from_env(const char *var, char **out, char *err, size_t errlen)
{
	char fvar[128], buf[MAX_SECRET + 2];
	const char *v = getenv(var), *path;
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(fvar, sizeof(fvar), "%s_FILE", var);
	path = getenv(fvar);
	*out = NULL;
	if (v && path) {
		snprintf(err, errlen, "set %s or %s, not both", var, fvar);
		return -EINVAL;
	}
	if (v) {
		if (!clean_secret(v) || strlen(v) > MAX_SECRET) {
			snprintf(err, errlen, "%s is empty, too long or holds control characters",
				 var);
			return -EINVAL;
		}
		*out = strdup(v);
		return *out ? 0 : -ENOMEM;
	}
	if (!path)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "cannot read %s (%s): %s", path, fvar,
			 fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s (%s): %s", path, fvar, strerror(errno));
		return -EIO;
	}
	buf[n] = '\0';
	/* one line: a trailing newline (or CRLF) is not part of the secret */
	if (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (n && buf[n - 1] == '\r')
		buf[--n] = '\0';
	if ((size_t)n != strlen(buf) || n > MAX_SECRET || !clean_secret(buf)) {
		explicit_bzero(buf, sizeof(buf));
		snprintf(err, errlen, "%s (%s) must hold one line of at most %d characters", path,
			 fvar, MAX_SECRET);
		return -EINVAL;
	}
	*out = strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* Replaces every occurrence of a configured secret in msg (in place) by "***". */
static void redact(const struct pyro *p, char *msg)
{
	const char *secrets[] = { p->password, p->token, p->user, p->tenant };

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

static void say(const struct pyro *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const struct pyro *p, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	redact(p, msg);
	fprintf(stderr, "heapbpf: pyroscope: %s\n", msg);
}

static bool loopback_host(const char *url)
{
	const char *h = strstr(url, "://") + 3;

	return strncmp(h, "127.", 4) == 0 || strncmp(h, "localhost", 9) == 0 ||
	       strncmp(h, "[::1]", 5) == 0;
}

int pyro__new(const struct pyro_opts *o, struct pyro **out, char *err, size_t errlen)
{
	struct pyro *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->o = *o;
	rc = pyro_ingest_url(o->url, p->url, sizeof(p->url), err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_TENANT", &p->tenant, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_USER", &p->user, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_PASSWORD", &p->password, err, errlen);
	rc = rc ?: secret_from_env("HEAPBPF_PYROSCOPE_TOKEN", &p->token, err, errlen);
	if (rc)
		goto fail;
	rc = -EINVAL;
	if (!p->user != !p->password) {
		snprintf(err, errlen,
			 "basic auth needs both HEAPBPF_PYROSCOPE_USER and "
			 "HEAPBPF_PYROSCOPE_PASSWORD (or their _FILE forms)");
		goto fail;
	}
	if (p->user && strchr(p->user, ':')) {
		snprintf(err, errlen, "HEAPBPF_PYROSCOPE_USER must not contain ':'");
		goto fail;
	}
	if (p->user && p->token) {
		snprintf(err, errlen,
			 "set basic auth (HEAPBPF_PYROSCOPE_USER/PASSWORD) or a "
			 "bearer token (HEAPBPF_PYROSCOPE_TOKEN), not both");
		goto fail;
	}
	p->loopback = loopback_host(p->url);
	if ((p->password || p->token) && strncmp(p->url, "https://", 8) != 0 && !p->loopback) {
		snprintf(err, errlen,
			 "credentials would cross the network unencrypted: use an "
			 "https:// URL for --pyroscope");
		goto fail;
	}
	if (p->tenant)
		snprintf(p->tenant_hdr, sizeof(p->tenant_hdr), "X-Scope-OrgID: %s", p->tenant);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "cannot initialize libcurl");
		rc = -ENOMEM;
		goto fail;
	}
	p->curl = curl_easy_init();
	if (!p->curl) {
		snprintf(err, errlen, "cannot initialize libcurl");
		rc = -ENOMEM;
		goto fail;
	}
	*out = p;
	return 0;
fail:
	pyro__free(p);
	return rc;
}

void pyro__free(struct pyro *p)
{
	if (!p)
		return;
	if (p->curl) {
		curl_easy_cleanup(p->curl);
		curl_global_cleanup();
	}
	free_secret(p->tenant);
	free_secret(p->user);
	free_secret(p->password);
	free_secret(p->token);
	explicit_bzero(p->tenant_hdr, sizeof(p->tenant_hdr));
	free(p);
}

/* ---- spool ---- */

int pyro__spool(struct pyro *p, const char *name, int64_t from, int64_t until, const void *body,
		size_t len, char *err, size_t errlen)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1], path[PATH_MAX], *buf = NULL;
	struct retain_result rr;
	struct timespec ts;
	int hlen, rc;

	if (strpbrk(name, "\r\n"))
		return -EINVAL;
	clock_gettime(CLOCK_REALTIME, &ts);
	snapshot_stamp(ts.tv_sec, stamp);
	/* sorts by time; pid and nanoseconds keep concurrent heapbpf runs apart */
	snprintf(path, sizeof(path), "%s/%s-%09ld-%d.spool", p->o.spool_dir, stamp, ts.tv_nsec,
		 (int)getpid());
	hlen = asprintf(&buf, SPOOL_MAGIC "name=%s\nfrom=%" PRId64 "\nuntil=%" PRId64 "\n\n", name,
			from, until);
	if (hlen < 0)
		return -ENOMEM;
	{
		char *all = malloc(hlen + len);

		if (!all) {
			free(buf);
			return -ENOMEM;
		}
		memcpy(all, buf, hlen);
		memcpy(all + hlen, body, len);
		rc = output_write_buffer(path, all, hlen + len);
		free(all);
	}
	free(buf);
	if (rc) {
		snprintf(err, errlen, "cannot write %s to the spool: %s", path, strerror(-rc));
		return rc;
	}
	rc = snapshot_retain(p->o.spool_dir, RETAIN_SPOOL, p->o.spool_keep, p->o.spool_max_bytes,
			     &rr, err, errlen);
	if (!rc && rr.deleted_files)
		say(p,
		    "spool %s full: deleted the %zu oldest undelivered profile(s) (%" PRIu64
		    " bytes)",
		    p->o.spool_dir, rr.deleted_files, rr.deleted_bytes);
	return rc;
}

struct spooled {
	char *data;
	size_t len;
	char *name;
	int64_t from, until;
	const char *body;
	size_t body_len;
};

static int spool_read(const char *path, struct spooled *s)
{
	char *line, *end;
	struct stat st;
	ssize_t n;
	int fd;

	memset(s, 0, sizeof(*s));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size > PYRO_SPOOL_MAX_FILE) {
		close(fd);
		return -EBADMSG;
	}
	s->data = malloc(st.st_size + 1);
	if (!s->data) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, s->data, st.st_size);
	close(fd);
	if (n != st.st_size)
		return -EIO;
	s->data[n] = '\0';
	s->len = n;
	if (strncmp(s->data, SPOOL_MAGIC, strlen(SPOOL_MAGIC)) != 0)
		return -EBADMSG;
	line = s->data + strlen(SPOOL_MAGIC);
	/* name=...\nfrom=N\nuntil=N\n\n then the body */
	if (strncmp(line, "name=", 5) != 0 || !(end = strchr(line, '\n')))
		return -EBADMSG;
	*end = '\0';
	s->name = line + 5;
	line = end + 1;
	if (sscanf(line, "from=%" SCNd64 "\nuntil=%" SCNd64 "\n", &s->from, &s->until) != 2)
		return -EBADMSG;
	end = strstr(line, "\n\n");
	if (!end)
		return -EBADMSG;
	s->body = end + 2;
	s->body_len = s->len - (size_t)(s->body - s->data);
	return s->body_len ? 0 : -EBADMSG;
}

struct resp {
	char snippet[BODY_SNIPPET + 1];
	size_t n;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct resp *r = arg;
	size_t len = size * nmemb;

	for (size_t i = 0; i < len && r->n < BODY_SNIPPET; i++) {
		unsigned char c = (unsigned char)data[i];

		r->snippet[r->n++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
	}
	r->snippet[r->n] = '\0';
	return len;
}

enum outcome {
	SENT,
	RETRY,	  /* network error, 408, 429, 5xx */
	AUTH,	  /* 401, 403 */
	REJECTED, /* any other 4xx: this profile will never be accepted */
};

/* One POST; *retry_after is the server's Retry-After in seconds, or 0. */
static enum outcome post_once(struct pyro *p, const struct spooled *s, long *status,
			      long *retry_after, char *why, size_t whylen)
{
	char *esc = curl_easy_escape(p->curl, s->name, 0), url[4096], curlerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	curl_mime *mime = NULL;
	struct resp body = {};
	CURL *c = p->curl;
	CURLcode cc;
	curl_off_t ra = 0;

	*status = 0;
	*retry_after = 0;
	if (!esc) {
		snprintf(why, whylen, "out of memory");
		return RETRY;
	}
	snprintf(url, sizeof(url),
		 "%s?name=%s&from=%" PRId64 "&until=%" PRId64 "&spyName=heapbpf%s", p->url, esc,
		 s->from, s->until, p->o.multipart ? "" : "&format=pprof");
	curl_free(esc);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* credentials stay with this host */
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (p->o.ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, p->o.ca_file);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(p->o.timeout * 1000 / 2));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(p->o.timeout * 1000));
	curl_easy_setopt(c, CURLOPT_USERAGENT, "heapbpf/" HEAPBPF_VERSION);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curlerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	/* no "Expect: 100-continue" round trip for large bodies */
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (p->tenant)
		hdrs = curl_slist_append(hdrs, p->tenant_hdr);
	if (p->user) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, p->user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, p->password);
	} else if (p->token) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, p->token);
	}
	if (p->o.multipart) {
		curl_mimepart *part;

		mime = curl_mime_init(c);
		part = curl_mime_addpart(mime);
		curl_mime_name(part, "profile");
		curl_mime_filename(part, "profile.pprof");
		curl_mime_type(part, "application/octet-stream");
		curl_mime_data(part, s->body, s->body_len);
		curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
	} else {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, s->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body_len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &ra);
		*retry_after = ra > 0 ? (long)ra : 0;
	}
	/* nothing of the request (headers with the credentials) outlives it */
	curl_easy_reset(c);
	curl_slist_free_all(hdrs);
	curl_mime_free(mime);
	if (cc != CURLE_OK) {
		snprintf(why, whylen, "%s", curlerr[0] ? curlerr : curl_easy_strerror(cc));
		/* a bad certificate or URL does not heal by itself, but the profile is kept all the same */
		return RETRY;
	}
	snprintf(why, whylen, "HTTP %ld%s%s", *status, body.n ? ": " : "", body.snippet);
	if (*status >= 200 && *status < 300)
		return SENT;
	if (*status == 401 || *status == 403)
		return AUTH;
	if (*status == 408 || *status == 429 || *status >= 500 || *status < 200)
		return RETRY;
	return REJECTED;
}

/* SIGINT/SIGTERM/SIGHUP waiting (they are blocked): stop retrying and keep the rest. */
static bool stop_requested(void)
{
	sigset_t set;

	return !sigpending(&set) && (sigismember(&set, SIGTERM) || sigismember(&set, SIGINT) ||
				     sigismember(&set, SIGHUP));
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static enum outcome deliver(struct pyro *p, const char *file, const struct spooled *s, int retries)
{
	enum outcome oc = RETRY;
	char why[512];
	long status = 0, ra = 0;

	for (int attempt = 0; attempt <= retries; attempt++) {
		long delay;

		if (attempt) {
			/* exponential backoff with jitter, or what the server asked for */
			delay = BACKOFF_FIRST_MS << (attempt - 1);
			if (delay > BACKOFF_MAX_MS)
				delay = BACKOFF_MAX_MS;
			delay = delay * (80 + rand() % 41) / 100;
			if (ra > 0)
				delay = (ra > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : ra) * 1000;
			if (stop_requested())
				break;
			sleep_ms(delay);
		}
		oc = post_once(p, s, &status, &ra, why, sizeof(why));
		if (p->o.verbose || oc != SENT)
			say(p, "%s: %s%s", file, why,
			    oc == RETRY && attempt < retries ? " (will retry)" : "");
		if (oc != RETRY)
			break;
	}
	return oc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void pyro__flush(struct pyro *p, bool wait, int retries, struct pyro_flush_result *r)
{
	char lock[PATH_MAX], path[PATH_MAX], err[512];
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	struct retain_result rr;
	struct dirent *de;
	int lfd;
	DIR *d;

	memset(r, 0, sizeof(*r));
	/* bounded first: a spool that grew while the server was away */
	if (snapshot_retain(p->o.spool_dir, RETAIN_SPOOL, p->o.spool_keep, p->o.spool_max_bytes,
			    &rr, err, sizeof(err)) == 0)
		r->trimmed = rr.deleted_files;
	snprintf(lock, sizeof(lock), "%s/.deliver.lock", p->o.spool_dir);
	lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0) {
		say(p, "cannot open %s: %s", lock, strerror(errno));
		r->pending = 1;
		return;
	}
	if (flock(lfd, wait ? LOCK_EX : LOCK_EX | LOCK_NB)) {
		r->busy = true;
		close(lfd);
		return;
	}
	d = opendir(p->o.spool_dir);
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (de->d_name[0] == '.' || l < 7 || strcmp(de->d_name + l - 6, ".spool") != 0 ||
		    strstr(de->d_name, ".tmp."))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof(*nn));

			if (!nn)
				break;
			names = nn;
		}
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	if (d)
		closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		struct spooled s;
		enum outcome oc;
		int rc;

		snprintf(path, sizeof(path), "%s/%s", p->o.spool_dir, names[i]);
		rc = spool_read(path, &s);
		if (rc == -ENOENT) { /* trimmed meanwhile */
			free(s.data);
			continue;
		}
		if (rc) {
			say(p, "%s is not a heapbpf spool file (%s); deleted", path, strerror(-rc));
			unlink(path);
			r->rejected++;
			free(s.data);
			continue;
		}
		oc = deliver(p, names[i], &s, retries < 0 ? p->o.retries : retries);
		free(s.data);
		if (oc == SENT) {
			unlink(path);
			r->sent++;
			continue;
		}
		if (oc == REJECTED) {
			say(p, "the server refused %s for good; deleted it from the spool", path);
			unlink(path);
			r->rejected++;
			continue;
		}
		r->auth_failed = oc == AUTH;
		if (r->auth_failed)
			say(p,
			    "the server refused the credentials: check HEAPBPF_PYROSCOPE_TENANT and "
			    "HEAPBPF_PYROSCOPE_USER/PASSWORD or HEAPBPF_PYROSCOPE_TOKEN (or their "
			    "_FILE forms); %zu profile(s) kept in %s",
			    n - i, p->o.spool_dir);
		else
			say(p, "%zu profile(s) kept in %s for the next run", n - i, p->o.spool_dir);
		break;
	}
	r->pending = n - i;
	if (r->sent || r->rejected) {
		/* the deletions are what says "delivered": make them durable */
		int dfd = open(p->o.spool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	for (size_t j = 0; j < n; j++)
		free(names[j]);
	free(names);
	close(lfd);
}
