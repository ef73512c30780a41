// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "util/errmsg.h"
#include "export/pyro_auth.h"
#include "export/pyro_push.h"
#include "export/pyroscope.h"
#include "export/spool.h"
#include "util/version.h"

#define BACKOFF_FIRST_MS  1000
#define BACKOFF_MAX_MS	  8000
#define RETRY_AFTER_MAX_S 30
#define BODY_SNIPPET	  512
/*
 * A reply is checked whole for the credentials before its start is shown
 * (reply_withheld()): one longer than this is not shown at all, so that no
 * encoded secret that begins in the snippet can run on past what was checked.
 */
#define BODY_CAPTURE (64 * 1024)
#define WITHHELD     "reply withheld: it contained the credential"

struct pyro {
	struct pyro_opts o;
	char url[2048];	     /* .../ingest */
	char push_url[2048]; /* .../push.v1.PusherService/Push */
	bool push;	     /* push, until the server answers 404 to it */
	struct pyro_auth *auth;
	struct spool *spool;
	CURL *curl;
	bool curl_global; /* curl_global_init() succeeded */
	size_t backlog;	  /* profiles left in the spool by the last flush */
};

int pyroscope_ingest_url(const char *url, char *out, size_t len, char *err, size_t errlen)
{
	const char *host, *slash;
	size_t n;

	/* a scheme is case-insensitive (libcurl reads it so) */
	if (strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		return hb_fail(err, errlen, -EINVAL,
			       "--pyroscope needs an http:// or https:// URL");
	slash = strchr(host, '/');
	/* user:password@host would put a secret on the command line: refuse, without echoing it */
	if (memchr(host, '@', slash ? (size_t)(slash - host) : strlen(host)))
		return hb_fail(
			err, errlen, -EINVAL,
			"--pyroscope must not carry credentials in the URL (they would show "
			"in the process list); set HEAPBPF_PYROSCOPE_USER and "
			"HEAPBPF_PYROSCOPE_PASSWORD(_FILE) or HEAPBPF_PYROSCOPE_TOKEN(_FILE)");
	if (strpbrk(url, "?# \t\r\n") || !*host || *host == '/')
		return hb_fail(err, errlen, -EINVAL,
			       "--pyroscope needs a URL with a host and without a query, "
			       "like https://pyroscope.example:4040");
	n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	if (n >= 7 && strncmp(url + n - 7, "/ingest", 7) == 0)
		n -= 7;
	if (snprintf(out, len, "%.*s/ingest", (int)n, url) >= (int)len)
		return hb_fail(err, errlen, -ENAMETOOLONG, "the --pyroscope URL is too long");
	return 0;
}

static void say(const struct pyro *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const struct pyro *p, const char *fmt, ...)
{
	char msg[1024], clean[HB_CLEAN_SIZE(sizeof(msg))];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pyro_auth__redact(p->auth, msg);
	/*
	 * A server's words were checked whole before they got here; what else
	 * a message quotes (libcurl's, a path) gets the same check as a last
	 * guard, for secrets of three characters or more as redaction
	 */
	if (pyro_auth__holds(p->auth, msg, strlen(msg), 3))
		snprintf(msg, sizeof(msg), "a message withheld: it contained the credential");
	/* a server's reply may be quoted: it reaches the terminal as hb_clean shows it */
	hb_say("pyroscope: %s", hb_clean(clean, sizeof(clean), msg));
}

int pyroscope__new(const struct pyro_opts *o, struct pyro **out, char *err, size_t errlen)
{
	struct pyro *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	p->o = *o;
	rc = pyroscope_ingest_url(o->url, p->url, sizeof(p->url), err, errlen);
	if (!rc && pyro_push_url(p->url, p->push_url, sizeof(p->push_url)))
		rc = hb_fail(err, errlen, -ENAMETOOLONG, "the --pyroscope URL is too long");
	p->push = !o->ingest;
	if (!rc && o->proxy)
		rc = pyro_auth_proxy_check(o->proxy, err, errlen);
	rc = rc ?: pyro_auth__new(p->url, o->proxy, &p->auth, err, errlen);
	if (!rc && spool__new(o->spool_dir, o->spool_keep, o->spool_max_bytes, &p->spool))
		rc = hb_fail(err, errlen, -ENAMETOOLONG,
			     "the spool directory %s has too long a name", o->spool_dir);
	if (rc)
		goto fail;
	p->curl_global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
	p->curl = p->curl_global ? curl_easy_init() : NULL;
	if (!p->curl) {
		rc = hb_fail(err, errlen, -ENOMEM, "cannot initialize libcurl");
		goto fail;
	}
	*out = p;
	return 0;
fail:
	pyroscope__free(p);
	return rc;
}

void pyroscope__free(struct pyro *p)
{
	if (!p)
		return;
	if (p->curl)
		curl_easy_cleanup(p->curl);
	if (p->curl_global)
		curl_global_cleanup();
	pyro_auth__free(p->auth);
	spool__free(p->spool);
	free(p);
}

int pyroscope__spool(struct pyro *p, const char *name, int64_t from, int64_t until,
		     const void *body, size_t len, char *err, size_t errlen)
{
	const struct spool_profile sp = {
		.name = name, .from = from, .until = until, .body = body, .len = len
	};
	struct retain_result rr;
	int rc;

	rc = spool__put(p->spool, &sp, err, errlen);
	rc = rc ?: spool__prune(p->spool, &rr, err, errlen);
	if (!rc && rr.deleted_files)
		say(p,
		    "spool %s full: deleted the %zu oldest undelivered profile(s) (%" PRIu64
		    " bytes)",
		    p->o.spool_dir, rr.deleted_files, rr.deleted_bytes);
	return rc;
}

/* ---- one request ---- */

/* The reply as it came (its first BODY_CAPTURE bytes), and what of it may be shown. */
struct resp {
	char *data; /* BODY_CAPTURE bytes, or NULL when memory was short */
	size_t n;
	bool cut; /* longer than BODY_CAPTURE */
	char snippet[BODY_SNIPPET + 1];
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct resp *r = arg;
	size_t len = size * nmemb, room = r->data ? BODY_CAPTURE - r->n : 0;

	if (len > room)
		r->cut = true;
	if (len && room) {
		memcpy(r->data + r->n, data, len < room ? len : room);
		r->n += len < room ? len : room;
	}
	return len;
}

/*
 * Why the reply may not be shown, or NULL; r->snippet gets its start, cut
 * to BODY_SNIPPET, one space for each byte outside printable ASCII.
 *
 * Redacting a credential from a reply would have to know each way a server
 * may encode it (percent-encoding of any set of characters, in either case,
 * JSON's escapes of some or all of them, both nested...), and a server's
 * reply is not worth a credential: the whole reply is checked instead, with
 * every secret and in every decoding pyro_auth__holds() knows, however short
 * the secret, and if it holds one nothing of it is shown but the status
 * (and Connect's code). The snippet is then its start: no secret is cut in
 * two by it, as none is there whole.
 */
static const char *reply_withheld(const struct pyro *p, struct resp *r)
{
	size_t n = r->n < BODY_SNIPPET ? r->n : BODY_SNIPPET;

	for (size_t i = 0; r->data && i < n; i++) {
		unsigned char c = (unsigned char)r->data[i];

		r->snippet[i] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
	}
	while (n && r->snippet[n - 1] == ' ') /* a line break's remains */
		n--;
	r->snippet[n] = '\0';
	if (!r->data)
		return "reply withheld: no memory to check it for the credential";
	if (r->cut)
		return "reply withheld: too long to check for the credential";
	if (pyro_auth__holds(p->auth, r->data, r->n, 1))
		return WITHHELD;
	return NULL;
}

enum outcome {
	SENT,
	RETRY,	    /* network error, 408, 429, 5xx (push: pyro_push_classify()) */
	AUTH,	    /* 401, 403 */
	REJECTED,   /* any other 4xx: this profile will never be accepted */
	NOT_SERVED, /* push answered 404: the server has no push API */
};

static enum outcome classify(long status)
{
	if (status >= 200 && status < 300)
		return SENT;
	if (status == 401 || status == 403)
		return AUTH;
	if (status == 408 || status == 429 || status >= 500 || status < 200)
		return RETRY;
	return REJECTED;
}

/* .../ingest?name=...&from=...&until=...; NULL when out of memory. */
static char *request_url(const struct pyro *p, const struct spool_profile *s)
{
	char *esc = curl_easy_escape(p->curl, s->name, 0), *url = NULL;

	if (!esc)
		return NULL;
	if (asprintf(&url, "%s?name=%s&from=%" PRId64 "&until=%" PRId64 "&spyName=heapbpf%s",
		     p->url, esc, s->from, s->until, p->o.multipart ? "" : "&format=pprof") < 0)
		url = NULL;
	curl_free(esc);
	return url;
}

/* Everything of a request but its body and credentials; the answer's start goes to body. */
static void set_transport(const struct pyro *p, const char *url, char *curlerr, struct resp *body)
{
	CURL *c = p->curl;

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
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
}

/* The profile as the raw body (format=pprof) or as a multipart "profile" part (returned). */
static curl_mime *set_body(const struct pyro *p, const struct spool_profile *s,
			   struct curl_slist **hdrs)
{
	curl_mimepart *part;
	curl_mime *mime;

	if (!p->o.multipart) {
		*hdrs = curl_slist_append(*hdrs, "Content-Type: application/octet-stream");
		curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, s->body);
		curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->len);
		return NULL;
	}
	mime = curl_mime_init(p->curl);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "profile");
	curl_mime_filename(part, "profile.pprof");
	curl_mime_type(part, "application/octet-stream");
	curl_mime_data(part, s->body, s->len);
	curl_easy_setopt(p->curl, CURLOPT_MIMEPOST, mime);
	return mime;
}

