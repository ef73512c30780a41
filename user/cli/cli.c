// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/values.h"
#include "util/output.h"

enum {
	OPT_RAW = 256,
	OPT_RINGBUF,
	OPT_LAYOUT,
	OPT_DEBUG_DIR,
	OPT_RECORD,
	OPT_FROM,
	OPT_TO,
	OPT_BINARY_PATH,
	OPT_RESET,
	OPT_VERSION,
	OPT_UNIT,
	OPT_PIDFILE,
	OPT_OUTPUT_DIR,
	OPT_KEEP,
	OPT_MAX_BYTES,
	OPT_COMPRESS,
	OPT_INTERVAL,
	OPT_PYROSCOPE,
	OPT_SERVICE_NAME,
	OPT_LABEL,
	OPT_SPOOL_DIR,
	OPT_SPOOL_KEEP,
	OPT_SPOOL_MAX_BYTES,
	OPT_PYRO_TIMEOUT,
	OPT_PYRO_RETRIES,
	OPT_PYRO_MULTIPART,
	OPT_PYRO_CA,
	OPT_PYRO_PROXY,
	OPT_PYRO_API,
	OPT_FOLLOW_FORKS,
	OPT_CHILDREN,
	OPT_LIVE_HEAP,
	OPT_SORT,
	OPT_BY,
	OPT_LEAKS,
	OPT_AT_PEAK,
	OPT_TEMPORARY,
	OPT_FILE_MODE,
	OPT_ALLOW_SHARED_DIR,
	OPT_CORE,
	OPT_EXE,
	OPT_ON_GROWTH,
	OPT_ON_RSS_GROWTH,
	OPT_ON_PRESSURE,
	OPT_COOLDOWN,
	OPT_NO_OOM,
	OPT_WRAPPER,
	OPT_SELECT,
	OPT_EXCLUDE,
	OPT_MAX_TARGETS,
	OPT_MAX_RSS,
	OPT_MAX_CPU,
	OPT_ROTATE,
	OPT_TEST_ROOT,
};

static const struct option options[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "duration", required_argument, NULL, 'd' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, 'f' },
	{ "sample-type", required_argument, NULL, 't' },
	{ "raw", no_argument, NULL, OPT_RAW },
	{ "ringbuf-size", required_argument, NULL, OPT_RINGBUF },
	{ "jemalloc-layout", required_argument, NULL, OPT_LAYOUT },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "record", required_argument, NULL, OPT_RECORD },
	{ "from", required_argument, NULL, OPT_FROM },
	{ "to", required_argument, NULL, OPT_TO },
	{ "binary-path", required_argument, NULL, OPT_BINARY_PATH },
	{ "reset", no_argument, NULL, OPT_RESET },
	{ "unit", required_argument, NULL, OPT_UNIT },
	{ "pidfile", required_argument, NULL, OPT_PIDFILE },
	{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
	{ "compress", required_argument, NULL, OPT_COMPRESS },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "pyroscope", required_argument, NULL, OPT_PYROSCOPE },
	{ "service-name", required_argument, NULL, OPT_SERVICE_NAME },
	{ "label", required_argument, NULL, OPT_LABEL },
	{ "spool-dir", required_argument, NULL, OPT_SPOOL_DIR },
	{ "spool-keep", required_argument, NULL, OPT_SPOOL_KEEP },
	{ "spool-max-bytes", required_argument, NULL, OPT_SPOOL_MAX_BYTES },
	{ "pyroscope-timeout", required_argument, NULL, OPT_PYRO_TIMEOUT },
	{ "pyroscope-retries", required_argument, NULL, OPT_PYRO_RETRIES },
	{ "pyroscope-multipart", no_argument, NULL, OPT_PYRO_MULTIPART },
	{ "pyroscope-ca", required_argument, NULL, OPT_PYRO_CA },
	{ "pyroscope-proxy", required_argument, NULL, OPT_PYRO_PROXY },
	{ "pyroscope-api", required_argument, NULL, OPT_PYRO_API },
	{ "follow-forks", no_argument, NULL, OPT_FOLLOW_FORKS },
	{ "children", no_argument, NULL, OPT_CHILDREN },
	{ "live-heap", no_argument, NULL, OPT_LIVE_HEAP },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "by", required_argument, NULL, OPT_BY },
	{ "leaks", no_argument, NULL, OPT_LEAKS },
	{ "at-peak", required_argument, NULL, OPT_AT_PEAK },
	{ "temporary-threshold", required_argument, NULL, OPT_TEMPORARY },
	{ "file-mode", required_argument, NULL, OPT_FILE_MODE },
	{ "allow-shared-dir", no_argument, NULL, OPT_ALLOW_SHARED_DIR },
	{ "core", no_argument, NULL, OPT_CORE },
	{ "exe", required_argument, NULL, OPT_EXE },
	{ "on-growth", required_argument, NULL, OPT_ON_GROWTH },
	{ "on-rss-growth", required_argument, NULL, OPT_ON_RSS_GROWTH },
	{ "on-pressure", no_argument, NULL, OPT_ON_PRESSURE },
	{ "cooldown", required_argument, NULL, OPT_COOLDOWN },
	{ "no-oom", no_argument, NULL, OPT_NO_OOM },
	{ "wrapper", required_argument, NULL, OPT_WRAPPER },
	{ "select", required_argument, NULL, OPT_SELECT },
	{ "exclude", required_argument, NULL, OPT_EXCLUDE },
	{ "max-targets", required_argument, NULL, OPT_MAX_TARGETS },
	{ "max-rss", required_argument, NULL, OPT_MAX_RSS },
	{ "max-cpu", required_argument, NULL, OPT_MAX_CPU },
	{ "rotate", required_argument, NULL, OPT_ROTATE },
	{ "test-root", required_argument, NULL, OPT_TEST_ROOT },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{},
};

