// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The checks of a command line that several commands share: what one
 * command refuses, its parser in user/cmd/ checks with these, in the order
 * that decides which sentence a command line with several faults gets.
 */
#include <stdbool.h>
#include <string.h>

#include "cli/checks.h"
#include "export/sink.h"

/* --at-peak names one file: one target, one window. */
int checks_at_peak(const struct cli *c)
{
	if (c->run.at_peak && (c->run.unit || c->run.output_dir || c->run.interval))
		return cli_bad("--at-peak writes one file: it cannot be combined with --unit, "
			       "--output-dir or --interval");
	if (c->run.at_peak && c->run.output && strcmp(c->run.at_peak, c->run.output) == 0)
		return cli_bad("--at-peak needs a file of its own, not the profile's \"%s\"",
			       c->run.output);
	return 0;
}

/* A --pid list and an option that names one file or one terminal: known before any process is. */
int checks_one_file(const struct cli *c)
{
	const char *what = run_opts_one_process(&c->run, c->mode == MODE_TOP);

	if (c->run.npids > 1 && what)
		return cli_bad("--pid lists %d processes and %s", c->run.npids, what);
	return 0;
}

/* --output-dir and what applies to it alone; its formats' default. */
static int check_output_dir(struct cli *c)
{
	if (c->run.output_dir && c->run.output)
		return cli_bad("--output-dir names its files itself: drop --output");
	if (!c->run.output_dir && (c->run.keep || c->run.max_bytes || c->run.zstd))
		return cli_bad("--keep, --max-bytes and --compress apply to --output-dir");
	if (c->run.output_dir && !c->run.formats)
		c->run.formats = 1u << FMT_PPROF;
	if (c->run.zstd && !(c->run.formats & (1u << FMT_FOLDED)))
		return cli_bad(
			"--compress zstd applies to --format folded (pprof is gzip-compressed "
			"already)");
	return 0;
}

/* --interval's windows, and what a recording (of one process, in one window) allows. */
static int check_windows(struct cli *c, bool have_duration)
{
	if (c->run.interval && !c->run.output_dir && !c->run.pyroscope)
		return cli_bad(
			"--interval needs --output-dir or --pyroscope, where the windows go");
	if (c->run.interval && c->run.output)
		return cli_bad(
			"--interval writes a file per window: use --output-dir, not --output");
	if (c->run.follow_forks && c->run.record)
		return cli_bad(
			"--follow-forks and --record cannot be combined (a recording is of one "
			"process)");
	if (c->run.interval && c->run.record)
		return cli_bad("--interval and --record cannot be combined");
	if (c->run.interval && !have_duration)
		c->run.duration = 0;
	if (c->run.interval && c->run.duration && c->run.duration < c->run.interval)
		return cli_bad("--duration must be at least one --interval");
	return 0;
}

/* A file name that names another format than the run writes: refused, with the two. */
static int check_name_agrees(const struct cli *c, const char *opt, const char *path)
{
	int named = sink_format_of_name(path);

	if (named < 0 || (enum out_format)named == c->run.format)
		return 0;
	return cli_bad("%s \"%s\" is named for %s but the format is %s: %s .%s", opt, path,
		       sink_format_name((enum out_format)named), sink_format_name(c->run.format),
		       c->run.formats ? "drop -f, or end the name in" : "end the name in",
		       sink_extension(c->run.format, false));
}

/*
 * The format of the one file written: -f, else the one -o's name ends in
 * (heap.html: html; any other name: pprof). Two formats need --output-dir;
 * a -f, or --at-peak's name, that disagrees with -o's name is refused.
 */