/*
 * The push request: a PushRequest of the profile (returned, the caller frees
 * it) as an application/proto body, Connect's headers; NULL when the
 * profile's name makes no labels (*bad) or memory is short.
 */
static uint8_t *set_push_body(const struct pyro *p, const struct spool_profile *s,
			      struct curl_slist **hdrs, bool *bad)
{
	char id[37], timeout[64];
	uint8_t *req = NULL;
	size_t len = 0;
	int rc;

	pyro_push_uuid(id);
	rc = pyro_push_request(s->name, s->body, s->len, id, &req, &len);
	*bad = rc == -EINVAL;
	if (rc)
		return NULL;
	snprintf(timeout, sizeof(timeout), "Connect-Timeout-Ms: %ld", (long)(p->o.timeout * 1000));
	*hdrs = curl_slist_append(*hdrs, "Content-Type: " PYRO_PUSH_CTYPE);
	*hdrs = curl_slist_append(*hdrs, "Connect-Protocol-Version: 1");
	*hdrs = curl_slist_append(*hdrs, timeout);
	curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, req);
	curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	return req;
}

/*
 * What a push's answer means; why gets its status and Connect code and
 * message, or only the status and a known code with withheld, the reason
 * the reply is not shown.
 */
static enum outcome push_outcome(long status, const struct resp *body, const char *withheld,
				 char *why, size_t whylen)
{
	char code[32], msg[BODY_SNIPPET + 1];
	bool connect =
		pyro_push_connect_error(body->snippet, code, sizeof(code), msg, sizeof(msg)) == 0;

	if (withheld)
		snprintf(why, whylen, "HTTP %ld%s%s (%s)", status,
			 pyro_push_connect_code(code) ? " " : "",
			 pyro_push_connect_code(code) ? code : "", withheld);
	else if (connect)
		snprintf(why, whylen, "HTTP %ld %s%s%s", status, code, msg[0] ? ": " : "", msg);
	else
		snprintf(why, whylen, "HTTP %ld%s%s", status, body->snippet[0] ? ": " : "",
			 body->snippet);
	switch (pyro_push_classify(status, code)) {
	case PUSH_SENT:
		return SENT;
	case PUSH_RETRY:
		return RETRY;
	case PUSH_AUTH:
		return AUTH;
	case PUSH_NOT_SERVED:
		return NOT_SERVED;
	default:
		return REJECTED;
	}
}

