// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "cmd/watch.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "run/fleet.h"
#include "util/version.h"

/* heapbpf watch --help */
const char watch_help[] =
	"Usage: heapbpf watch --pid PID|--unit NAME|--pidfile PATH\n"
	"                     --output-dir DIR|--pyroscope URL [options]\n"
	"\n"
	"heapbpf watch --pid PID: stays attached (prof_active on, at jemalloc's own rate) until\n"
	"stopped, and writes the in-use profile as of the moment a trigger fires, named after\n"
	"it (heap-TIME-PID-COMM-TRIGGER.pb.gz in --output-dir, label trigger= in Pyroscope):\n"
	"oom when the kernel chooses PID as an OOM victim (written before it is gone), demand\n"
	"on SIGUSR1 to heapbpf, exit or stop at the end, and:\n"
	"  -p, --unit, --pidfile, -d, --output-dir, --keep, --max-bytes, -f, -t, --compress,\n"
	"  --pyroscope and its options, --follow-forks, --leaks, --wrapper\n"
	"                             as heapbpf --help says\n"
	"      --on-growth SIZE       when the sampled in-use estimate is SIZE above where it\n"
	"                             was at the last growth profile (or the start)\n"
	"      --on-rss-growth SIZE   the same for the process's RSS\n"
	"      --on-pressure          when the kernel tells of memory pressure on its cgroup (v1:\n"
	"                             vmpressure medium; v2: a PSI trigger, memory.events high\n"
	"                             or oom), once per --cooldown; page-cache reclaim is none\n"
	"      --cooldown SECONDS     between pressure profiles (default 300)\n"
	"      --no-oom               no profile of an OOM victim\n"
	"  sudo heapbpf watch --unit redis --output-dir /var/lib/heapbpf/redis --on-growth 256M\n"
	"  sudo heapbpf status                                 # its pid, among every run's\n"
	"  sudo kill -USR1 WATCH_PID                           # one profile now\n"
	"SIGUSR1 never stops a run: an interval run writes its window now, a one-shot run\n"
	"and top ignore it.\n"
	"\n" HB_EXIT_STATUS_HELP;

/*
 * heapbpf watch --pid N: stays attached until stopped, and writes an in-use
 * profile when a trigger fires (user/watch.c); then run as a live run.
 */
int watch_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	int rc = checks_refuse_input_options(c) ?: checks_no_operand(n, operands) ?: checks_refuse_live_heap(c)
			 ?: checks_refuse_top_keys(g) ?: checks_target(c, g);

	if (rc)
		return rc;
	/* a restarted manager is waited for by its pid file; its children are not */
	if (c->run.children)
		return cli_bad(
			"heapbpf watch follows one process of a pid file, or a unit: --children "
			"does not apply (--unit takes every process of a service)");
	if (c->run.output || c->run.interval || c->run.record || c->run.at_peak || c->run.reset)
		return cli_bad(
			"heapbpf watch writes a profile per trigger into --output-dir or to "
			"--pyroscope: --output, --interval, --record, --at-peak and --reset do "
			"not apply");
	if (!c->run.output_dir && !c->run.pyroscope)
		return cli_bad(
			"heapbpf watch needs --output-dir or --pyroscope, where its profiles go");
	if (!g->duration)
		c->run.duration = 0;
	c->run.watch = true;
	c->mode = MODE_LIVE;
	return checks_combinations(c, g->type, g->duration);
}

int watch_command(const struct cli *c, struct run *r, char *err, size_t errlen)
{
	(void)c;
	r->hint_children = true;
	return fleet_run(r, err, errlen);
}
