// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"Usage: heapbpf --pid PID [options]\n"
	"       heapbpf report RECORDING [options]\n"
	"\n"
	"Profiles the heap of a running process that uses jemalloc, from outside: attaches\n"
	"uprobes to jemalloc's sampling path, switches jemalloc's prof_active on for the\n"
	"duration, then switches it back and writes the profile. The process must have been\n"
	"started with jemalloc profiling enabled but idle:\n"
	"    MALLOC_CONF=prof:true,prof_active:false          (C/C++, jemalloc)\n"
	"    _RJEM_MALLOC_CONF=prof:true,prof_active:false    (Rust, tikv-jemallocator)\n"
	"\n"
	"Options:\n"
	"  -p, --pid PID              process to profile (required)\n"
	"  -d, --duration SECONDS     how long to profile (default 10; 0 = until Ctrl-C or SIGTERM)\n"
	"  -o, --output FILE          where to write the profile ('-' = stdout; default\n"
	"                             heapbpf-PID-TIME.pb.gz or .folded in the current directory)\n"
	"  -f, --format FORMAT        pprof (gzip-compressed protobuf, default) or folded\n"
	"  -t, --sample-type TYPE     value written by --format folded: inuse_space (default),\n"
	"                             inuse_objects, alloc_space or alloc_objects\n"
	"      --raw                  raw sampled counts and bytes instead of unbiased estimates\n"
	"                             (to compare sample for sample with jemalloc's own dump)\n"
	"      --ringbuf-size MIB     BPF ring buffer size (default 16)\n"
	"      --jemalloc-layout VER  use this jemalloc version's layout for an unrecognized build\n"
	"      --debug-dir DIR        also look for separate debug info in DIR (a build-id tree\n"
	"                             DIR/.build-id/xx/yyyy.debug, or debuglink files); repeatable.\n"
	"                             /usr/lib/debug, .gnu_debuglink files next to each object and,\n"
	"                             when DEBUGINFOD_URLS is set, debuginfod are always searched\n"
	"      --record FILE          also write every event, with what later reports need, to a\n"
	"                             zstd-compressed recording (a profile is then written only\n"
	"                             with -o or --format)\n"
	"      --reset                only restore prof_active in PID if a heapbpf run that was\n"
	"                             killed (kill -9) left it on; every run also does this first\n"
	"  -q, --quiet                no status line, no summary\n"
	"  -v, --verbose              show libbpf's messages\n"
	"  -h, --help                 this help\n"
	"      --version              print the version\n"
	"\n"
	"Examples:\n"
	"  sudo heapbpf --pid 4242                      # 10 s, pprof to heapbpf-4242-*.pb.gz\n"
	"  sudo heapbpf -p 4242 -d 60 -o heap.pb.gz     # one minute\n"
	"  sudo heapbpf -p 4242 -f folded -t alloc_space -o heap.folded\n"
	"  go tool pprof -http :8080 heap.pb.gz         # look at it\n"
	"  sudo heapbpf -p 4242 -d 60 --record heap.hbr # record now, report later, elsewhere\n"
	"\n"
	"heapbpf report RECORDING: every report of a live run, offline, from a recording.\n"
	"  -o, -f, -t, --raw          as above\n"
	"      --from S, --to S       only events from S to S seconds after the start\n"
	"      --binary-path DIR      look for the recorded binaries (matched by build-id) under\n"
	"                             DIR, as a sysroot or by file name; repeatable. Also searched:\n"
	"                             their recorded paths and, with DEBUGINFOD_URLS, debuginfod\n"
	"      --debug-dir DIR        as above\n"
	"  heapbpf report heap.hbr -f folded -t alloc_space --from 10 --to 20 -o window.folded\n"
	"\n"
	"Exit status: 0 profile written; 1 error; 2 usage; 3 written but no samples;\n"
	"4 written but events were dropped (see the summary).\n";

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
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{},
};

static int bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "heapbpf: ");
	fprintf(stderr, fmt, arg);
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

static int parse_seconds(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(*out) || *out < 0 || *out > 31 * 24 * 3600.0)
		return -EINVAL;
	return 0;
}

