/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fleet use: the targets of a run (--pid, --unit, --pidfile), one heapbpf
 * process per target when there are several, snapshots into --output-dir
 * with retention, windows every --interval seconds without detaching, and
 * delivery to Grafana Pyroscope through a spool.
 *
 * main.c keeps the story of one target (live()); this file runs that story
 * for every target and owns what happens to a profile in fleet mode.
 */
#ifndef __HEAPBPF_FLEET_H
#define __HEAPBPF_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cli.h"
#include "session.h"
#include "target.h"

/*
 * Resolves the targets, runs live_pid for each (in parallel child processes
 * when there are several, signals forwarded), then applies retention and
 * delivers the Pyroscope spool. Returns the exit code, or -1 with a
 * message in err.
 */
int fleet_run(struct cli *opts, int (*live_pid)(pid_t pid, char *err, size_t errlen), char *err,
	      size_t errlen);

/* True when the profile goes where fleet mode sends it (--output-dir, --interval, --pyroscope). */
bool fleet_owns_output(void);

/* Sets the window callback of a session for --interval. */
void fleet_session_opts(struct session_opts *so, const struct jemalloc_target *t);

/* After session_run: the last (or only) window of t; the target's exit code, or -1 with err. */
int fleet_last_window(struct session *s, const struct jemalloc_target *t, const char *out,
		      char *err, size_t errlen);

#endif /* __HEAPBPF_FLEET_H */