int cli_bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "heapbpf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see heapbpf --help)\n");
	return -EINVAL;
}

/* The option as typed: a long one from argv, a short one (maybe inside a group) from optopt. */
static const char *opt_name(const char *arg, int opt, char buf[3])
{
	if (strncmp(arg, "--", 2) == 0 || opt <= 0 || opt > 127)
		return arg;
	buf[0] = '-';
	buf[1] = (char)opt;
	buf[2] = '\0';
	return buf;
}

/*
 * --pid N, or N,N,... (the last --pid wins): every pid in c->run.pids once (a pid
 * named twice is one target), the first also in c->run.pid.
 */
static bool pid_listed(const struct cli *c, pid_t pid)
{
	for (int i = 0; i < c->run.npids; i++) {
		if (c->run.pids[i] == pid)
			return true;
	}
	return false;
}

static int add_pids(struct cli *c, const char *arg)
{
	char buf[32];
	long v;

	c->run.npids = 0;
	for (const char *p = arg;; p += strcspn(p, ",") + 1) {
		size_t n = strcspn(p, ",");

		if (!n || n >= sizeof(buf) || c->run.npids == RUN_MAX_PIDS)
			return -1;
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (values_long(buf, 1, INT_MAX, &v))
			return -1;
		if (!pid_listed(c, (pid_t)v))
			c->run.pids[c->run.npids++] = (pid_t)v;
		if (!p[n])
			break;
	}
	c->run.pid = c->run.pids[0];
	return 0;
}

/* --debug-dir DIR, repeatable: every DIR joined by ':' in c->debug_dirs. */
static int add_debug_dir(struct cli *c, const char *arg)
{
	size_t n = (c->debug_dirs ? strlen(c->debug_dirs) + 1 : 0) + strlen(arg) + 1;
	char *d;

	if (arg[0] != '/' || strchr(arg, ':'))
		return cli_bad("--debug-dir needs an absolute directory without ':', not \"%s\"",
			       arg);
	d = malloc(n);
	if (!d)
		return cli_bad("out of memory");
	snprintf(d, n, "%s%s%s", c->debug_dirs ? c->debug_dirs : "", c->debug_dirs ? ":" : "", arg);
	free(c->debug_dirs);
	c->debug_dirs = d;
	return 0;
}

