// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "sampling/guard.h"
#include "symbols/proc.h"
#include "sampling/runs.h"
#include "cmd/status.h"

/* heapbpf status --help */
const char status_help[] =
	"Usage: heapbpf status\n"
	"\n"
	"heapbpf status: every heapbpf running on the host, one line each: its pid, mode\n"
	"(one-shot, interval, top, watch, agent), since when, where it writes, the pids it\n"
	"holds. A run refused a process another one holds names that one the same way.\n"
	"  sudo heapbpf status\n"
	"\n"
	"Exit status: 0 listed; 1 error.\n";

/* "http://user@host:4040/x" -> "Pyroscope at http://host:4040/x": never a credential. */
static void pyroscope_words(const char *url, char *buf, size_t len)
{
	const char *sep = strstr(url, "://");
	int scheme = sep ? (int)(sep - url) + 3 : 0;
	const char *host = url + scheme, *at = strchr(host, '@');

	if (at && at < host + strcspn(host, "/"))
		host = at + 1;
	snprintf(buf, len, "Pyroscope at %.*s%s", scheme, url, host);
}

struct runs_reg *status_register(const struct cli *o)
{
	char out[1024];
	const char *mode;

	if (o->reset || o->live_heap || o->mode == MODE_REPORT || o->mode == MODE_DIFF ||
	    o->mode == MODE_STATUS || o->mode == MODE_RSS)
		return NULL;
	mode = o->mode == MODE_AGENT ? "agent"
	       : o->mode == MODE_TOP ? "top"
	       : o->watch	     ? "watch"
	       : o->interval	     ? "interval"
				     : "one-shot";
	if (o->pyroscope)
		pyroscope_words(o->pyroscope, out, sizeof(out));
	else if (o->output_dir)
		snprintf(out, sizeof(out), "%s", o->output_dir);
	else if (o->output)
		snprintf(out, sizeof(out), "%s", o->output);
	else
		snprintf(out, sizeof(out), "%s",
			 o->mode == MODE_TOP ? "the terminal" : "its summary");
	return runs_register(guard_dir(), mode, out);
}

int status_command(struct run *r, char *err, size_t errlen)
{
	(void)r;
	struct runs_entry *v = NULL;
	size_t n = 0;
	int rc = runs_list(guard_dir(), &v, &n);

	if (rc)
		return hb_fail(err, errlen, rc, "cannot read %s: %s", guard_dir(), strerror(-rc));
	if (!n)
		printf("no heapbpf is running on this host\n");
	for (size_t i = 0; i < n; i++) {
		char out[HB_CLEAN_SIZE(sizeof(v[i].output))], comm[32], name[HB_CLEAN_SIZE(32)];

		printf("pid %d  %s  since %s  writes %s\n", v[i].pid, v[i].mode, v[i].since,
		       hb_clean(out, sizeof(out), v[i].output));
		for (size_t j = 0; j < v[i].ntargets; j++) {
			proc_comm(v[i].targets[j], comm, sizeof(comm));
			printf("    holds pid %d (%s)\n", v[i].targets[j],
			       hb_clean(name, sizeof(name), comm));
		}
		if (!v[i].ntargets)
			printf("    holds no process now\n");
	}
	free(v);
	return 0;
}
