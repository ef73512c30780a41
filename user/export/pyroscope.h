/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Export to Grafana Pyroscope (libcurl): each profile goes to the server's
 * push API, /push.v1.PusherService/Push (pyro_push.h), or with
 * --pyroscope-api ingest to the legacy /ingest endpoint, either as the raw
 * gzip-compressed pprof body with format=pprof, or as multipart/form-data
 * with a "profile" part and no format parameter. name=SERVICE{label=value,...}
 * (pyro_labels.h), from/until = the window. A server that answers 404 to
 * push gets /ingest for the rest of the run (said once).
 *
 * Nothing is sent straight from memory: a profile is first written to the
 * spool (spool.h), then the spool is delivered oldest first and each file is
 * deleted once the server accepted it. A profile the server could not take
 * (down, 408/429/5xx after the retries, bad credentials) stays and goes with
 * the next run; the spool is bounded like snapshots. Credentials: pyro_auth.h.
 */
#ifndef __HEAPBPF_PYROSCOPE_H
#define __HEAPBPF_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export/pyro_labels.h"

struct pyro_opts {
	const char *url;	  /* the server (http[s]://host[:port][/prefix]) or its /ingest */
	const char *spool_dir;	  /* must exist */
	size_t spool_keep;	  /* at most this many spooled profiles; 0 = no limit */
	uint64_t spool_max_bytes; /* 0 = no limit */
	double timeout;		  /* seconds per request */
	int retries;		  /* after the first attempt, on 408/429/5xx and network errors */
	bool multipart;		  /* multipart/form-data instead of format=pprof */
	bool ingest;		  /* /ingest instead of the push API */
	const char *ca_file;	  /* extra CA bundle, or NULL for the system's */
	const char *proxy;	  /* --pyroscope-proxy for every request, or NULL (pyro_auth.h) */
	bool verbose;
};

struct pyro;

/* Checks the URL and reads the credentials; on error a one-sentence message without secrets. */
int pyroscope__new(const struct pyro_opts *o, struct pyro **out, char *err, size_t errlen);
void pyroscope__free(struct pyro *p);

/* Puts one gzip-compressed pprof profile for name (pyro_labels_profile_name) into the spool. */
int pyroscope__spool(struct pyro *p, const char *name, int64_t from, int64_t until,
		     const void *body, size_t len, char *err, size_t errlen);

struct pyro_flush_result {
	size_t sent;	 /* accepted by the server in this flush */
	size_t pending;	 /* still in the spool */
	size_t rejected; /* refused for good (4xx other than 401/403/408/429): deleted */
	size_t trimmed;	 /* deleted to keep the spool bounded */
	size_t foreign;	 /* not written by heapbpf: left in place, not pushed */
	bool auth_failed;
	bool busy; /* another heapbpf was delivering this spool (wait = false) */
};

/*
 * Delivers the spool, oldest first; stops at the first profile that could
 * not be delivered (the server is down or refuses the credentials). Only
 * one heapbpf delivers a spool at a time: with wait false, returns at once
 * when another one does. retries < 0: as configured (--interval windows pass
 * 0: the next window is their retry, and the event loop must not wait long).
 * Messages (never a secret) go to stderr.
 */
void pyroscope__flush(struct pyro *p, bool wait, int retries, struct pyro_flush_result *r);

/* ---- pure helpers (unit-tested) ---- */

/*
 * The /ingest URL for a user's URL: http or https, no user:password@, no
 * query or fragment; "/ingest" appended unless it ends in it already.
 */
int pyroscope_ingest_url(const char *url, char *out, size_t len, char *err, size_t errlen);

#endif /* __HEAPBPF_PYROSCOPE_H */