/* One POST, to push or /ingest; *retry_after is the server's Retry-After in seconds, or 0. */
static enum outcome post_once(struct pyro *p, const struct spool_profile *s, bool push,
			      long *retry_after, char *why, size_t whylen)
{
	char curlerr[CURL_ERROR_SIZE] = "", *url = push ? NULL : request_url(p, s);
	struct curl_slist *hdrs = NULL;
	struct resp body = {};
	const char *withheld;
	curl_mime *mime = NULL;
	uint8_t *req = NULL;
	curl_off_t ra = 0;
	bool bad = false;
	long status = 0;
	CURLcode cc;

	*retry_after = 0;
	/* /ingest takes the name as push does: SERVICE{LABEL=VALUE,...}, nothing to inject */
	if (!push && !pyro_labels_valid_name(s->name)) {
		free(url);
		snprintf(why, whylen, "its name is not SERVICE{LABEL=VALUE,...} with valid labels");
		return REJECTED;
	}
	if (!push && !url) {
		snprintf(why, whylen, "out of memory");
		return RETRY;
	}
	body.data = malloc(BODY_CAPTURE);
	curl_easy_reset(p->curl);
	set_transport(p, push ? p->push_url : url, curlerr, &body);
	/* no "Expect: 100-continue" round trip for large bodies */
	hdrs = curl_slist_append(hdrs, "Expect:");
	pyro_auth__apply(p->auth, p->curl, &hdrs);
	if (push)
		req = set_push_body(p, s, &hdrs, &bad);
	else
		mime = set_body(p, s, &hdrs);
	curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, hdrs);
	cc = push && !req ? CURLE_OUT_OF_MEMORY : curl_easy_perform(p->curl);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(p->curl, CURLINFO_RETRY_AFTER, &ra);
		*retry_after = ra > 0 ? (long)ra : 0;
	}
	/* nothing of the request (headers with the credentials) outlives it */
	curl_easy_reset(p->curl);
	curl_slist_free_all(hdrs);
	curl_mime_free(mime);
	free(req);
	free(url);
	withheld = cc == CURLE_OK && !bad ? reply_withheld(p, &body) : NULL;
	if (body.data) {
		explicit_bzero(body.data, body.n);
		free(body.data);
	}
	if (bad) {
		snprintf(why, whylen,
			 "its name is not SERVICE{LABEL=VALUE,...} with at most %d labels",
			 PYRO_PUSH_MAX_LABELS - PYRO_PUSH_EXTRA_LABELS);
		return REJECTED;
	}
	if (cc != CURLE_OK) {
		snprintf(why, whylen, "%s", curlerr[0] ? curlerr : curl_easy_strerror(cc));
		/* a bad certificate or URL does not heal by itself, but the profile is kept all the same */
		return RETRY;
	}
	if (push)
		return push_outcome(status, &body, withheld, why, whylen);
	if (withheld)
		snprintf(why, whylen, "HTTP %ld (%s)", status, withheld);
	else
		snprintf(why, whylen, "HTTP %ld%s%s", status, body.snippet[0] ? ": " : "",
			 body.snippet);
	return classify(status);
}