/*
 * The options, in groups: each group's function sets what one option of its
 * group says (0), refuses its value (-EINVAL), or answers NOT_MINE.
 */
#define NOT_MINE 2

/* The target and the run: -p, -d, what a live run does besides, top's keys, -q, -v. */
static int run_option(struct cli *c, struct cli_given *g, int opt, const char *arg)
{
	switch (opt) {
	case 'p':
		if (add_pids(c, arg))
			return cli_bad(
				"--pid needs positive process ids (N or N,N,...), not \"%s\"", arg);
		g->pid = true;
		break;
	case 'd':
		if (values_seconds(arg, &c->run.duration))
			return cli_bad("--duration needs seconds between 0 and 2678400, not \"%s\"",
				       arg);
		g->duration = true;
		break;
	case OPT_RECORD:
		if (!arg[0])
			return cli_bad("--record needs a file name");
		c->run.record = arg;
		break;
	case OPT_RINGBUF:
		if (values_size(arg, &c->run.ringbuf_bytes))
			return cli_bad(
				"--ringbuf-size needs 16k to 1024m (a number is MiB), not \"%s\"",
				arg);
		break;
	case OPT_RESET:
		c->run.reset = true;
		break;
	case OPT_FOLLOW_FORKS:
		c->run.follow_forks = true;
		break;
	case OPT_CHILDREN:
		c->run.children = true;
		break;
	case OPT_LIVE_HEAP:
		c->run.live_heap = true;
		break;
	case OPT_SORT:
		if (topview_sort_parse(arg, &c->run.top_sort))
			return cli_bad("unknown --sort \"%s\"; use growth, alloc or inuse", arg);
		g->top = true;
		break;
	case OPT_BY:
		if (topview_by_parse(arg, &c->run.top_by))
			return cli_bad("unknown --by \"%s\"; use site, function or file", arg);
		g->top = true;
		break;
	case 'q':
		c->run.quiet = true;
		break;
	case 'v':
		c->run.verbose = true;
		break;
	default:
		return NOT_MINE;
	}
	return 0;
}

/* -f FORMAT; every one given in c->run.formats: two of them only with --output-dir. */
static int set_format(struct cli *c, const char *arg)
{
	if (c->mode == MODE_RSS) {
		if (strcmp(arg, "text") != 0 && strcmp(arg, "json") != 0)
			return cli_bad("unknown --format \"%s\" for rss; use text or json", arg);
		c->rss_json = strcmp(arg, "json") == 0;
		return 0;
	}
	c->output_set = true;
	if (strcmp(arg, "pprof") == 0)
		c->run.format = FMT_PPROF;
	else if (strcmp(arg, "folded") == 0)
		c->run.format = FMT_FOLDED;
	else if (strcmp(arg, "html") == 0)
		c->run.format = FMT_HTML;
	else
		return cli_bad("unknown --format \"%s\"; use pprof, folded or html", arg);
	c->run.formats |= 1u << c->run.format;
	return 0;
}

/*
 * --wrapper NAME, repeatable: an exact function name or an fnmatch(3) glob.
 * A pattern of nothing but '*' would make every frame a wrapper.
 */
static int add_wrapper(struct cli *c, const char *arg)
{
	if (!arg[0])
		return cli_bad("--wrapper needs a function name or a glob pattern");
	if (strspn(arg, "*") == strlen(arg))
		return cli_bad(
			"--wrapper \"%s\" would make every function a wrapper; give a name or "
			"a narrower pattern",
			arg);
	if (c->run.nwrappers == RUN_MAX_WRAPPERS)
		return cli_bad("at most %d --wrapper options", RUN_MAX_WRAPPERS);
	c->run.wrappers[c->run.nwrappers++] = arg;
	return 0;
}

