// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>

#include "cmd/top.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "run/fleet.h"
#include "util/version.h"

/* heapbpf top --help */
const char top_help[] =
	"Usage: heapbpf top --pid PID [options]\n"
	"\n"
	"heapbpf top --pid PID: the allocation sites live, refreshed every second: in-use\n"
	"growth and allocation rate over the last second, in use, totals, samples, drops. On a\n"
	"terminal it fills the screen (keys: g/a/u sort by growth, allocation, in use; s/f/F\n"
	"rows by site, function, file; p pauses; q quits); otherwise it prints one plain table\n"
	"per second. prof_active is on while it runs. No profile is written unless -o is given\n"
	"(then one of the whole run).\n"
	"  -p, --pidfile, -o, -f, -t, --raw, --ringbuf-size, --jemalloc-layout, --debug-dir,\n"
	"  --wrapper, --file-mode, --allow-shared-dir  as heapbpf --help says\n"
	"  -d, --duration SECONDS     stop after SECONDS (default 0: until q, Ctrl-C or SIGTERM)\n"
	"      --sort KEY             growth (default), alloc or inuse\n"
	"      --by KEY               site (default: caller and line), function or file\n"
	"  sudo heapbpf top --pid 4242\n"
	"  sudo heapbpf top -p 4242 --by function -d 60 > top.log   # one table per second\n"
	"\n" HB_EXIT_STATUS_HELP;

/* heapbpf top --pid N: one process as it runs, on the terminal, until stopped by default. */
int top_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	int rc = checks_refuse_input_options(c) ?: checks_no_operand(n, operands) ?: checks_refuse_live_heap(c);

	if (rc)
		return rc;
	if (c->run.unit || c->run.output_dir || c->run.interval || c->run.pyroscope ||
	    c->run.record || c->run.reset || c->run.follow_forks || c->run.children)
		return cli_bad("heapbpf top shows one process as it runs: --unit, --output-dir, "
			       "--interval, --pyroscope, --record, --reset, --follow-forks and "
			       "--children do not apply");
	if (c->run.leaks || c->run.at_peak)
		return cli_bad(
			"heapbpf top shows the sites as they run: --leaks and --at-peak apply to "
			"profiles");
	if (c->run.output && strcmp(c->run.output, "-") == 0)
		return cli_bad("heapbpf top draws on stdout: give -o a file name, not \"%s\"",
			       c->run.output);
	if (!g->duration)
		c->run.duration = 0;
	return checks_at_peak(c) ?: checks_one_file(c) ?: checks_target(c, g)
		       ?: checks_combinations(c, g->type, g->duration);
}

int top_command(const struct cli *c, struct run *r, char *err, size_t errlen)
{
	(void)c;
	r->view = true;
	r->servable = true;
	r->hint_children = true;
	return fleet_run(r, err, errlen);
}
