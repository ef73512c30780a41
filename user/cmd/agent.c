// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "cmd/agent.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "run/agent.h"
#include "util/version.h"

/* heapbpf agent --help */
const char agent_help[] =
	"Usage: heapbpf agent [--select RULE] --pyroscope URL|--output-dir DIR [options]\n"
	"\n"
	"heapbpf agent: every process of the node whose jemalloc runs with prof:true, found at\n"
	"the start and as processes exec, watched as by heapbpf watch, with a window every\n"
	"--interval (default 60), until SIGINT or SIGTERM; each profile labelled service_name=\n"
	"and namespace, pod, container, container_id as Grafana Alloy labels the process\n"
	"(docs/agent.md). --reset: only restore what killed heapbpf runs left on.\n"
	"  --output-dir, --interval, --pyroscope and its options, --label, -f, --keep,\n"
	"  --max-bytes  as heapbpf --help says, and heapbpf watch's triggers (its --help)\n"
	"      --select RULE          profile only processes matching RULE, KEY=VALUE[,...]:\n"
	"                             unit=, cgroup= (a path prefix), container= (an id\n"
	"                             prefix), namespace=, pod=, exe= (comm or executable's\n"
	"                             name), and service_name= to name them; repeatable\n"
	"                             (default: every process)\n"
	"      --exclude RULE         never these (the same keys); repeatable\n"
	"      --max-targets N        processes sampled at once (default 16); more are rotated\n"
	"      --rotate SECONDS       between rotations (default 3 intervals)\n"
	"      --max-rss SIZE         heapbpf's own RSS (default 512M); --max-cpu PERCENT of\n"
	"                             one core, 0.1 to 100 (default 50): over either, a\n"
	"                             target is let go and the number sampled at once\n"
	"                             lowered by one\n"
	"      --test-root DIR        for tests only: read /var/log/pods, /var/log/containers\n"
	"                             and /var/lib/docker/containers under DIR\n"
	"  sudo heapbpf agent --pyroscope http://pyroscope:4040 --select namespace=shop\n"
	"\n" HB_EXIT_STATUS_HELP;

/*
 * heapbpf agent: every selected jemalloc process of the node, watched, in
 * windows; or, with --reset, the flags every killed heapbpf left on.
 */
int agent_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	int rc = checks_refuse_input_options(c) ?: checks_no_operand(n, operands) ?: checks_refuse_live_heap(c)
			 ?: checks_refuse_top_keys(g);

	if (rc)
		return rc;
	if (g->pid || c->run.unit || c->run.pidfile || c->run.children)
		return cli_bad(
			"heapbpf agent finds its processes itself: --pid, --unit, --pidfile and "
			"--children do not apply (use --select)");
	if (c->run.reset)
		return 0;
	if (c->run.output || c->run.record || c->run.at_peak || c->run.follow_forks || c->run.leaks)
		return cli_bad(
			"heapbpf agent writes windows into --output-dir or to --pyroscope: "
			"--output, --record, --at-peak, --follow-forks and --leaks do not apply");
	if (c->run.service_name)
		return cli_bad(
			"heapbpf agent names each process's service: give service_name= in a "
			"--select rule instead of --service-name");
	if (!c->run.output_dir && !c->run.pyroscope)
		return cli_bad(
			"heapbpf agent needs --output-dir or --pyroscope, where its profiles "
			"go");
	if (!c->run.interval)
		c->run.interval = 60;
	if (!c->run.max_targets)
		c->run.max_targets = 16;
	if (!c->run.max_rss)
		c->run.max_rss = 512ULL << 20;
	if (!c->run.max_cpu)
		c->run.max_cpu = 50;
	if (!c->run.rotate)
		c->run.rotate = 3 * c->run.interval;
	if (!g->duration)
		c->run.duration = 0;
	c->run.watch = true;
	return checks_combinations(c, g->type, true);
}

int agent_command(const struct cli *c, struct run *r, char *err, size_t errlen)
{
	(void)c;
	return agent_run(r, err, errlen);
}