/* What is written and how: -o, -f, -t, --raw, the reports beside the profile, the files' mode. */
static int output_option(struct cli *c, struct cli_given *g, int opt, const char *arg)
{
	switch (opt) {
	case 'o':
		if (!arg[0])
			return cli_bad("--output needs a file name");
		c->run.output = arg;
		c->output_set = true;
		break;
	case 'f':
		return set_format(c, arg);
	case 't':
		if (hb_value_parse(arg, &c->run.sample_type))
			return cli_bad(
				"unknown --sample-type \"%s\"; use inuse_space, inuse_objects, "
				"alloc_space or alloc_objects",
				arg);
		g->type = true;
		break;
	case OPT_RAW:
		c->run.raw = true;
		break;
	case OPT_LEAKS:
		c->run.leaks = true;
		break;
	case OPT_AT_PEAK:
		if (!arg[0])
			return cli_bad("--at-peak needs a file name");
		c->run.at_peak = arg;
		break;
	case OPT_TEMPORARY:
		if (values_duration_ns(arg, &c->run.temporary_ns) || !c->run.temporary_ns)
			return cli_bad(
				"--temporary-threshold needs a time like 1ms, 250us or 2s (above 0, "
				"at most a day), not \"%s\"",
				arg);
		break;
	case OPT_FILE_MODE:
		if (values_file_mode(arg, &c->file_mode))
			return cli_bad(
				"--file-mode needs an octal mode of read and write bits that lets "
				"the owner read and write, like 0600, 0640 or 0644, not \"%s\"",
				arg);
		break;
	case OPT_ALLOW_SHARED_DIR:
		c->allow_shared_dir = true;
		break;
	case OPT_WRAPPER:
		return add_wrapper(c, arg);
	default:
		return NOT_MINE;
	}
	return 0;
}

/* What is read and where its symbols are: report's and diff's inputs, the debug info, jemalloc. */
static int source_option(struct cli *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_FROM:
	case OPT_TO:
		if (values_seconds(arg, opt == OPT_FROM ? &c->from : &c->to))
			return cli_bad("--from and --to need seconds from the start, not \"%s\"",
				       arg);
		break;
	case OPT_BINARY_PATH:
		if (c->nbinary_dirs == CLI_MAX_DIRS)
			return cli_bad("at most 16 --binary-path directories");
		c->binary_dirs[c->nbinary_dirs++] = arg;
		break;
	case OPT_CORE:
		c->core = true;
		break;
	case OPT_EXE:
		c->exe = arg;
		break;
	case OPT_DEBUG_DIR:
		return add_debug_dir(c, arg);
	case OPT_LAYOUT:
		c->run.layout = arg;
		break;
	default:
		return NOT_MINE;
	}
	return 0;
}

/*
 * Fleet use: the targets, snapshots and their retention, the spool's. typed
 * is argv[optind - 1], what names a directory option left empty.
 */
