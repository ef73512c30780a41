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
#include "cli/checks.h"
#include "cli/cli.h"

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

	if (o->run.reset || o->run.live_heap || o->mode == MODE_REPORT || o->mode == MODE_DIFF ||
	    o->mode == MODE_STATUS || o->mode == MODE_RSS)
		return NULL;
	mode = o->mode == MODE_AGENT ? "agent"
	       : o->mode == MODE_TOP ? "top"
	       : o->run.watch	     ? "watch"
	       : o->run.interval     ? "interval"
				     : "one-shot";
	if (o->run.pyroscope)
		pyroscope_words(o->run.pyroscope, out, sizeof(out));
	else if (o->run.output_dir)
		snprintf(out, sizeof(out), "%s", o->run.output_dir);
	else if (o->run.output)
		snprintf(out, sizeof(out), "%s", o->run.output);
	else
		snprintf(out, sizeof(out), "%s",
			 o->mode == MODE_TOP ? "the terminal" : "its summary");
	return runs_register(guard_dir(), mode, out);
}

/* heapbpf status: every heapbpf on the host; nothing to choose. */
int status_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	if (n)
		return checks_no_operand(n, operands);
	if (g->pid || g->duration || c->output_set || c->run.output_dir || c->run.record ||
	    c->run.unit || c->run.pidfile || c->run.pyroscope || c->run.reset || c->run.interval ||
	    c->run.live_heap)
		return cli_bad("status lists every heapbpf running on the host: it takes no option "
			       "but -q");
	return 0;
}

int status_command(const struct cli *c, struct run *r, char *err, size_t errlen)
{
	(void)c;
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
