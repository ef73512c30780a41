// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf: the story of a run.
 *
 *   1. the command line becomes a struct run, passed down explicitly
 *   2. live: every target (fleet.c), each one found, sampled and written
 *      window by window (live.c, window.c); or report: a recording replayed
 *      into the same windows; or diff: two profiles compared (diff.c)
 *   3. what went short in the run becomes the exit code, here and only here
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "cmd/agent.h"
#include "cmd/diff.h"
#include "cmd/profile.h"
#include "cmd/report.h"
#include "cmd/status.h"
#include "cmd/rss.h"
#include "cmd/top.h"
#include "cmd/watch.h"
#include "cli/cli.h"
#include "run/run.h"
#include "sampling/guard.h"
#include "sampling/runs.h"
#include "sampling/serve.h"
#include "sampling/session.h"
#include "symbols/debuginfo.h"
#include "util/errmsg.h"
#include "util/output.h"
#include "util/version.h"

/* libbpf's messages, debug level included; installed only with -v */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	return vfprintf(stderr, fmt, args);
}

static int exit_code(unsigned int outcome)
{
	if (outcome & RUN_FAILED)
		return EXIT_FAIL;
	if (outcome & RUN_NOT_SENT)
		return EXIT_NOT_SENT;
	if (outcome & RUN_DROPS)
		return EXIT_DROPS;
	if (outcome & RUN_NO_SAMPLES)
		return EXIT_NO_SAMPLES;
	return EXIT_OK;
}

/*
 * The commands: the name typed after heapbpf, what checks its command line,
 * what runs it, and its --help (each in user/cmd/). Not static: the unit
 * tests parse command lines with this very table.
 */
const struct cli_command heapbpf_commands[] = {
	{ NULL, MODE_LIVE, profile_parse, profile_command, profile_help },
	{ "report", MODE_REPORT, report_parse, report_command, report_help },
	{ "diff", MODE_DIFF, diff_parse, diff_command, diff_help },
	{ "top", MODE_TOP, top_parse, top_command, top_help },
	{ "watch", MODE_WATCH, watch_parse, watch_command, watch_help },
	{ "agent", MODE_AGENT, agent_parse, agent_command, agent_help },
	{ "status", MODE_STATUS, status_parse, status_command, status_help },
	{ "rss", MODE_RSS, rss_parse, rss_command, rss_help },
};
const size_t heapbpf_ncommands = sizeof(heapbpf_commands) / sizeof(heapbpf_commands[0]);

int main(int argc, char **argv)
{
	struct cli opts;
	struct run r = { .opts = &opts.run, .start = time(NULL) };
	const struct cli_command *cmd;
	char err[2048] = "";
	struct runs_reg *reg;
	int rc;

	rc = cli_parse(argc, argv, &opts, heapbpf_commands, heapbpf_ncommands, &cmd);
	if (rc > 0 && opts.help)
		fputs(cmd->help, stdout);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_USAGE;
	/* a Ctrl-C during set-up is held and ends the session cleanly */
	if (session_block_signals()) {
		hb_error("cannot block signals: %s", strerror(errno));
		return EXIT_FAIL;
	}
	hb_set_quiet(opts.run.quiet);
	output_set_file_mode(opts.file_mode);
	output_allow_shared_dir(opts.allow_shared_dir);
	libbpf_set_print(opts.run.verbose ? libbpf_print : NULL);
	debuginfo_set_debug_dirs(opts.debug_dirs);
	/*
	 * heapbpf status and other runs' messages say who this run is; and it
	 * listens for their requests before it takes any lock (serve.h)
	 */
	reg = status_register(&opts);
	if (reg && (rc = serve__open(guard_dir(), &r.serve)))
		hb_warn("other heapbpf runs cannot ask this one for a window of its targets: %s",
			strerror(-rc));
	rc = cmd->run(&opts, &r, err, sizeof(err));
	if (rc) {
		hb_error_clean(NULL, err, strerror(-rc));
		r.outcome |= RUN_FAILED;
	}
	serve__free(r.serve);
	runs_unregister(reg);
	debuginfo_cache_clear();
	free(opts.debug_dirs);
	return exit_code(r.outcome);
}