int checks_resolve_format(struct cli *c)
{
	unsigned int given = c->run.formats;
	int named = c->run.output ? sink_format_of_name(c->run.output) : -1;

	if (c->run.output_dir)
		return 0;
	if (given & (given - 1)) {
		enum out_format a = FMT_PPROF, b;

		while (!(given & (1u << a)))
			a++;
		for (b = a + 1; !(given & (1u << b)); b++)
			;
		return cli_bad("-f %s and -f %s: one file takes one format; give one -f, or "
			       "--output-dir DIR for a file per format",
			       sink_format_name(a), sink_format_name(b));
	}
	if (!given && named >= 0)
		c->run.format = (enum out_format)named;
	return (c->run.output ? check_name_agrees(c, "--output", c->run.output) : 0)
		       ?: (c->run.at_peak ? check_name_agrees(c, "--at-peak", c->run.at_peak) : 0);
}

/* The options that do not go together, and the defaults that depend on others. */
int checks_combinations(struct cli *c, bool have_type, bool have_duration)
{
	int rc = checks_resolve_format(c) ?: check_output_dir(c) ?: check_windows(c, have_duration);

	if (rc)
		return rc;
	if (!c->run.pyroscope &&
	    (c->run.service_name || c->run.nlabels || c->run.spool_dir || c->run.spool_keep ||
	     c->run.spool_max_bytes || c->run.pyro_multipart || c->run.pyro_ca ||
	     c->run.pyro_proxy || c->pyro_api))
		return cli_bad("--service-name, --label, --spool-* and --pyroscope-* apply to "
			       "--pyroscope");
	if (have_type &&
	    !(c->run.output_dir ? c->run.formats & (1u << FMT_FOLDED | 1u << FMT_HTML)
				: c->run.format == FMT_FOLDED || c->run.format == FMT_HTML))
		return cli_bad(
			"--sample-type applies to --format folded and html (pprof carries all "
			"four)");
	return 0;
}

/*
 * What each command accepts. The options are read alike for all commands
 * (parse_options); what one command refuses, its parser in user/cmd/
 * checks, with these refusals that several commands share, in the order
 * that decides which sentence a command line with several faults gets.
 */

/* The operands left once a command took its own: none. */
int checks_no_operand(int n, char **operands)
{
	return n > 0 ? cli_bad("unexpected argument \"%s\"", operands[0]) : 0;
}

/* report's and diff's inputs, refused by a live run and top. */
int checks_refuse_input_options(const struct cli *c)
{
	if (c->core || c->exe)
		return cli_bad("--core and --exe apply to heapbpf report of a core file");
	if (c->nbinary_dirs || c->from || c->to >= 0)
		return cli_bad("--from, --to and --binary-path apply to heapbpf report and diff");
	return 0;
}

/* --live-heap, refused by report, top and diff. */
int checks_refuse_live_heap(const struct cli *c)
{
	if (c->run.live_heap)
		return cli_bad(
			"--live-heap reads a running process: it does not apply to report, top "
			"or diff");
	return 0;
}

/* --sort and --by, refused by all but top. */
int checks_refuse_top_keys(const struct cli_given *g)
{
	return g->top ? cli_bad("--sort and --by apply to heapbpf top") : 0;
}

/* The fleet options, refused by report and diff. */
int checks_refuse_fleet_options(const struct cli *c)
{
	if (c->run.unit || c->run.pidfile || c->run.output_dir || c->run.interval ||
	    c->run.pyroscope || c->run.keep || c->run.max_bytes || c->run.zstd || c->run.nlabels ||
	    c->run.spool_dir)
		return cli_bad("report and diff write one profile: the fleet options (--unit, "
			       "--output-dir, --interval, --pyroscope, ...) apply to live runs");
	return 0;
}

/* A live run's and top's target: one of --pid, --unit and --pidfile. */
int checks_target(const struct cli *c, const struct cli_given *g)
{
	if (g->pid + !!c->run.unit + !!c->run.pidfile > 1)
		return cli_bad("give one of --pid, --unit and --pidfile");
	if (!g->pid && !c->run.unit && !c->run.pidfile)
		return cli_bad("--pid is required (or --unit NAME, or --pidfile PATH)");
	if (c->run.children && c->run.unit)
		return cli_bad("--children applies to --pid and --pidfile: --unit profiles every "
			       "process of the unit already");
	return 0;
}