int cli_parse(int argc, char **argv, struct cli *c)
{
	bool have_pid = false, have_type = false, have_duration = false;
	char name[3];
	long v;
	int opt;

	memset(c, 0, sizeof(*c));
	c->to = -1;
	/* "heapbpf report FILE ...": options as for a live run, minus the live ones */
	if (argc > 1 && strcmp(argv[1], "report") == 0) {
		c->mode = MODE_REPORT;
		argc--;
		argv++;
	}
	c->duration = 10;
	c->format = FMT_PPROF;
	c->sample_type = HB_INUSE_SPACE;
	c->ringbuf_bytes = 16u << 20;
	optind = 0; /* 0, not 1: glibc then also resets its state inside an option group */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":p:d:o:f:t:qvh", options, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (parse_long(optarg, 1, INT_MAX, &v))
				return bad("--pid needs a positive process id, not \"%s\"", optarg);
			c->pid = v;
			have_pid = true;
			break;
		case 'd':
			if (parse_seconds(optarg, &c->duration))
				return bad(
					"--duration needs seconds between 0 and 2678400, not \"%s\"",
					optarg);
			have_duration = true;
			break;
		case OPT_FROM:
		case OPT_TO:
			if (parse_seconds(optarg, opt == OPT_FROM ? &c->from : &c->to))
				return bad(
					"--from and --to need seconds from the start, not \"%s\"",
					optarg);
			break;
		case OPT_RESET:
			c->reset = true;
			break;
		case OPT_RECORD:
			if (!optarg[0])
				return bad("--record needs a file name%s", "");
			c->record = optarg;
			break;
		case OPT_BINARY_PATH:
			if (c->nbinary_dirs == CLI_MAX_DIRS)
				return bad("at most 16 --binary-path directories%s", "");
			c->binary_dirs[c->nbinary_dirs++] = optarg;
			break;
		case 'o':
			if (!optarg[0])
				return bad("--output needs a file name%s", "");
			c->output = optarg;
			c->output_set = true;
			break;
		case 'f':
			c->output_set = true;
			if (strcmp(optarg, "pprof") == 0)
				c->format = FMT_PPROF;
			else if (strcmp(optarg, "folded") == 0)
				c->format = FMT_FOLDED;
			else
				return bad("unknown --format \"%s\"; use pprof or folded", optarg);
			break;
		case 't':
			if (hb_value_parse(optarg, &c->sample_type))
				return bad("unknown --sample-type \"%s\"; use inuse_space, "
					   "inuse_objects, alloc_space or alloc_objects",
					   optarg);
			have_type = true;
			break;
		case OPT_RAW:
			c->raw = true;
			break;
		case OPT_RINGBUF:
			if (parse_long(optarg, 1, 1024, &v))
				return bad(
					"--ringbuf-size needs MiB between 1 and 1024, not \"%s\"",
					optarg);
			c->ringbuf_bytes = (size_t)v << 20;
			break;
		case OPT_LAYOUT:
			c->layout = optarg;
			break;
		case OPT_DEBUG_DIR: {
			size_t n = (c->debug_dirs ? strlen(c->debug_dirs) + 1 : 0) +
				   strlen(optarg) + 1;
			char *d;

			if (optarg[0] != '/' || strchr(optarg, ':'))
				return bad(
					"--debug-dir needs an absolute directory without ':', not "
					"\"%s\"",
					optarg);
			d = malloc(n);
			if (!d)
				return bad("out of memory%s", "");
			snprintf(d, n, "%s%s%s", c->debug_dirs ? c->debug_dirs : "",
				 c->debug_dirs ? ":" : "", optarg);
			free(c->debug_dirs);
			c->debug_dirs = d;
			break;
		}
		case 'q':
			c->quiet = true;
			break;
		case 'v':
			c->verbose = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 1;
		case OPT_VERSION:
			printf("heapbpf %s\n", HEAPBPF_VERSION);
			return 1;
		case ':':
			return bad("option %s needs a value",
				   opt_name(argv[optind - 1], optopt, name));
		default:
			return bad("unknown option %s", opt_name(argv[optind - 1], optopt, name));
		}
	}
	if (c->mode == MODE_REPORT) {
		if (optind >= argc)
			return bad("report needs a recording file%s", "");
		c->recording = argv[optind++];
		if (have_pid || have_duration || c->record || c->layout || c->reset)
			return bad("report reads a recording: --pid, --duration, --record and "
				   "--jemalloc-layout do not apply%s",
				   "");
		if (c->to >= 0 && c->to <= c->from)
			return bad("--to must be after --from%s", "");
	} else if (c->nbinary_dirs || c->from || c->to >= 0) {
		return bad("--from, --to and --binary-path apply to heapbpf report%s", "");
	}
	if (optind < argc)
		return bad("unexpected argument \"%s\"", argv[optind]);
	if (c->mode == MODE_LIVE && !have_pid)
		return bad("--pid is required%s", "");
	if (have_type && c->format != FMT_FOLDED)
		return bad("--sample-type applies to --format folded (pprof carries all four)%s",
			   "");
	return 0;
}