/* ---- retries ---- */

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

/* Before retry attempt (1, 2, ...): what the server asked for, else exponential with jitter. */
static long backoff_ms(int attempt, long retry_after)
{
	long delay = BACKOFF_MAX_MS;

	if (retry_after > 0)
		return (retry_after > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : retry_after) * 1000;
	if (attempt < 5)
		delay = BACKOFF_FIRST_MS << (attempt - 1);
	if (delay > BACKOFF_MAX_MS)
		delay = BACKOFF_MAX_MS;
	return delay * (80 + rand() % 41) / 100;
}

static enum outcome deliver(struct pyro *p, const char *file, const struct spool_profile *s,
			    int retries)
{
	enum outcome oc = RETRY;
	char why[BODY_SNIPPET * 2];
	long ra = 0;

	for (int attempt = 0; attempt <= retries; attempt++) {
		if (attempt) {
			if (stop_requested())
				break;
			sleep_ms(backoff_ms(attempt, ra));
		}
		oc = post_once(p, s, p->push, &ra, why, sizeof(why));
		if (oc == NOT_SERVED) {
			/* an older Pyroscope, or a proxy of /ingest only: said once, kept for the run */
			p->push = false;
			say(p,
			    "%s answered %s: no push API there; sending to %s for the rest of this run",
			    p->push_url, why, p->url);
			oc = post_once(p, s, false, &ra, why, sizeof(why));
		}
		if (p->o.verbose || oc != SENT)
			say(p, "%s: %s%s", file, why,
			    oc == RETRY && attempt < retries ? " (will retry)" : "");
		if (oc != RETRY)
			break;
	}
	return oc;
}

