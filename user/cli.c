// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"

static const char usage[] =
	"Usage: heapbpf --pid PID [options]\n"
	"       heapbpf report RECORDING|CORE [options]\n"
	"       heapbpf top --pid PID [options]\n"
	"       heapbpf diff BASE NEW [options]\n"
	"\n"
	"Profiles the heap of a running process that uses jemalloc, from outside: attaches\n"
	"uprobes to jemalloc's sampling path, switches jemalloc's prof_active on for the\n"
	"duration, then switches it back and writes the profile. The process must have been\n"
	"started with jemalloc profiling enabled but idle:\n"
	"    MALLOC_CONF=prof:true,prof_active:false          (C/C++, jemalloc)\n"
	"    _RJEM_MALLOC_CONF=prof:true,prof_active:false    (Rust, tikv-jemallocator)\n"
	"\n"
	"Options:\n"
	"  -p, --pid PID[,PID...]     process(es) to profile (required; several: one session,\n"
	"                             one profile each)\n"
	"  -d, --duration SECONDS     how long to profile (default 10; 0 = until Ctrl-C or SIGTERM)\n"
	"  -o, --output FILE          where to write the profile ('-' = stdout; default\n"
	"                             heapbpf-PID-TIME.pb.gz, .folded or .html in the current\n"
	"                             directory)\n"
	"  -f, --format FORMAT        pprof (gzip-compressed protobuf, default), folded, or html\n"
	"                             (an interactive flame graph: one self-contained page)\n"
	"  -t, --sample-type TYPE     value written by --format folded, and the one html sizes\n"
	"                             frames by: inuse_space (default), inuse_objects,\n"
	"                             alloc_space or alloc_objects\n"
	"      --raw                  raw sampled counts and bytes instead of unbiased estimates\n"
	"                             (to compare sample for sample with jemalloc's own dump)\n"
	"      --ringbuf-size SIZE    BPF ring buffer size: MiB, or with a k/m suffix (default 8:\n"
	"                             heapbpf maps it twice, 16 MiB of its RSS; about a second\n"
	"                             of 28k samples/s with their frees; 16 with --interval,\n"
	"                             whose windows and uploads pause the reading); raise it\n"
	"                             when heapbpf exits 4\n"
	"      --jemalloc-layout VER  use this jemalloc version's layout for an unrecognized build\n"
	"      --debug-dir DIR        also look for separate debug info in DIR (a build-id tree\n"
	"                             DIR/.build-id/xx/yyyy.debug, or debuglink files); repeatable.\n"
	"                             /usr/lib/debug, .gnu_debuglink files next to each object and,\n"
	"                             when DEBUGINFOD_URLS is set, debuginfod are always searched\n"
	"      --record FILE          also write every event, with what later reports need, to a\n"
	"                             zstd-compressed recording (a profile is then written only\n"
	"                             with -o or --format)\n"
	"      --file-mode MODE       the mode of every file written (profiles, snapshots,\n"
	"                             recordings): octal, read and write bits only, the owner's\n"
	"                             included (default 0600: they hold the target's function\n"
	"                             names and addresses; 0640 or 0644 to share them)\n"
	"      --reset                only restore prof_active in PID (and in what it forked) if a\n"
	"                             heapbpf run that was killed (kill -9) left it on; every run\n"
	"                             also does this first\n"
	"      --follow-forks         also profile every process PID forks while sampling is on\n"
	"                             (children, grandchildren): each sample labelled pid=N, folded\n"
	"                             stacks rooted at \"pid N\". Without it, a child's samples never\n"
	"                             mix in; either way its prof_active is switched back off\n"
	"      --leaks                after the profile, the leak suspects (stacks whose in-use\n"
	"                             grew steadily: growth rate, oldest live sample, confidence)\n"
	"                             and how long sampled objects lived, site by site\n"
	"      --at-peak FILE         also write the in-use profile at the instant sampled in-use\n"
	"                             bytes peaked, in the --format of the run\n"
	"      --temporary-threshold T  objects freed within T count as temporary (default 1ms;\n"
	"                             a number with ns, us, ms or s; a bare number is seconds)\n"
	"      --live-heap            sample nothing: read the sampled live heap (and, with\n"
	"                             prof_accum:true, allocated totals) from jemalloc's own\n"
	"                             tables in PID, what it sampled now or in earlier windows;\n"
	"                             nothing is written into the process\n"
	"\n"
	"Fleet use (timers, daemons, Grafana Pyroscope):\n"
	"      --unit NAME            every process of a systemd unit (found in its cgroup),\n"
	"                             one profile each; NAME or NAME.service\n"
	"      --pidfile PATH         the process named by a pid file\n"
	"      --output-dir DIR       snapshot mode: write heap-TIME-PID-COMM.pb.gz (.folded, .html)\n"
	"                             into DIR, atomically; -f may be given more than once\n"
	"      --keep N               keep the newest N snapshots in DIR, delete older ones\n"
	"      --max-bytes SIZE       and at most SIZE bytes (K, M, G suffixes), oldest first\n"
	"      --compress zstd        write folded output zstd-compressed (.folded.zst)\n"
	"      --interval SECONDS     a snapshot every SECONDS without detaching, until stopped\n"
	"                             (prof_active stays on all the while)\n"
	"      --pyroscope URL        also push every profile to Grafana Pyroscope\n"
	"      --pyroscope-api API    push (default: /push.v1.PusherService/Push, falling back\n"
	"                             to /ingest when the server answers 404) or ingest\n"
	"      --service-name NAME    Pyroscope service name (default: the unit, else comm)\n"
	"      --label KEY=VALUE      Pyroscope label; repeatable (defaults: hostname, pid,\n"
	"                             comm; an empty VALUE drops one)\n"
	"      --spool-dir DIR        undelivered profiles wait here (default: DIR/spool of\n"
	"                             --output-dir, else $STATE_DIRECTORY/spool under systemd,\n"
	"                             else /var/lib/heapbpf/spool, created 0700);\n"
	"                             --spool-keep N, --spool-max-bytes SIZE\n"
	"      --pyroscope-timeout S  per request (default 10); --pyroscope-retries N (default 3)\n"
	"      --pyroscope-multipart  /ingest: multipart/form-data instead of format=pprof\n"
	"      --pyroscope-ca FILE    CA bundle for the server's certificate\n"
	"    Credentials only from the environment: HEAPBPF_PYROSCOPE_TENANT (X-Scope-OrgID),\n"
	"    HEAPBPF_PYROSCOPE_USER and _PASSWORD (basic auth) or HEAPBPF_PYROSCOPE_TOKEN\n"
	"    (bearer), each also as NAME_FILE=path.\n"
	"\n"
	"  -q, --quiet                no status line, no summary\n"
	"  -v, --verbose              show libbpf's messages; at the end the BPF counters and,\n"
	"                             with BPF statistics on, each program's run count and time\n"
	"  -h, --help                 this help\n"
	"      --version              print the version\n"
	"\n"
	"Examples:\n"
	"  sudo heapbpf --pid 4242                      # 10 s, pprof to heapbpf-4242-*.pb.gz\n"
	"  sudo heapbpf -p 4242 -d 60 -o heap.pb.gz     # one minute\n"
	"  sudo heapbpf -p 4242 -f folded -t alloc_space -o heap.folded\n"
	"  sudo heapbpf -p 4242 -f html -o heap.html    # a flame graph for any browser\n"
	"  go tool pprof -http :8080 heap.pb.gz         # look at it\n"
	"  sudo heapbpf -p 4242 -d 60 --record heap.hbr # record now, report later, elsewhere\n"
	"  sudo heapbpf -p 4242 -d 30 --follow-forks    # and the workers it forks meanwhile\n"
	"  sudo heapbpf -p 4242 -d 60 --leaks --at-peak peak.pb.gz  # what grows, what peaked\n"
	"\n"
	"heapbpf report RECORDING: every report of a live run, offline, from a recording.\n"
	"  -o, -f, -t, --raw, --leaks, --at-peak, --temporary-threshold, --file-mode\n"
	"                             as above\n"
	"      --from S, --to S       only events from S to S seconds after the start\n"
	"      --binary-path DIR      look for the recorded binaries (matched by build-id) under\n"
	"                             DIR, as a sysroot or by file name; repeatable. Also searched:\n"
	"                             their recorded paths and, with DEBUGINFOD_URLS, debuginfod\n"
	"      --debug-dir DIR        as above\n"
	"  heapbpf report heap.hbr -f folded -t alloc_space --from 10 --to 20 -o window.folded\n"
	"\n"
	"heapbpf report CORE: the sampled live heap of a jemalloc process at the time of its core\n"
	"dump (the kernel's or gdb's gcore; an ELF core is recognized, --core insists), read from\n"
	"jemalloc's own profiling tables: the process must have run with prof:true and\n"
	"prof_active:true. -o, -f, -t, --raw, --binary-path, --debug-dir, --jemalloc-layout as above\n"
	"      --core                 FILE is a core file\n"
	"      --exe PATH             the executable the core was dumped from (checked by build-id)\n"
	"  heapbpf report core.4242 --exe ./service -f folded -o heap.folded\n"
	"\n"
	"heapbpf diff BASE NEW: what changed between two profiles (pprof files, heapbpf's or\n"
	"any with Go's heap sample types, or recordings), stacks matched by function and file\n"
	"so that a rebuilt binary still matches. Prints the largest changes of -t (default\n"
	"inuse_space) and writes the differential profile: pprof in pprof's -diff_base form\n"
	"(the base negated, labelled pprof::base), or folded as \"stack BASE NEW\" for\n"
	"differential flame graphs (default heapbpf-diff-TIME.pb.gz).\n"
	"  -o, -f pprof|folded, -t, --binary-path, --debug-dir, --file-mode, -q\n"
	"                             as above\n"
	"  heapbpf diff before.pb.gz after.pb.gz -t alloc_space -f folded -o change.folded\n"
	"\n"
	"heapbpf top --pid PID: the allocation sites live, refreshed every second: in-use\n"
	"growth and allocation rate over the last second, in use, totals, samples, drops. On a\n"
	"terminal it fills the screen (keys: g/a/u sort by growth, allocation, in use; s/f/F\n"
	"rows by site, function, file; p pauses; q quits); otherwise it prints one plain table\n"
	"per second. prof_active is on while it runs. No profile is written unless -o is given\n"
	"(then one of the whole run).\n"
	"  -p, --pidfile, -o, -f, -t, --raw, --ringbuf-size, --jemalloc-layout, --debug-dir,\n"
	"  --file-mode                as above\n"
	"  -d, --duration SECONDS     stop after SECONDS (default 0: until q, Ctrl-C or SIGTERM)\n"
	"      --sort KEY             growth (default), alloc or inuse\n"
	"      --by KEY               site (default: caller and line), function or file\n"
	"  sudo heapbpf top --pid 4242\n"
	"  sudo heapbpf top -p 4242 --by function -d 60 > top.log   # one table per second\n"
	"\n"
	"Exit status: 0 profile written; 1 error; 2 usage; 3 written but no samples;\n"
	"4 written but events were dropped (see the summary); 5 written but not yet delivered\n"
	"to Pyroscope (kept in the spool for the next run).\n";

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
	OPT_PYRO_API,
	OPT_FOLLOW_FORKS,
	OPT_LIVE_HEAP,
	OPT_SORT,
	OPT_BY,
	OPT_LEAKS,
	OPT_AT_PEAK,
	OPT_TEMPORARY,
	OPT_FILE_MODE,
	OPT_CORE,
	OPT_EXE,
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
	{ "pyroscope-api", required_argument, NULL, OPT_PYRO_API },
	{ "follow-forks", no_argument, NULL, OPT_FOLLOW_FORKS },
	{ "live-heap", no_argument, NULL, OPT_LIVE_HEAP },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "by", required_argument, NULL, OPT_BY },
	{ "leaks", no_argument, NULL, OPT_LEAKS },
	{ "at-peak", required_argument, NULL, OPT_AT_PEAK },
	{ "temporary-threshold", required_argument, NULL, OPT_TEMPORARY },
	{ "file-mode", required_argument, NULL, OPT_FILE_MODE },
	{ "core", no_argument, NULL, OPT_CORE },
	{ "exe", required_argument, NULL, OPT_EXE },
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

