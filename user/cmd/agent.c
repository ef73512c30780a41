// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "cmd/agent.h"
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

int agent_command(struct run *r, char *err, size_t errlen)
{
	return agent_run(r, err, errlen);
}
