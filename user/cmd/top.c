// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "cmd/top.h"
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

int top_command(struct run *r, char *err, size_t errlen)
{
	r->view = true;
	r->servable = true;
	r->hint_children = true;
	return fleet_run(r, err, errlen);
}
