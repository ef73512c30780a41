// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export/pyroscope.h"
#include "export/snapshot.h"
#include "run/outputs.h"
#include "util/errmsg.h"
#include "util/output.h"

/*
 * Where profiles wait for Pyroscope: --spool-dir; else beside --output-dir's
 * snapshots; else heapbpf's state directory (systemd's $STATE_DIRECTORY, its
 * first entry, or /var/lib/heapbpf). The spool itself is made 0700: its
 * profiles hold a process's function names and addresses, and every file
 * in it is pushed with the operator's credentials. Then checked
 * (output_dir_check): owned by root or the invoking user, writable by no
 * one else.
 */
static int spool_dir(const struct run_opts *o, char *dir, size_t len)
{
	const char *state = getenv("STATE_DIRECTORY");
	char *slash;
	int n, fd;

	if (o->spool_dir || o->output_dir) {
		snprintf(dir, len, "%s", o->spool_dir ?: o->output_dir);
		/* --spool-dir's parents, or --output-dir itself, as snapshot directories */
		slash = o->spool_dir ? strrchr(dir, '/') : NULL;
		if (slash && slash != dir) {
			*slash = '\0';
			n = snapshot_mkdir(dir);
			*slash = '/';
		} else {
			n = o->spool_dir ? 0 : snapshot_mkdir(dir);
		}
		if (n)
			return n;
		n = (int)strlen(dir);
		if (!o->spool_dir && snprintf(dir + n, len - n, "/spool") >= (int)(len - n))
			return -ENAMETOOLONG;
	} else {
		n = state && state[0] ? (int)strcspn(state, ":") : 0;
		if (n)
			snprintf(dir, len, "%.*s", n, state);
		else
			snprintf(dir, len, "/var/lib/heapbpf");
		if (mkdir(dir, 0700) && errno != EEXIST)
			return -errno;
		n = (int)strlen(dir);
		if (snprintf(dir + n, len - n, "/spool") >= (int)(len - n))
			return -ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	fd = output_open_dir(dir, OUTPUT_DIR_PRIVATE);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* Everything about --pyroscope that can be wrong, said before profiling starts. */
static int pyro_setup(struct run *r, char *err, size_t errlen)
{
	const struct run_opts *o = r->opts;
	struct pyro_opts po = {
		.url = o->pyroscope,
		.spool_dir = r->spool_dir,
		.spool_keep = o->spool_keep ? o->spool_keep : 1000,
		.spool_max_bytes = o->spool_max_bytes ? o->spool_max_bytes : 256ULL << 20,
		.timeout = o->pyro_timeout,
		.retries = o->pyro_retries,
		.multipart = o->pyro_multipart,
		.ingest = o->pyro_ingest,
		.ca_file = o->pyro_ca,
		.proxy = o->pyro_proxy,
		.verbose = o->verbose,
	};
	int rc;

	r->naming = (struct pyro_naming){
		.service_name = o->service_name,
		.unit = o->unit,
		.labels = o->labels,
		.nlabels = o->nlabels,
	};
	rc = pyro_labels_naming_check(&r->naming, err, errlen);
	if (rc)
		return rc;
	rc = spool_dir(o, r->spool_dir, sizeof(r->spool_dir));
	if (rc)
		return hb_fail(err, errlen, rc, "cannot use the spool directory %s: %s",
			       r->spool_dir, output_strerror(rc));
	return pyroscope__new(&po, &r->pyro, err, errlen);
}

/*
 * --keep and --max-bytes in --output-dir: the newest --keep windows (every
 * process's files of one window together), or, for the agent
 * (r->prune_per_process), the newest --keep profiles of each process
 * counted apart; then the oldest while the directory holds more than
 * --max-bytes.
 */
static void retention(const struct run *r)
{
	const struct run_opts *o = r->opts;
	struct retain_result rr;
	char err[512];
	int rc;

	if (!o->output_dir || (!o->keep && !o->max_bytes))
		return;
	rc = r->prune_per_process
		     ? snapshot_prune_per_process(o->output_dir, o->keep, o->max_bytes, &rr, err,
						  sizeof(err))
		     : snapshot_prune(o->output_dir, o->keep, o->max_bytes, &rr, err, sizeof(err));
	if (rc) {
		hb_error_clean("retention", err, NULL);
		return;
	}
	outputs_say_pruned(o, &rr);
}

void outputs_say_pruned(const struct run_opts *o, const struct retain_result *rr)
{
	if (rr->future_files) {
		char names[4 * sizeof(rr->future)];

		hb_warn("retention leaves alone %zu snapshot file(s) in %s dated in the future: %s",
			rr->future_files, o->output_dir,
			hb_clean(names, sizeof(names), rr->future));
	}
	if (rr->deleted_files && o->verbose)
		hb_say("deleted %zu old snapshot file(s) (%" PRIu64 " bytes)", rr->deleted_files,
		       rr->deleted_bytes);
	if (rr->newest_over)
		hb_warn("the newest snapshot alone is larger than --max-bytes; it is kept");
}

/* After each --interval window: retention, and a delivery attempt that does not wait. */
void outputs_window_done(struct run *r)
{
	struct pyro_flush_result fr;

	retention(r);
	if (r->pyro)
		pyroscope__flush(r->pyro, false, 0, &fr);
}

/* The last delivery: waits for another heapbpf delivering the same spool, retries as set. */
static void deliver(struct run *r)
{
	struct pyro_flush_result fr;

	pyroscope__flush(r->pyro, true, -1, &fr);
	if (fr.rejected || fr.auth_failed)
		r->outcome |= RUN_FAILED;
	else if (fr.pending || fr.busy)
		r->outcome |= RUN_NOT_SENT;
	if (fr.sent)
		hb_note("pyroscope: delivered %zu profile(s)", fr.sent);
}

int outputs_setup(struct run *r, char *err, size_t errlen)
{
	const struct run_opts *o = r->opts;
	int rc = 0;

	if (o->output_dir) {
		rc = snapshot_mkdir(o->output_dir);
		if (rc)
			hb_fail(err, errlen, rc, "cannot create the output directory %s: %s",
				o->output_dir, strerror(-rc));
		if (!rc) {
			/* said now, not after the first window */
			int dfd = output_open_dir(o->output_dir, OUTPUT_DIR_FILES);

			if (dfd < 0)
				rc = hb_fail(err, errlen, dfd,
					     "cannot write into the output directory %s: %s",
					     o->output_dir, output_strerror(dfd));
			else
				close(dfd);
		}
	}
	if (!rc && o->pyroscope)
		rc = pyro_setup(r, err, errlen);
	return rc;
}

void outputs_finish(struct run *r)
{
	retention(r);
	if (r->pyro) {
		deliver(r);
		pyroscope__free(r->pyro);
		r->pyro = NULL;
	}
}