static int fleet_option(struct cli *c, int opt, const char *arg, const char *typed)
{
	uint64_t *bytes;
	long v;

	switch (opt) {
	case OPT_UNIT:
		if (!arg[0])
			return cli_bad("--unit needs a unit name");
		c->run.unit = arg;
		break;
	case OPT_PIDFILE:
		if (!arg[0])
			return cli_bad("--pidfile needs a file name");
		c->run.pidfile = arg;
		break;
	case OPT_OUTPUT_DIR:
	case OPT_SPOOL_DIR:
		if (!arg[0])
			return cli_bad("%s needs a directory", typed);
		*(opt == OPT_OUTPUT_DIR ? &c->run.output_dir : &c->run.spool_dir) = arg;
		break;
	case OPT_KEEP:
	case OPT_SPOOL_KEEP:
		if (values_long(arg, 1, 1000000, &v))
			return cli_bad(
				"--keep and --spool-keep need a count from 1 to 1000000, not \"%s\"",
				arg);
		*(opt == OPT_KEEP ? &c->run.keep : &c->run.spool_keep) = v;
		break;
	case OPT_MAX_BYTES:
	case OPT_SPOOL_MAX_BYTES:
		bytes = opt == OPT_MAX_BYTES ? &c->run.max_bytes : &c->run.spool_max_bytes;
		if (values_bytes(arg, bytes) || !*bytes)
			return cli_bad(
				"--max-bytes and --spool-max-bytes need a size like 512K, 64M or "
				"2G, not \"%s\"",
				arg);
		break;
	case OPT_COMPRESS:
		if (strcmp(arg, "zstd") != 0)
			return cli_bad("unknown --compress \"%s\"; use zstd", arg);
		c->run.zstd = true;
		break;
	case OPT_INTERVAL:
		if (values_long(arg, 1, 31 * 24 * 3600, &v))
			return cli_bad(
				"--interval needs whole seconds from 1 to 2678400, not \"%s\"",
				arg);
		c->run.interval = v;
		break;
	default:
		return NOT_MINE;
	}
	return 0;
}

/* --pyroscope and how its profiles are pushed. */
static int pyroscope_option(struct cli *c, int opt, const char *arg)
{
	long v;

	switch (opt) {
	case OPT_PYROSCOPE:
		if (!arg[0])
			return cli_bad("--pyroscope needs a URL");
		c->run.pyroscope = arg;
		break;
	case OPT_SERVICE_NAME:
		c->run.service_name = arg;
		break;
	case OPT_LABEL:
		if (c->run.nlabels == RUN_MAX_LABELS)
			return cli_bad("at most 16 --label options");
		if (!strchr(arg, '='))
			return cli_bad("--label needs KEY=VALUE, not \"%s\"", arg);
		c->run.labels[c->run.nlabels++] = arg;
		break;
	case OPT_PYRO_TIMEOUT:
		if (values_seconds(arg, &c->run.pyro_timeout) || c->run.pyro_timeout < 0.1 ||
		    c->run.pyro_timeout > 600)
			return cli_bad(
				"--pyroscope-timeout needs seconds from 0.1 to 600, not \"%s\"",
				arg);
		break;
	case OPT_PYRO_RETRIES:
		if (values_long(arg, 0, 10, &v))
			return cli_bad("--pyroscope-retries needs a count from 0 to 10, not \"%s\"",
				       arg);
		c->run.pyro_retries = v;
		break;
	case OPT_PYRO_MULTIPART:
		c->run.pyro_multipart = true;
		break;
	case OPT_PYRO_CA:
		c->run.pyro_ca = arg;
		break;
	case OPT_PYRO_PROXY:
		c->run.pyro_proxy = arg;
		break;
	case OPT_PYRO_API:
		if (strcmp(arg, "push") != 0 && strcmp(arg, "ingest") != 0)
			return cli_bad("unknown --pyroscope-api \"%s\"; use push or ingest", arg);
		c->pyro_api = true;
		c->run.pyro_ingest = strcmp(arg, "ingest") == 0;
		break;
	default:
		return NOT_MINE;
	}
	return 0;
}

/* One option getopt_long returned: 0, 1 after help or the version, or -EINVAL. */
/* heapbpf watch's triggers. */
static int watch_option(struct cli *c, struct cli_given *g, int opt, const char *arg)
{
	switch (opt) {
	case OPT_ON_GROWTH:
	case OPT_ON_RSS_GROWTH:
		if (values_bytes(arg, opt == OPT_ON_GROWTH ? &c->run.watch_growth
							   : &c->run.watch_rss_growth) ||
		    !(opt == OPT_ON_GROWTH ? c->run.watch_growth : c->run.watch_rss_growth))
			return cli_bad("%s needs a size like 64M or 1G, not \"%s\"",
				       opt == OPT_ON_GROWTH ? "--on-growth" : "--on-rss-growth",
				       arg);
		break;
	case OPT_ON_PRESSURE:
		c->run.watch_pressure = true;
		break;
	case OPT_COOLDOWN:
		if (values_seconds(arg, &c->run.watch_cooldown) || c->run.watch_cooldown < 1)
			return cli_bad("--cooldown needs seconds from 1 to 2678400, not \"%s\"",
				       arg);
		break;
	case OPT_NO_OOM:
		c->run.watch_no_oom = true;
		break;
	default:
		return NOT_MINE;
	}
	g->watch = true;
	return 0;
}