/* --at-peak names one file: one target, one window. */
static int check_at_peak(const struct cli *c)
{
	if (c->at_peak && (c->unit || c->output_dir || c->interval))
		return bad("--at-peak writes one file: it cannot be combined with --unit, "
			   "--output-dir or --interval%s",
			   "");
	if (c->at_peak && c->output && strcmp(c->at_peak, c->output) == 0)
		return bad("--at-peak needs a file of its own, not the profile's \"%s\"",
			   c->output);
	return 0;
}

/* The options that do not go together, and the defaults that depend on others. */
static int check_combinations(struct cli *c, bool have_pid, bool have_type, bool have_duration)
{
	bool offline = c->mode == MODE_REPORT || c->mode == MODE_DIFF;

	if (offline && (c->unit || c->pidfile || c->output_dir || c->interval || c->pyroscope ||
			c->keep || c->max_bytes || c->zstd || c->nlabels || c->spool_dir))
		return bad("report and diff write one profile: the fleet options (--unit, "
			   "--output-dir, --interval, --pyroscope, ...) apply to live runs%s",
			   "");
	/* diff: the type its summary ranks the changes by, whatever the format */
	if (c->mode == MODE_DIFF)
		have_type = false;
	if (!offline && have_pid + !!c->unit + !!c->pidfile > 1)
		return bad("give one of --pid, --unit and --pidfile%s", "");
	if (!offline && !have_pid && !c->unit && !c->pidfile)
		return bad("--pid is required (or --unit NAME, or --pidfile PATH)%s", "");
	if (c->output_dir && c->output)
		return bad("--output-dir names its files itself: drop --output%s", "");
	if (!c->output_dir && (c->keep || c->max_bytes || c->zstd))
		return bad("--keep, --max-bytes and --compress apply to --output-dir%s", "");
	if (c->output_dir && !c->formats)
		c->formats = 1u << FMT_PPROF;
	if (c->zstd && !(c->formats & (1u << FMT_FOLDED)))
		return bad("--compress zstd applies to --format folded (pprof is gzip-compressed "
			   "already)%s",
			   "");
	if (c->interval && !c->output_dir && !c->pyroscope)
		return bad("--interval needs --output-dir or --pyroscope, where the windows go%s",
			   "");
	if (c->interval && c->output)
		return bad("--interval writes a file per window: use --output-dir, not --output%s",
			   "");
	if (c->follow_forks && c->record)
		return bad("--follow-forks and --record cannot be combined (a recording is of one "
			   "process)%s",
			   "");
	if (c->interval && c->record)
		return bad("--interval and --record cannot be combined%s", "");
	if (c->interval && !have_duration)
		c->duration = 0;
	if (c->interval && c->duration && c->duration < c->interval)
		return bad("--duration must be at least one --interval%s", "");
	if (!c->pyroscope && (c->service_name || c->nlabels || c->spool_dir || c->spool_keep ||
			      c->spool_max_bytes || c->pyro_multipart || c->pyro_ca || c->pyro_api))
		return bad("--service-name, --label, --spool-* and --pyroscope-* apply to "
			   "--pyroscope%s",
			   "");
	if (have_type && !(c->output_dir ? c->formats & (1u << FMT_FOLDED | 1u << FMT_HTML)
					 : c->format == FMT_FOLDED || c->format == FMT_HTML))
		return bad("--sample-type applies to --format folded and html (pprof carries all "
			   "four)%s",
			   "");
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

/* --live-heap: one process, read once, nothing sampled. */
static int check_live_heap(const struct cli *c, bool have_pid, bool have_duration)
{
	if (!c->live_heap)
		return 0;
	if (c->mode != MODE_LIVE)
		return bad("--live-heap reads a running process: it does not apply to report, top "
			   "or diff%s",
			   "");
	if (!have_pid || c->npids > 1)
		return bad("--live-heap reads one process: give one --pid%s", "");
	if (have_duration || c->interval || c->follow_forks || c->record || c->leaks ||
	    c->at_peak || c->output_dir || c->pyroscope || c->reset)
		return bad("--live-heap reads jemalloc's tables once and samples nothing: "
			   "--duration, --interval, --follow-forks, --record, --leaks, --at-peak, "
			   "--output-dir, --pyroscope and --reset do not apply%s",
			   "");
	return 0;
}

/* heapbpf top: one process, on the terminal; --sort and --by only there. */
static int check_top(struct cli *c, bool have_duration, bool have_top)
{
	if (c->mode != MODE_TOP)
		return have_top ? bad("--sort and --by apply to heapbpf top%s", "") : 0;
	if (c->unit || c->output_dir || c->interval || c->pyroscope || c->record || c->reset ||
	    c->follow_forks)
		return bad("heapbpf top shows one process as it runs: --unit, --output-dir, "
			   "--interval, --pyroscope, --record, --reset and --follow-forks do not "
			   "apply%s",
			   "");
	if (c->leaks || c->at_peak)
		return bad(
			"heapbpf top shows the sites as they run: --leaks and --at-peak apply to "
			"profiles%s",
			"");
	if (c->output && strcmp(c->output, "-") == 0)
		return bad("heapbpf top draws on stdout: give -o a file name, not \"%s\"",
			   c->output);
	if (!have_duration)
		c->duration = 0;
	return 0;
}

int cli_parse(int argc, char **argv, struct cli *c)
{
	bool have_pid = false, have_type = false, have_duration = false, have_top = false;
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
	} else if (argc > 1 && strcmp(argv[1], "top") == 0) {
		c->mode = MODE_TOP;
		argc--;
		argv++;
	} else if (argc > 1 && strcmp(argv[1], "diff") == 0) {
		c->mode = MODE_DIFF;
		argc--;
		argv++;
	}
	c->duration = 10;
	c->format = FMT_PPROF;
	c->sample_type = HB_INUSE_SPACE;
	/* libbpf maps the data twice, all of it in RSS (docs/analysis.md, Cost) */
	c->ringbuf_bytes = 0; /* the default: RINGBUF_DEFAULT, or RINGBUF_DAEMON with --interval */
	c->pyro_timeout = 10;
	c->pyro_retries = 3;
	c->temporary_ns = 1000000; /* 1 ms */
	c->file_mode = OUTPUT_DEFAULT_MODE;
	optind = 0; /* 0, not 1: glibc then also resets its state inside an option group */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":p:d:o:f:t:qvh", options, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (add_pids(c, optarg))
				return bad(
					"--pid needs positive process ids (N or N,N,...), not \"%s\"",
					optarg);
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
		case OPT_FOLLOW_FORKS:
			c->follow_forks = true;
			break;
		case OPT_LIVE_HEAP:
			c->live_heap = true;
			break;
		case OPT_LEAKS:
			c->leaks = true;
			break;
		case OPT_AT_PEAK:
			if (!optarg[0])
				return bad("--at-peak needs a file name%s", "");
			c->at_peak = optarg;
			break;
		case OPT_TEMPORARY:
			if (parse_duration_ns(optarg, &c->temporary_ns) || !c->temporary_ns)
				return bad(
					"--temporary-threshold needs a time like 1ms, 250us or 2s "
					"(above 0, at most a day), not \"%s\"",
					optarg);
			break;
		case OPT_FILE_MODE:
			if (parse_file_mode(optarg, &c->file_mode))
				return bad("--file-mode needs an octal mode of read and write bits "
					   "that lets the owner read and write, like 0600, 0640 or "
					   "0644, not \"%s\"",
					   optarg);
			break;
		case OPT_SORT:
		case OPT_BY:
			if (opt == OPT_SORT && top_sort_parse(optarg, &c->top_sort))
				return bad("unknown --sort \"%s\"; use growth, alloc or inuse",
					   optarg);
			if (opt == OPT_BY && top_by_parse(optarg, &c->top_by))
				return bad("unknown --by \"%s\"; use site, function or file",
					   optarg);
			have_top = true;
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
			else if (strcmp(optarg, "html") == 0)
				c->format = FMT_HTML;
			else
				return bad("unknown --format \"%s\"; use pprof, folded or html",
					   optarg);
			c->formats |= 1u << c->format;
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
			if (parse_size(optarg, &c->ringbuf_bytes))
				return bad(
					"--ringbuf-size needs 16k to 1024m (a number is MiB), not "
					"\"%s\"",
					optarg);
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
		case OPT_UNIT:
			if (!optarg[0])
				return bad("--unit needs a unit name%s", "");
			c->unit = optarg;
			break;
		case OPT_PIDFILE:
			if (!optarg[0])
				return bad("--pidfile needs a file name%s", "");
			c->pidfile = optarg;
			break;
		case OPT_OUTPUT_DIR:
		case OPT_SPOOL_DIR:
			if (!optarg[0])
				return bad("%s needs a directory",
					   opt_name(argv[optind - 1], 0, name));
			*(opt == OPT_OUTPUT_DIR ? &c->output_dir : &c->spool_dir) = optarg;
			break;
		case OPT_KEEP:
		case OPT_SPOOL_KEEP:
			if (parse_long(optarg, 1, 1000000, &v))
				return bad(
					"--keep and --spool-keep need a count from 1 to 1000000, "
					"not \"%s\"",
					optarg);
			*(opt == OPT_KEEP ? &c->keep : &c->spool_keep) = v;
			break;
		case OPT_MAX_BYTES:
		case OPT_SPOOL_MAX_BYTES:
			if (parse_bytes(optarg, opt == OPT_MAX_BYTES ? &c->max_bytes
								     : &c->spool_max_bytes) ||
			    !(opt == OPT_MAX_BYTES ? c->max_bytes : c->spool_max_bytes))
				return bad(
					"--max-bytes and --spool-max-bytes need a size like 512K, "
					"64M or 2G, not \"%s\"",
					optarg);
			break;
		case OPT_COMPRESS:
			if (strcmp(optarg, "zstd") != 0)
				return bad("unknown --compress \"%s\"; use zstd", optarg);
			c->zstd = true;
			break;
		case OPT_INTERVAL:
			if (parse_long(optarg, 1, 31 * 24 * 3600, &v))
				return bad("--interval needs whole seconds from 1 to 2678400, not "
					   "\"%s\"",
					   optarg);
			c->interval = v;
			break;
		case OPT_PYROSCOPE:
			if (!optarg[0])
				return bad("--pyroscope needs a URL%s", "");
			c->pyroscope = optarg;
			break;
		case OPT_SERVICE_NAME:
			c->service_name = optarg;
			break;
		case OPT_LABEL:
			if (c->nlabels == CLI_MAX_LABELS)
				return bad("at most 16 --label options%s", "");
			if (!strchr(optarg, '='))
				return bad("--label needs KEY=VALUE, not \"%s\"", optarg);
			c->labels[c->nlabels++] = optarg;
			break;
		case OPT_PYRO_TIMEOUT:
			if (parse_seconds(optarg, &c->pyro_timeout) || c->pyro_timeout < 0.1 ||
			    c->pyro_timeout > 600)
				return bad("--pyroscope-timeout needs seconds from 0.1 to 600, not "
					   "\"%s\"",
					   optarg);
			break;
		case OPT_PYRO_RETRIES:
			if (parse_long(optarg, 0, 10, &v))
				return bad(
					"--pyroscope-retries needs a count from 0 to 10, not \"%s\"",
					optarg);
			c->pyro_retries = v;
			break;
		case OPT_PYRO_MULTIPART:
			c->pyro_multipart = true;
			break;
		case OPT_PYRO_CA:
			c->pyro_ca = optarg;
			break;
		case OPT_PYRO_API:
			if (strcmp(optarg, "push") != 0 && strcmp(optarg, "ingest") != 0)
				return bad("unknown --pyroscope-api \"%s\"; use push or ingest",
					   optarg);
			c->pyro_api = true;
			c->pyro_ingest = strcmp(optarg, "ingest") == 0;
			break;
		case OPT_CORE:
			c->core = true;
			break;
		case OPT_EXE:
			c->exe = optarg;
			break;
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
		/* --jemalloc-layout: for a core file (main tells a recording) */
		if (have_pid || have_duration || c->record || c->reset || c->follow_forks)
			return bad("report reads a recording or a core file: --pid, --duration, "
				   "--record and --follow-forks do not apply%s",
				   "");
		if (c->to >= 0 && c->to <= c->from)
			return bad("--to must be after --from%s", "");
	} else if (c->mode == MODE_DIFF) {
		if (argc - optind < 2)
			return bad("diff needs two profiles: BASE and NEW%s", "");
		c->diff_paths[0] = argv[optind++];
		c->diff_paths[1] = argv[optind++];
		if (have_pid || have_duration || c->record || c->layout || c->reset ||
		    c->follow_forks || c->from || c->to >= 0 || c->raw)
			return bad(
				"diff compares two profiles: --pid, --duration, --record, "
				"--follow-forks, --jemalloc-layout, --from, --to and --raw do not "
				"apply%s",
				"");
		if (c->format != FMT_PPROF && c->format != FMT_FOLDED)
			return bad("diff writes pprof or folded%s", "");
	} else if (c->core || c->exe) {
		return bad("--core and --exe apply to heapbpf report of a core file%s", "");
	} else if (c->nbinary_dirs || c->from || c->to >= 0) {
		return bad("--from, --to and --binary-path apply to heapbpf report and diff%s", "");
	}
	if (optind < argc)
		return bad("unexpected argument \"%s\"", argv[optind]);
	/*
	 * A daemon stops reading while it writes a window (symbols, the file, a
	 * Pyroscope upload of up to its --pyroscope-timeout): more room then.
	 */
	if (!c->ringbuf_bytes)
		c->ringbuf_bytes = c->interval ? RINGBUF_DAEMON : RINGBUF_DEFAULT;
	return check_live_heap(c, have_pid, have_duration)
		       ?: check_top(c, have_duration, have_top) ?: check_at_peak(c)
		       ?: check_combinations(c, have_pid, have_type, have_duration);
}
