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

/* One sentence on stderr, the way every refused command line ends: exit 2 in main. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "heapbpf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see heapbpf --help)\n");
	return -EINVAL;
}

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
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

/* "512", "64K", "256M", "2G" (powers of 1024) */
static int parse_bytes(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
		shift = 20;
		end++;
		break;
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* "16" (MiB), "512k", "64m": between 16 KiB and 1 GiB. */
static int parse_size(const char *s, size_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 20;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		shift = 10, end++;
	else if (*end == 'm' || *end == 'M')
		end++;
	if (*end || v > (1ULL << 30) >> shift || (v << shift) < (16ULL << 10))
		return -EINVAL;
	*out = (size_t)(v << shift);
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(*out) || *out < 0 || *out > 31 * 24 * 3600.0)
		return -EINVAL;
	return 0;
}

/* "1ms", "250us", "2s", "0.5" (seconds): at most a day, in nanoseconds. */
static int parse_duration_ns(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		double ns;
	} units[] = { { "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "", 1e9 } };
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0 || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			v *= units[i].ns;
			if (v > 86400e9)
				return -EINVAL;
			*out = (uint64_t)llround(v);
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * --file-mode: "600", "0640", "0644": octal, read and write bits only (no
 * execute, setuid, setgid or sticky bit), the owner's read and write included.
 */
static int parse_file_mode(const char *s, mode_t *out)
{
	size_t n = strlen(s);
	unsigned long v;

	if (n < 3 || n > 4 || strspn(s, "01234567") != n)
		return -EINVAL;
	v = strtoul(s, NULL, 8);
	if (v & ~0666ul || (v & 0600) != 0600)
		return -EINVAL;
	*out = (mode_t)v;
	return 0;
}

/*
 * --pid N, or N,N,... (the last --pid wins): every pid in c->pids once (a pid
 * named twice is one target), the first also in c->pid.
 */
static bool pid_listed(const struct cli *c, pid_t pid)
{
	for (int i = 0; i < c->npids; i++) {
		if (c->pids[i] == pid)
			return true;
	}
	return false;
}

static int add_pids(struct cli *c, const char *arg)
{
	char buf[32];
	long v;

	c->npids = 0;
	for (const char *p = arg;; p += strcspn(p, ",") + 1) {
		size_t n = strcspn(p, ",");

		if (!n || n >= sizeof(buf) || c->npids == CLI_MAX_PIDS)
			return -1;
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (parse_long(buf, 1, INT_MAX, &v))
			return -1;
		if (!pid_listed(c, (pid_t)v))
			c->pids[c->npids++] = (pid_t)v;
		if (!p[n])
			break;
	}
	c->pid = c->pids[0];
	return 0;
}

/* --debug-dir DIR, repeatable: every DIR joined by ':' in c->debug_dirs. */
static int add_debug_dir(struct cli *c, const char *arg)
{
	size_t n = (c->debug_dirs ? strlen(c->debug_dirs) + 1 : 0) + strlen(arg) + 1;
	char *d;

	if (arg[0] != '/' || strchr(arg, ':'))
		return bad("--debug-dir needs an absolute directory without ':', not \"%s\"", arg);
	d = malloc(n);
	if (!d)
		return bad("out of memory");
	snprintf(d, n, "%s%s%s", c->debug_dirs ? c->debug_dirs : "", c->debug_dirs ? ":" : "", arg);
	free(c->debug_dirs);
	c->debug_dirs = d;
	return 0;
}

/* What the options said that struct cli's values do not tell, for the checks after them. */
struct given {
	bool pid;      /* --pid */
	bool duration; /* --duration */
	bool type;     /* --sample-type */
	bool top;      /* --sort or --by */
	bool watch;    /* a trigger option of heapbpf watch */
	bool agent;    /* an option of heapbpf agent's */
};

/*
 * The options, in groups: each group's function sets what one option of its
 * group says (0), refuses its value (-EINVAL), or answers NOT_MINE.
 */
#define NOT_MINE 2

/* The target and the run: -p, -d, what a live run does besides, top's keys, -q, -v. */
static int run_option(struct cli *c, struct given *g, int opt, const char *arg)
{
	switch (opt) {
	case 'p':
		if (add_pids(c, arg))
			return bad("--pid needs positive process ids (N or N,N,...), not \"%s\"",
				   arg);
		g->pid = true;
		break;
	case 'd':
		if (parse_seconds(arg, &c->duration))
			return bad("--duration needs seconds between 0 and 2678400, not \"%s\"",
				   arg);
		g->duration = true;
		break;
	case OPT_RECORD:
		if (!arg[0])
			return bad("--record needs a file name");
		c->record = arg;
		break;
	case OPT_RINGBUF:
		if (parse_size(arg, &c->ringbuf_bytes))
			return bad(
				"--ringbuf-size needs 16k to 1024m (a number is MiB), not \"%s\"",
				arg);
		break;
	case OPT_RESET:
		c->reset = true;
		break;
	case OPT_FOLLOW_FORKS:
		c->follow_forks = true;
		break;
	case OPT_CHILDREN:
		c->children = true;
		break;
	case OPT_LIVE_HEAP:
		c->live_heap = true;
		break;
	case OPT_SORT:
		if (topview_sort_parse(arg, &c->top_sort))
			return bad("unknown --sort \"%s\"; use growth, alloc or inuse", arg);
		g->top = true;
		break;
	case OPT_BY:
		if (topview_by_parse(arg, &c->top_by))
			return bad("unknown --by \"%s\"; use site, function or file", arg);
		g->top = true;
		break;
	case 'q':
		c->quiet = true;
		break;
	case 'v':
		c->verbose = true;
		break;
	default:
		return NOT_MINE;
	}
	return 0;
}

/* -f FORMAT; every one given in c->formats: two of them only with --output-dir. */
static int set_format(struct cli *c, const char *arg)
{
	if (c->mode == MODE_RSS) {
		if (strcmp(arg, "text") != 0 && strcmp(arg, "json") != 0)
			return bad("unknown --format \"%s\" for rss; use text or json", arg);
		c->rss_json = strcmp(arg, "json") == 0;
		return 0;
	}
	c->output_set = true;
	if (strcmp(arg, "pprof") == 0)
		c->format = FMT_PPROF;
	else if (strcmp(arg, "folded") == 0)
		c->format = FMT_FOLDED;
	else if (strcmp(arg, "html") == 0)
		c->format = FMT_HTML;
	else
		return bad("unknown --format \"%s\"; use pprof, folded or html", arg);
	c->formats |= 1u << c->format;
	return 0;
}

/*
 * --wrapper NAME, repeatable: an exact function name or an fnmatch(3) glob.
 * A pattern of nothing but '*' would make every frame a wrapper.
 */
static int add_wrapper(struct cli *c, const char *arg)
{
	if (!arg[0])
		return bad("--wrapper needs a function name or a glob pattern");
	if (strspn(arg, "*") == strlen(arg))
		return bad("--wrapper \"%s\" would make every function a wrapper; give a name or "
			   "a narrower pattern",
			   arg);
	if (c->nwrappers == CLI_MAX_WRAPPERS)
		return bad("at most %d --wrapper options", CLI_MAX_WRAPPERS);
	c->wrappers[c->nwrappers++] = arg;
	return 0;
}

/* What is written and how: -o, -f, -t, --raw, the reports beside the profile, the files' mode. */
static int output_option(struct cli *c, struct given *g, int opt, const char *arg)
{
	switch (opt) {
	case 'o':
		if (!arg[0])
			return bad("--output needs a file name");
		c->output = arg;
		c->output_set = true;
		break;
	case 'f':
		return set_format(c, arg);
	case 't':
		if (hb_value_parse(arg, &c->sample_type))
			return bad("unknown --sample-type \"%s\"; use inuse_space, inuse_objects, "
				   "alloc_space or alloc_objects",
				   arg);
		g->type = true;
		break;
	case OPT_RAW:
		c->raw = true;
		break;
	case OPT_LEAKS:
		c->leaks = true;
		break;
	case OPT_AT_PEAK:
		if (!arg[0])
			return bad("--at-peak needs a file name");
		c->at_peak = arg;
		break;
	case OPT_TEMPORARY:
		if (parse_duration_ns(arg, &c->temporary_ns) || !c->temporary_ns)
			return bad(
				"--temporary-threshold needs a time like 1ms, 250us or 2s (above 0, "
				"at most a day), not \"%s\"",
				arg);
		break;
	case OPT_FILE_MODE:
		if (parse_file_mode(arg, &c->file_mode))
			return bad(
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
		if (parse_seconds(arg, opt == OPT_FROM ? &c->from : &c->to))
			return bad("--from and --to need seconds from the start, not \"%s\"", arg);
		break;
	case OPT_BINARY_PATH:
		if (c->nbinary_dirs == CLI_MAX_DIRS)
			return bad("at most 16 --binary-path directories");
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
		c->layout = arg;
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
			return bad("--unit needs a unit name");
		c->unit = arg;
		break;
	case OPT_PIDFILE:
		if (!arg[0])
			return bad("--pidfile needs a file name");
		c->pidfile = arg;
		break;
	case OPT_OUTPUT_DIR:
	case OPT_SPOOL_DIR:
		if (!arg[0])
			return bad("%s needs a directory", typed);
		*(opt == OPT_OUTPUT_DIR ? &c->output_dir : &c->spool_dir) = arg;
		break;
	case OPT_KEEP:
	case OPT_SPOOL_KEEP:
		if (parse_long(arg, 1, 1000000, &v))
			return bad(
				"--keep and --spool-keep need a count from 1 to 1000000, not \"%s\"",
				arg);
		*(opt == OPT_KEEP ? &c->keep : &c->spool_keep) = v;
		break;
	case OPT_MAX_BYTES:
	case OPT_SPOOL_MAX_BYTES:
		bytes = opt == OPT_MAX_BYTES ? &c->max_bytes : &c->spool_max_bytes;
		if (parse_bytes(arg, bytes) || !*bytes)
			return bad(
				"--max-bytes and --spool-max-bytes need a size like 512K, 64M or "
				"2G, not \"%s\"",
				arg);
		break;
	case OPT_COMPRESS:
		if (strcmp(arg, "zstd") != 0)
			return bad("unknown --compress \"%s\"; use zstd", arg);
		c->zstd = true;
		break;
	case OPT_INTERVAL:
		if (parse_long(arg, 1, 31 * 24 * 3600, &v))
			return bad("--interval needs whole seconds from 1 to 2678400, not \"%s\"",
				   arg);
		c->interval = v;
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
			return bad("--pyroscope needs a URL");
		c->pyroscope = arg;
		break;
	case OPT_SERVICE_NAME:
		c->service_name = arg;
		break;
	case OPT_LABEL:
		if (c->nlabels == CLI_MAX_LABELS)
			return bad("at most 16 --label options");
		if (!strchr(arg, '='))
			return bad("--label needs KEY=VALUE, not \"%s\"", arg);
		c->labels[c->nlabels++] = arg;
		break;
	case OPT_PYRO_TIMEOUT:
		if (parse_seconds(arg, &c->pyro_timeout) || c->pyro_timeout < 0.1 ||
		    c->pyro_timeout > 600)
			return bad("--pyroscope-timeout needs seconds from 0.1 to 600, not \"%s\"",
				   arg);
		break;
	case OPT_PYRO_RETRIES:
		if (parse_long(arg, 0, 10, &v))
			return bad("--pyroscope-retries needs a count from 0 to 10, not \"%s\"",
				   arg);
		c->pyro_retries = v;
		break;
	case OPT_PYRO_MULTIPART:
		c->pyro_multipart = true;
		break;
	case OPT_PYRO_CA:
		c->pyro_ca = arg;
		break;
	case OPT_PYRO_PROXY:
		c->pyro_proxy = arg;
		break;
	case OPT_PYRO_API:
		if (strcmp(arg, "push") != 0 && strcmp(arg, "ingest") != 0)
			return bad("unknown --pyroscope-api \"%s\"; use push or ingest", arg);
		c->pyro_api = true;
		c->pyro_ingest = strcmp(arg, "ingest") == 0;
		break;
	default:
		return NOT_MINE;
	}
	return 0;
}

/* One option getopt_long returned: 0, 1 after help or the version, or -EINVAL. */
/* heapbpf watch's triggers. */
static int watch_option(struct cli *c, struct given *g, int opt, const char *arg)
{
	switch (opt) {
	case OPT_ON_GROWTH:
	case OPT_ON_RSS_GROWTH:
		if (parse_bytes(arg,
				opt == OPT_ON_GROWTH ? &c->watch_growth : &c->watch_rss_growth) ||
		    !(opt == OPT_ON_GROWTH ? c->watch_growth : c->watch_rss_growth))
			return bad("%s needs a size like 64M or 1G, not \"%s\"",
				   opt == OPT_ON_GROWTH ? "--on-growth" : "--on-rss-growth", arg);
		break;
	case OPT_ON_PRESSURE:
		c->watch_pressure = true;
		break;
	case OPT_COOLDOWN:
		if (parse_seconds(arg, &c->watch_cooldown) || c->watch_cooldown < 1)
			return bad("--cooldown needs seconds from 1 to 2678400, not \"%s\"", arg);
		break;
	case OPT_NO_OOM:
		c->watch_no_oom = true;
		break;
	default:
		return NOT_MINE;
	}
	g->watch = true;
	return 0;
}

/* heapbpf agent's selection and budget. */
static int agent_option(struct cli *c, struct given *g, int opt, const char *arg)
{
	long v;

	switch (opt) {
	case OPT_SELECT:
	case OPT_EXCLUDE:
		if (!arg[0] || !strchr(arg, '='))
			return bad("%s needs KEY=VALUE[,KEY=VALUE...], not \"%s\"",
				   opt == OPT_SELECT ? "--select" : "--exclude", arg);
		if ((opt == OPT_SELECT ? c->nselect : c->nexclude) == CLI_MAX_RULES)
			return bad("at most %d --select and %d --exclude rules", CLI_MAX_RULES,
				   CLI_MAX_RULES);
		if (opt == OPT_SELECT)
			c->select_rules[c->nselect++] = arg;
		else
			c->exclude_rules[c->nexclude++] = arg;
		break;
	case OPT_MAX_TARGETS:
		if (parse_long(arg, 1, 1024, &v))
			return bad("--max-targets needs a count from 1 to 1024, not \"%s\"", arg);
		c->max_targets = (unsigned long)v;
		break;
	case OPT_MAX_RSS:
		if (parse_bytes(arg, &c->max_rss) || c->max_rss < (32ULL << 20))
			return bad("--max-rss needs a size of 32M or more, like 512M, not \"%s\"",
				   arg);
		break;
	case OPT_MAX_CPU:
		if (parse_seconds(arg, &c->max_cpu) || c->max_cpu < 0.1 || c->max_cpu > 100)
			return bad("--max-cpu needs a percentage of one core from 0.1 to 100, not "
				   "\"%s\"",
				   arg);
		break;
	case OPT_ROTATE:
		if (parse_long(arg, 1, 31 * 24 * 3600, &v))
			return bad("--rotate needs whole seconds from 1 to 2678400, not \"%s\"",
				   arg);
		c->rotate = (double)v;
		break;
	case OPT_TEST_ROOT:
		if (arg[0] != '/')
			return bad("--test-root needs an absolute directory, not \"%s\"", arg);
		c->test_root = arg;
		break;
	default:
		return NOT_MINE;
	}
	g->agent = true;
	return 0;
}

static int parse_option(int opt, char **argv, struct cli *c, struct given *g)
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
		return bad("option %s needs a value", opt_name(argv[optind - 1], optopt, name));
	default:
		return bad("unknown option %s", opt_name(argv[optind - 1], optopt, name));
	}
}

/*
 * Every option, whatever the command (each command's parser refuses those
 * that do not apply to it); the operands are left at argv[optind...].
 */
static int parse_options(int argc, char **argv, struct cli *c, struct given *g)
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

/* --at-peak names one file: one target, one window. */
static int check_at_peak(const struct cli *c)
{
	if (c->at_peak && (c->unit || c->output_dir || c->interval))
		return bad("--at-peak writes one file: it cannot be combined with --unit, "
			   "--output-dir or --interval");
	if (c->at_peak && c->output && strcmp(c->at_peak, c->output) == 0)
		return bad("--at-peak needs a file of its own, not the profile's \"%s\"",
			   c->output);
	return 0;
}

/* A --pid list and an option that names one file or one terminal: known before any process is. */
const char *cli_one_process_option(const struct cli *c)
{
	return c->output	     ? "--output names one file; use --output-dir"
	       : c->record	     ? "--record names one file"
	       : c->at_peak	     ? "--at-peak names one file"
	       : c->mode == MODE_TOP ? "heapbpf top shows one process"
				     : NULL;
}

static int check_one_file(const struct cli *c)
{
	const char *what = cli_one_process_option(c);

	if (c->npids > 1 && what)
		return bad("--pid lists %d processes and %s", c->npids, what);
	return 0;
}

/* --output-dir and what applies to it alone; its formats' default. */
static int check_output_dir(struct cli *c)
{
	if (c->output_dir && c->output)
		return bad("--output-dir names its files itself: drop --output");
	if (!c->output_dir && (c->keep || c->max_bytes || c->zstd))
		return bad("--keep, --max-bytes and --compress apply to --output-dir");
	if (c->output_dir && !c->formats)
		c->formats = 1u << FMT_PPROF;
	if (c->zstd && !(c->formats & (1u << FMT_FOLDED)))
		return bad("--compress zstd applies to --format folded (pprof is gzip-compressed "
			   "already)");
	return 0;
}

/* --interval's windows, and what a recording (of one process, in one window) allows. */
static int check_windows(struct cli *c, bool have_duration)
{
	if (c->interval && !c->output_dir && !c->pyroscope)
		return bad("--interval needs --output-dir or --pyroscope, where the windows go");
	if (c->interval && c->output)
		return bad("--interval writes a file per window: use --output-dir, not --output");
	if (c->follow_forks && c->record)
		return bad("--follow-forks and --record cannot be combined (a recording is of one "
			   "process)");
	if (c->interval && c->record)
		return bad("--interval and --record cannot be combined");
	if (c->interval && !have_duration)
		c->duration = 0;
	if (c->interval && c->duration && c->duration < c->interval)
		return bad("--duration must be at least one --interval");
	return 0;
}

/* A file name that names another format than the run writes: refused, with the two. */
static int check_name_agrees(const struct cli *c, const char *opt, const char *path)
{
	int named = sink_format_of_name(path);

	if (named < 0 || (enum out_format)named == c->format)
		return 0;
	return bad("%s \"%s\" is named for %s but the format is %s: %s .%s", opt, path,
		   sink_format_name((enum out_format)named), sink_format_name(c->format),
		   c->formats ? "drop -f, or end the name in" : "end the name in",
		   sink_extension(c->format, false));
}

/*
 * The format of the one file written: -f, else the one -o's name ends in
 * (heap.html: html; any other name: pprof). Two formats need --output-dir;
 * a -f, or --at-peak's name, that disagrees with -o's name is refused.
 */
static int resolve_format(struct cli *c)
{
	unsigned int given = c->formats;
	int named = c->output ? sink_format_of_name(c->output) : -1;

	if (c->output_dir)
		return 0;
	if (given & (given - 1)) {
		enum out_format a = FMT_PPROF, b;

		while (!(given & (1u << a)))
			a++;
		for (b = a + 1; !(given & (1u << b)); b++)
			;
		return bad("-f %s and -f %s: one file takes one format; give one -f, or "
			   "--output-dir DIR for a file per format",
			   sink_format_name(a), sink_format_name(b));
	}
	if (!given && named >= 0)
		c->format = (enum out_format)named;
	return (c->output ? check_name_agrees(c, "--output", c->output) : 0)
		       ?: (c->at_peak ? check_name_agrees(c, "--at-peak", c->at_peak) : 0);
}

/* The options that do not go together, and the defaults that depend on others. */
static int check_combinations(struct cli *c, bool have_type, bool have_duration)
{
	int rc = resolve_format(c) ?: check_output_dir(c) ?: check_windows(c, have_duration);

	if (rc)
		return rc;
	if (!c->pyroscope &&
	    (c->service_name || c->nlabels || c->spool_dir || c->spool_keep || c->spool_max_bytes ||
	     c->pyro_multipart || c->pyro_ca || c->pyro_proxy || c->pyro_api))
		return bad("--service-name, --label, --spool-* and --pyroscope-* apply to "
			   "--pyroscope");
	if (have_type && !(c->output_dir ? c->formats & (1u << FMT_FOLDED | 1u << FMT_HTML)
					 : c->format == FMT_FOLDED || c->format == FMT_HTML))
		return bad("--sample-type applies to --format folded and html (pprof carries all "
			   "four)");
	return 0;
}

/*
 * What each command accepts. The options are read alike for all commands
 * (parse_options); what one command refuses, each command's parser checks
 * (parse_live, parse_top, parse_report, parse_diff), with these refusals
 * that several commands share, in the order that decides which sentence a
 * command line with several faults gets.
 */

/* The operands left once a command took its own: none. */
static int check_no_operand(int n, char **operands)
{
	return n > 0 ? bad("unexpected argument \"%s\"", operands[0]) : 0;
}

/* report's and diff's inputs, refused by a live run and top. */
static int refuse_input_options(const struct cli *c)
{
	if (c->core || c->exe)
		return bad("--core and --exe apply to heapbpf report of a core file");
	if (c->nbinary_dirs || c->from || c->to >= 0)
		return bad("--from, --to and --binary-path apply to heapbpf report and diff");
	return 0;
}

/* --live-heap, refused by report, top and diff. */
static int refuse_live_heap(const struct cli *c)
{
	if (c->live_heap)
		return bad("--live-heap reads a running process: it does not apply to report, top "
			   "or diff");
	return 0;
}

/* --sort and --by, refused by all but top. */
static int refuse_top_keys(const struct given *g)
{
	return g->top ? bad("--sort and --by apply to heapbpf top") : 0;
}

/* The fleet options, refused by report and diff. */
static int refuse_fleet_options(const struct cli *c)
{
	if (c->unit || c->pidfile || c->output_dir || c->interval || c->pyroscope || c->keep ||
	    c->max_bytes || c->zstd || c->nlabels || c->spool_dir)
		return bad("report and diff write one profile: the fleet options (--unit, "
			   "--output-dir, --interval, --pyroscope, ...) apply to live runs");
	return 0;
}

/* A live run's and top's target: one of --pid, --unit and --pidfile. */
static int check_target(const struct cli *c, const struct given *g)
{
	if (g->pid + !!c->unit + !!c->pidfile > 1)
		return bad("give one of --pid, --unit and --pidfile");
	if (!g->pid && !c->unit && !c->pidfile)
		return bad("--pid is required (or --unit NAME, or --pidfile PATH)");
	if (c->children && c->unit)
		return bad("--children applies to --pid and --pidfile: --unit profiles every "
			   "process of the unit already");
	return 0;
}

/* --live-heap: one process, read once, nothing sampled. */
static int check_live_heap(const struct cli *c, const struct given *g)
{
	if (!c->live_heap)
		return 0;
	if (!g->pid || c->npids > 1)
		return bad("--live-heap reads one process: give one --pid");
	if (c->children)
		return bad("--live-heap reads one process: --children does not apply");
	if (g->duration || c->interval || c->follow_forks || c->record || c->leaks || c->at_peak ||
	    c->output_dir || c->pyroscope || c->reset)
		return bad("--live-heap reads jemalloc's tables once and samples nothing: "
			   "--duration, --interval, --follow-forks, --record, --leaks, --at-peak, "
			   "--output-dir, --pyroscope and --reset do not apply");
	return 0;
}

/* heapbpf --pid N: a live run (or, --live-heap, one read of jemalloc's tables). */
static int parse_live(struct cli *c, const struct given *g, int n, char **operands)
{
	return refuse_input_options(c) ?: check_no_operand(n, operands) ?: check_live_heap(c, g)
		       ?: refuse_top_keys(g) ?: check_at_peak(c) ?: check_one_file(c)
		       ?: check_target(c, g)
		       ?: check_combinations(c, g->type, g->duration);
}

/* heapbpf top --pid N: one process as it runs, on the terminal, until stopped by default. */
static int parse_top(struct cli *c, const struct given *g, int n, char **operands)
{
	int rc = refuse_input_options(c) ?: check_no_operand(n, operands) ?: refuse_live_heap(c);

	if (rc)
		return rc;
	if (c->unit || c->output_dir || c->interval || c->pyroscope || c->record || c->reset ||
	    c->follow_forks || c->children)
		return bad("heapbpf top shows one process as it runs: --unit, --output-dir, "
			   "--interval, --pyroscope, --record, --reset, --follow-forks and "
			   "--children do not apply");
	if (c->leaks || c->at_peak)
		return bad(
			"heapbpf top shows the sites as they run: --leaks and --at-peak apply to "
			"profiles");
	if (c->output && strcmp(c->output, "-") == 0)
		return bad("heapbpf top draws on stdout: give -o a file name, not \"%s\"",
			   c->output);
	if (!g->duration)
		c->duration = 0;
	return check_at_peak(c) ?: check_one_file(c) ?: check_target(c, g)
		       ?: check_combinations(c, g->type, g->duration);
}

/* heapbpf report FILE: a recording or a core file, offline. */
static int parse_report(struct cli *c, const struct given *g, int n, char **operands)
{
	if (n < 1)
		return bad("report needs a recording file");
	c->recording = operands[0];
	/* --jemalloc-layout: for a core file (main tells a recording) */
	if (g->pid || g->duration || c->record || c->reset || c->follow_forks || c->children)
		return bad("report reads a recording or a core file: --pid, --duration, --record, "
			   "--follow-forks and --children do not apply");
	if (c->to >= 0 && c->to <= c->from)
		return bad("--to must be after --from");
	return check_no_operand(n - 1, operands + 1) ?: refuse_live_heap(c) ?: refuse_top_keys(g)
		       ?: check_at_peak(c) ?: refuse_fleet_options(c)
		       ?: check_combinations(c, g->type, g->duration);
}

/*
 * heapbpf diff BASE NEW: two profiles compared. -t is the type its summary
 * ranks the changes by (and the one folded and html carry), whatever the
 * format: never refused.
 */
static int parse_diff(struct cli *c, const struct given *g, int n, char **operands)
{
	int rc;

	if (n < 2)
		return bad("diff needs two profiles: BASE and NEW");
	c->diff_paths[0] = operands[0];
	c->diff_paths[1] = operands[1];
	if (g->pid || g->duration || c->record || c->layout || c->reset || c->follow_forks ||
	    c->children || c->from || c->to >= 0 || c->raw)
		return bad("diff compares two profiles: --pid, --duration, --record, "
			   "--follow-forks, --children, --jemalloc-layout, --from, --to and --raw "
			   "do not apply");
	rc = resolve_format(c);
	if (rc)
		return rc;
	return check_no_operand(n - 2, operands + 2) ?: refuse_live_heap(c) ?: refuse_top_keys(g)
		       ?: check_at_peak(c) ?: refuse_fleet_options(c)
		       ?: check_combinations(c, false, g->duration);
}

/*
 * heapbpf watch --pid N: stays attached until stopped, and writes an in-use
 * profile when a trigger fires (user/watch.c); then run as a live run.
 */
static int parse_watch(struct cli *c, const struct given *g, int n, char **operands)
{
	int rc = refuse_input_options(c) ?: check_no_operand(n, operands) ?: refuse_live_heap(c)
			 ?: refuse_top_keys(g) ?: check_target(c, g);

	if (rc)
		return rc;
	/* a restarted manager is waited for by its pid file; its children are not */
	if (c->children)
		return bad("heapbpf watch follows one process of a pid file, or a unit: --children "
			   "does not apply (--unit takes every process of a service)");
	if (c->output || c->interval || c->record || c->at_peak || c->reset)
		return bad("heapbpf watch writes a profile per trigger into --output-dir or to "
			   "--pyroscope: --output, --interval, --record, --at-peak and --reset do "
			   "not apply");
	if (!c->output_dir && !c->pyroscope)
		return bad(
			"heapbpf watch needs --output-dir or --pyroscope, where its profiles go");
	if (!g->duration)
		c->duration = 0;
	c->watch = true;
	c->mode = MODE_LIVE;
	return check_combinations(c, g->type, g->duration);
}

/*
 * heapbpf agent: every selected jemalloc process of the node, watched, in
 * windows; or, with --reset, the flags every killed heapbpf left on.
 */
static int parse_agent(struct cli *c, const struct given *g, int n, char **operands)
{
	int rc = refuse_input_options(c) ?: check_no_operand(n, operands) ?: refuse_live_heap(c)
			 ?: refuse_top_keys(g);

	if (rc)
		return rc;
	if (g->pid || c->unit || c->pidfile || c->children)
		return bad("heapbpf agent finds its processes itself: --pid, --unit, --pidfile and "
			   "--children do not apply (use --select)");
	if (c->reset)
		return 0;
	if (c->output || c->record || c->at_peak || c->follow_forks || c->leaks)
		return bad(
			"heapbpf agent writes windows into --output-dir or to --pyroscope: "
			"--output, --record, --at-peak, --follow-forks and --leaks do not apply");
	if (c->service_name)
		return bad("heapbpf agent names each process's service: give service_name= in a "
			   "--select rule instead of --service-name");
	if (!c->output_dir && !c->pyroscope)
		return bad("heapbpf agent needs --output-dir or --pyroscope, where its profiles "
			   "go");
	if (!c->interval)
		c->interval = 60;
	if (!c->max_targets)
		c->max_targets = 16;
	if (!c->max_rss)
		c->max_rss = 512ULL << 20;
	if (!c->max_cpu)
		c->max_cpu = 50;
	if (!c->rotate)
		c->rotate = 3 * c->interval;
	if (!g->duration)
		c->duration = 0;
	c->watch = true;
	return check_combinations(c, g->type, true);
}

/* heapbpf status: every heapbpf on the host; nothing to choose. */
static int parse_status(struct cli *c, const struct given *g, int n, char **operands)
{
	if (n)
		return check_no_operand(n, operands);
	if (g->pid || g->duration || c->output_set || c->output_dir || c->record || c->unit ||
	    c->pidfile || c->pyroscope || c->reset || c->interval || c->live_heap)
		return bad("status lists every heapbpf running on the host: it takes no option "
			   "but -q");
	return 0;
}

/*
 * heapbpf rss --pid N: one read of where the process's RSS is; nothing
 * sampled, nothing written but to stdout.
 */
static int parse_rss(struct cli *c, const struct given *g, int n, char **operands)
{
	if (n)
		return check_no_operand(n, operands);
	if (g->duration || c->output_dir || c->record || c->pyroscope || c->reset || c->interval ||
	    c->live_heap || c->follow_forks || c->children || c->leaks || c->at_peak || g->type)
		return bad("heapbpf rss reads the process once and prints to stdout: it takes "
			   "--pid, --unit or --pidfile, --format text|json, -o FILE.pb.gz and -q");
	if (c->npids > 1)
		return bad("heapbpf rss reads one process: give one --pid");
	if (c->output && (strcmp(c->output, "-") == 0 || c->unit))
		return bad(
			"heapbpf rss writes its profile (-o) for one process into a file: give a "
			"file name, and --pid or --pidfile");
	return check_target(c, g);
}

/* "heapbpf report|top|diff|watch|agent|status|rss ...": the command, taken off argv; else a live run. */
static enum cli_mode take_command(int *argc, char ***argv)
{
	static const char *const names[] = {
		[MODE_REPORT] = "report", [MODE_TOP] = "top",	  [MODE_DIFF] = "diff",
		[MODE_WATCH] = "watch",	  [MODE_AGENT] = "agent", [MODE_STATUS] = "status",
		[MODE_RSS] = "rss",
	};

	if (*argc < 2)
		return MODE_LIVE;
	for (enum cli_mode m = MODE_REPORT; m <= MODE_RSS; m++) {
		if (strcmp((*argv)[1], names[m]) == 0) {
			(*argc)--;
			(*argv)++;
			return m;
		}
	}
	return MODE_LIVE;
}

static void set_defaults(struct cli *c)
{
	memset(c, 0, sizeof(*c));
	c->to = -1;
	c->duration = 10;
	c->format = FMT_PPROF;
	c->sample_type = HB_INUSE_SPACE;
	/* libbpf maps the data twice, all of it in RSS (docs/analysis.md, Cost) */
	c->ringbuf_bytes = 0; /* the default: RINGBUF_DEFAULT, or RINGBUF_DAEMON with --interval */
	c->pyro_timeout = 10;
	c->pyro_retries = 3;
	c->temporary_ns = 1000000; /* 1 ms */
	c->file_mode = OUTPUT_DEFAULT_MODE;
	c->watch_cooldown = 300;
}

int cli_parse(int argc, char **argv, struct cli *c)
{
	static int (*const parse_command[])(struct cli *, const struct given *, int, char **) = {
		[MODE_LIVE] = parse_live,     [MODE_REPORT] = parse_report,
		[MODE_TOP] = parse_top,	      [MODE_DIFF] = parse_diff,
		[MODE_WATCH] = parse_watch,   [MODE_AGENT] = parse_agent,
		[MODE_STATUS] = parse_status, [MODE_RSS] = parse_rss,
	};
	struct given g = { 0 };
	int rc;

	set_defaults(c);
	c->mode = c->command = take_command(&argc, &argv);
	rc = parse_options(argc, argv, c, &g);
	if (!rc && g.watch && c->mode != MODE_WATCH && c->mode != MODE_AGENT)
		rc = bad("--on-growth, --on-rss-growth, --on-pressure, --cooldown and --no-oom "
			 "apply to heapbpf watch and agent");
	if (!rc && g.agent && c->mode != MODE_AGENT)
		rc = bad("--select, --exclude, --max-targets, --max-rss, --max-cpu, --rotate and "
			 "--test-root apply to heapbpf agent");
	/* heapbpf --reset with no target: every flag a killed heapbpf left on (agent.c) */
	if (!rc && c->mode == MODE_LIVE && c->reset && !g.pid && !c->unit && !c->pidfile)
		c->mode = MODE_AGENT;
	if (!rc) /* the operands: what getopt_long left at the end of argv */
		rc = parse_command[c->mode](c, &g, argc - optind, argv + optind);
	if (rc)
		return rc;
	/*
	 * A daemon stops reading while it writes a window (symbols, the file, a
	 * Pyroscope upload of up to its --pyroscope-timeout): more room then.
	 */
	if (!c->ringbuf_bytes)
		c->ringbuf_bytes = c->interval || c->watch ? RINGBUF_DAEMON : RINGBUF_DEFAULT;
	return 0;
}