/* heapbpf agent's selection and budget. */
static int agent_option(struct cli *c, struct cli_given *g, int opt, const char *arg)
{
	long v;

	switch (opt) {
	case OPT_SELECT:
	case OPT_EXCLUDE:
		if (!arg[0] || !strchr(arg, '='))
			return cli_bad("%s needs KEY=VALUE[,KEY=VALUE...], not \"%s\"",
				       opt == OPT_SELECT ? "--select" : "--exclude", arg);
		if ((opt == OPT_SELECT ? c->run.nselect : c->run.nexclude) == RUN_MAX_RULES)
			return cli_bad("at most %d --select and %d --exclude rules", RUN_MAX_RULES,
				       RUN_MAX_RULES);
		if (opt == OPT_SELECT)
			c->run.select_rules[c->run.nselect++] = arg;
		else
			c->run.exclude_rules[c->run.nexclude++] = arg;
		break;
	case OPT_MAX_TARGETS:
		if (values_long(arg, 1, 1024, &v))
			return cli_bad("--max-targets needs a count from 1 to 1024, not \"%s\"",
				       arg);
		c->run.max_targets = (unsigned long)v;
		break;
	case OPT_MAX_RSS:
		if (values_bytes(arg, &c->run.max_rss) || c->run.max_rss < (32ULL << 20))
			return cli_bad(
				"--max-rss needs a size of 32M or more, like 512M, not \"%s\"",
				arg);
		break;
	case OPT_MAX_CPU:
		if (values_seconds(arg, &c->run.max_cpu) || c->run.max_cpu < 0.1 ||
		    c->run.max_cpu > 100)
			return cli_bad(
				"--max-cpu needs a percentage of one core from 0.1 to 100, not "
				"\"%s\"",
				arg);
		break;
	case OPT_ROTATE:
		if (values_long(arg, 1, 31 * 24 * 3600, &v))
			return cli_bad("--rotate needs whole seconds from 1 to 2678400, not \"%s\"",
				       arg);
		c->run.rotate = (double)v;
		break;
	case OPT_TEST_ROOT:
		if (arg[0] != '/')
			return cli_bad("--test-root needs an absolute directory, not \"%s\"", arg);
		c->run.test_root = arg;
		break;
	default:
		return NOT_MINE;
	}
	g->agent = true;
	return 0;
}

static int parse_option(int opt, char **argv, struct cli *c, struct cli_given *g)
{
	char name[3];
	int rc;

	rc = run_option(c, g, opt, optarg);
	if (rc == NOT_MINE)
		rc = output_option(c, g, opt, optarg);
	if (rc == NOT_MINE)
		rc = source_option(c, opt, optarg);
	if (rc == NOT_MINE)
		rc = fleet_option(c, opt, optarg, argv[optind - 1]);
	if (rc == NOT_MINE)
		rc = pyroscope_option(c, opt, optarg);
	if (rc == NOT_MINE)
		rc = watch_option(c, g, opt, optarg);
	if (rc == NOT_MINE)
		rc = agent_option(c, g, opt, optarg);
	if (rc != NOT_MINE)
		return rc;
	switch (opt) {
	case 'h':
		/* the command's own help: main's table holds it */
		c->help = true;
		return 1;
	case OPT_VERSION:
		printf("heapbpf %s\n", HEAPBPF_VERSION);
		return 1;
	case ':':
		return cli_bad("option %s needs a value", opt_name(argv[optind - 1], optopt, name));
	default:
		return cli_bad("unknown option %s", opt_name(argv[optind - 1], optopt, name));
	}
}

