// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "cmd/profile.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "run/fleet.h"
#include "run/liveheap.h"
#include "util/version.h"

/* heapbpf --help */
const char profile_help[] =
	"Usage: heapbpf --pid PID|--unit NAME|--pidfile PATH [options]\n"
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
	"                             heap-TIME-PID-COMM.pb.gz, .folded or .html in the current\n"
	"                             directory)\n"
	"  -f, --format FORMAT        pprof (gzip-compressed protobuf, default), folded, or html\n"
	"                             (an interactive flame graph: one self-contained page).\n"
	"                             Without -f, -o's name decides: .pb.gz, .pb, .pprof: pprof;\n"
	"                             .folded, .collapsed: folded; .html, .htm: html; any other\n"
	"                             name: pprof. A -f that disagrees with -o's name, or two -f\n"
	"                             for one file, is refused (--output-dir takes several)\n"
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
	"      --allow-shared-dir     write or spool into a directory another user owns, or one\n"
	"                             other users can write that has no sticky bit (refused by\n"
	"                             default: they could swap or plant what heapbpf writes)\n"
	"      --reset                only restore prof_active in PID (and in what it forked) if a\n"
	"                             heapbpf run that was killed (kill -9) left it on; every run\n"
	"                             also does this first. With no target: in every process\n"
	"                             the state files name (after a killed heapbpf agent)\n"
	"      --follow-forks         also profile every process PID forks while sampling is on\n"
	"                             (children, grandchildren): each sample labelled pid=N, folded\n"
	"                             stacks rooted at \"pid N\". Without it, a child's samples never\n"
	"                             mix in; either way its prof_active is switched back off\n"
	"      --children             also profile the descendants PID (or --pidfile's) has when\n"
	"                             heapbpf starts (a manager's worker): one profile each, as\n"
	"                             a --pid list; those without a jemalloc heapbpf can use\n"
	"                             are skipped with a note. --follow-forks adds the later ones\n"
	"      --leaks                after the profile, the leak suspects (stacks whose in-use\n"
	"                             grew steadily: growth rate, oldest live sample, confidence),\n"
	"                             the held suspects (stacks that kept sampled objects live far\n"
	"                             longer than freed ones live) and how long sampled objects\n"
	"                             lived, site by site\n"
	"      --at-peak FILE         also write the in-use profile at the instant the estimated\n"
	"                             in-use peaked, in the --format of the run\n"
	"      --temporary-threshold T  objects freed within T count as temporary (default 1ms;\n"
	"                             a number with ns, us, ms or s; a bare number is seconds)\n"
	"      --wrapper NAME         an allocator wrapper of the service: the summary, leak\n"
	"                             suspects, lifetimes, top and the flame graph name a site\n"
	"                             by the first frame (leaf to root) outside wrappers. NAME is\n"
	"                             a function name (demangled or raw) or an fnmatch glob\n"
	"                             ('my_*alloc'); repeatable. Built in: zmalloc, sdsnewlen,\n"
	"                             xmalloc, g_malloc, ngx_palloc, CRYPTO_malloc, operator new,\n"
	"                             std::allocator, __rust_alloc, alloc::raw_vec and the like,\n"
	"                             and any function that, in every sampled stack it is in,\n"
	"                             calls only the allocator and is called from 2 or more\n"
	"                             functions. pprof and folded output keep every frame\n"
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
	"      --pyroscope-proxy URL  send through this proxy (http, https or socks URL), also\n"
	"                             with credentials (then only to an https:// server)\n"
	"    Credentials only from the environment: HEAPBPF_PYROSCOPE_TENANT (X-Scope-OrgID),\n"
	"    HEAPBPF_PYROSCOPE_USER and _PASSWORD (basic auth) or HEAPBPF_PYROSCOPE_TOKEN\n"
	"    (bearer), each also as NAME_FILE=path. A password or token goes over https, or\n"
	"    over http to a loopback address only (127.0.0.0/8, ::1, or a name resolving only\n"
	"    to them), and never through the environment's http_proxy/https_proxy.\n"
	"\n"
	"  -q, --quiet                no status line, no summary, no --leaks tables\n"
	"  -v, --verbose              show libbpf's messages; at the end the BPF counters and,\n"
	"                             with BPF statistics on, each program's run count and time\n"
	"  -h, --help                 this help\n"
	"      --version              print the version\n"
	"\n"
	"Examples:\n"
	"  sudo heapbpf --pid 4242                      # 10 s, pprof to heap-*-4242-*.pb.gz\n"
	"  sudo heapbpf -p 4242 -d 60 -o heap.pb.gz     # one minute\n"
	"  sudo heapbpf -p 4242 -f folded -t alloc_space -o heap.folded\n"
	"  sudo heapbpf -p 4242 -f html -o heap.html    # a flame graph for any browser\n"
	"  go tool pprof -http :8080 heap.pb.gz         # look at it\n"
	"  sudo heapbpf -p 4242 -d 60 --record heap.hbr # record now, report later, elsewhere\n"
	"  sudo heapbpf -p 4242 -d 30 --follow-forks    # and the workers it forks meanwhile\n"
	"  sudo heapbpf --pidfile /run/varnishd.pid --children -d 30   # its children too\n"
	"  sudo heapbpf -p 4242 -d 60 --leaks --at-peak peak.pb.gz  # what grows, what peaked\n"
	"\n"
	"Commands, each with its own --help:\n"
	"  heapbpf report FILE       a recording, a core or a pprof profile, offline\n"
	"  heapbpf diff BASE NEW     what changed between two profiles\n"
	"  heapbpf top --pid PID     the allocation sites live, refreshed every second\n"
	"  heapbpf watch --pid PID   stays attached; a profile when a trigger fires (OOM,\n"
	"                            growth, pressure, SIGUSR1)\n"
	"  heapbpf agent             every jemalloc process of the node, watched\n"
	"  heapbpf status            every heapbpf running on the host\n"
	"  heapbpf rss --pid PID     where the process's RSS is, page by page\n"
	"\n" HB_EXIT_STATUS_HELP;

/* --live-heap: one process, read once, nothing sampled. */
static int check_live_heap(const struct cli *c, const struct cli_given *g)
{
	if (!c->run.live_heap)
		return 0;
	if (!g->pid || c->run.npids > 1)
		return cli_bad("--live-heap reads one process: give one --pid");
	if (c->run.children)
		return cli_bad("--live-heap reads one process: --children does not apply");
	if (g->duration || c->run.interval || c->run.follow_forks || c->run.record ||
	    c->run.leaks || c->run.at_peak || c->run.output_dir || c->run.pyroscope || c->run.reset)
		return cli_bad(
			"--live-heap reads jemalloc's tables once and samples nothing: "
			"--duration, --interval, --follow-forks, --record, --leaks, --at-peak, "
			"--output-dir, --pyroscope and --reset do not apply");
	return 0;
}

/* heapbpf --pid N: a live run (or, --live-heap, one read of jemalloc's tables). */
int profile_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	return checks_refuse_input_options(c) ?: checks_no_operand(n, operands) ?: check_live_heap(c, g)
		       ?: checks_refuse_top_keys(g) ?: checks_at_peak(c) ?: checks_one_file(c)
		       ?: checks_target(c, g)
		       ?: checks_combinations(c, g->type, g->duration);
}

int profile_command(const struct cli *c, struct run *r, char *err, size_t errlen)
{
	r->servable = true;
	r->hint_children = true;
	return c->run.live_heap ? liveheap_run(r, err, errlen) : fleet_run(r, err, errlen);
}