/* ---- the spool ---- */

/* Delivers one spool file; true when delivery stops there (server away or credentials refused). */
static bool flush_one(struct pyro *p, const char *file, int retries, struct pyro_flush_result *r)
{
	char path[PATH_MAX + NAME_MAX + 2], *data = NULL;
	struct spool_profile s;
	enum outcome oc;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", spool__dir(p->spool), file);
	rc = spool__read(p->spool, file, &s, &data);
	if (rc == -ENOENT) { /* trimmed meanwhile */
		free(data);
		return false;
	}
	if (rc == -EPERM) {
		/* planted: pushing it would lend it the operator's credentials */
		say(p,
		    "%s was not written by heapbpf (its owner, mode or links); left in place, "
		    "not pushed",
		    path);
		r->foreign++;
		free(data);
		return false;
	}
	if (rc) {
		say(p, "%s is not a heapbpf spool file (%s); deleted", path, strerror(-rc));
		spool__remove(p->spool, file);
		r->rejected++;
		free(data);
		return false;
	}
	oc = deliver(p, file, &s, retries);
	free(data);
	if (oc == SENT) {
		spool__remove(p->spool, file);
		r->sent++;
		return false;
	}
	if (oc == REJECTED) {
		say(p, "the server refused %s for good; deleted it from the spool", path);
		spool__remove(p->spool, file);
		r->rejected++;
		return false;
	}
	r->auth_failed = oc == AUTH;
	return true;
}

void pyroscope__flush(struct pyro *p, bool wait, int retries, struct pyro_flush_result *r)
{
	const char *dir = spool__dir(p->spool);
	struct dirent **files = NULL;
	struct retain_result rr;
	char err[PATH_MAX + 128];
	int n, i, rc;

	memset(r, 0, sizeof(*r));
	/* bounded first: a spool that grew while the server was away */
	if (spool__prune(p->spool, &rr, err, sizeof(err)) == 0)
		r->trimmed = rr.deleted_files;
	rc = spool__lock(p->spool, wait, err, sizeof(err));
	r->busy = rc == -EWOULDBLOCK;
	if (rc) {
		if (!r->busy) {
			say(p, "%s", err);
			r->pending = 1;
		}
		return;
	}
	n = spool__list(p->spool, &files);
	if (n < 0) {
		say(p, "cannot read %s: %s", dir, strerror(-n));
		r->pending = 1;
		spool__unlock(p->spool);
		return;
	}
	for (i = 0; i < n; i++) {
		if (flush_one(p, files[i]->d_name, retries < 0 ? p->o.retries : retries, r))
			break;
	}
	r->pending = n - i;
	if (r->auth_failed)
		say(p,
		    "the server refused the credentials: check HEAPBPF_PYROSCOPE_TENANT and "
		    "HEAPBPF_PYROSCOPE_USER/PASSWORD or HEAPBPF_PYROSCOPE_TOKEN (or their "
		    "_FILE forms); %zu profile(s) kept in %s",
		    r->pending, dir);
	else if (r->pending && wait)
		say(p, "%zu profile(s) kept in %s for the next run", r->pending, dir);
	/* after a window: said as the backlog starts, not at every window while it lasts */
	else if (r->pending && !p->backlog)
		say(p, "%zu profile(s) kept in %s; delivery is tried again after each window",
		    r->pending, dir);
	if (!r->pending && p->backlog)
		say(p, "the spool has drained: %zu profile(s) delivered", r->sent);
	p->backlog = r->pending;
	spool__unlock(p->spool);
	spool_list_free(files, n);
}