/*
 * Every option, whatever the command (each command's parser refuses those
 * that do not apply to it); the operands are left at argv[optind...].
 */
static int parse_options(int argc, char **argv, struct cli *c, struct cli_given *g)
{
	int opt, rc;

	optind = 0; /* 0, not 1: glibc then also resets its state inside an option group */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":p:d:o:f:t:qvh", options, NULL)) != -1) {
		rc = parse_option(opt, argv, c, g);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * "heapbpf report|top|diff|watch|agent|status|rss ...": the command of
 * that name, taken off argv; else the one without a name (a live run).
 */
static const struct cli_command *take_command(int *argc, char ***argv,
					      const struct cli_command *cmds, size_t n)
{
	const struct cli_command *unnamed = NULL;

	for (size_t i = 0; i < n; i++) {
		if (!cmds[i].name) {
			unnamed = &cmds[i];
		} else if (*argc >= 2 && strcmp((*argv)[1], cmds[i].name) == 0) {
			(*argc)--;
			(*argv)++;
			return &cmds[i];
		}
	}
	return unnamed;
}

static const struct cli_command *command_of_mode(enum cli_mode m, const struct cli_command *cmds,
						 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (cmds[i].mode == m)
			return &cmds[i];
	}
	return NULL;
}

static void set_defaults(struct cli *c)
{
	memset(c, 0, sizeof(*c));
	c->to = -1;
	c->run.duration = 10;
	c->run.format = FMT_PPROF;
	c->run.sample_type = HB_INUSE_SPACE;
	/* libbpf maps the data twice, all of it in RSS (docs/analysis.md, Cost) */
	c->run.ringbuf_bytes =
		0; /* the default: RINGBUF_DEFAULT, or RINGBUF_DAEMON with --interval */
	c->run.pyro_timeout = 10;
	c->run.pyro_retries = 3;
	c->run.temporary_ns = 1000000; /* 1 ms */
	c->file_mode = OUTPUT_DEFAULT_MODE;
	c->run.watch_cooldown = 300;
}

int cli_parse(int argc, char **argv, struct cli *c, const struct cli_command *cmds, size_t n,
	      const struct cli_command **cmd)
{
	struct cli_given g = { 0 };
	int rc;

	set_defaults(c);
	*cmd = take_command(&argc, &argv, cmds, n);
	c->mode = c->command = (*cmd)->mode;
	rc = parse_options(argc, argv, c, &g);
	if (!rc && g.watch && c->mode != MODE_WATCH && c->mode != MODE_AGENT)
		rc = cli_bad("--on-growth, --on-rss-growth, --on-pressure, --cooldown and --no-oom "
			     "apply to heapbpf watch and agent");
	if (!rc && g.agent && c->mode != MODE_AGENT)
		rc = cli_bad(
			"--select, --exclude, --max-targets, --max-rss, --max-cpu, --rotate and "
			"--test-root apply to heapbpf agent");
	/* heapbpf --reset with no target: every flag a killed heapbpf left on (the agent's) */
	if (!rc && c->mode == MODE_LIVE && c->run.reset && !g.pid && !c->run.unit &&
	    !c->run.pidfile && command_of_mode(MODE_AGENT, cmds, n)) {
		c->mode = MODE_AGENT;
		*cmd = command_of_mode(MODE_AGENT, cmds, n);
	}
	if (!rc) /* the operands: what getopt_long left at the end of argv */
		rc = (*cmd)->parse(c, &g, argc - optind, argv + optind);
	if (rc)
		return rc;
	/*
	 * A daemon stops reading while it writes a window (symbols, the file, a
	 * Pyroscope upload of up to its --pyroscope-timeout): more room then.
	 */
	if (!c->run.ringbuf_bytes)
		c->run.ringbuf_bytes = c->run.interval || c->run.watch ? RINGBUF_DAEMON
								       : RINGBUF_DEFAULT;
	return 0;
}
