/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command-line options of heapbpf. */
#ifndef __HEAPBPF_CLI_H
#define __HEAPBPF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/profile.h"
#include "export/sink.h"
#include "run/top.h"
#include "util/version.h"

enum cli_mode {
	MODE_LIVE,   /* heapbpf --pid N */
	MODE_REPORT, /* heapbpf report FILE */
	MODE_TOP,    /* heapbpf top --pid N */
	MODE_DIFF,   /* heapbpf diff BASE NEW */
	MODE_WATCH,  /* heapbpf watch --pid N: parsed, then run as MODE_LIVE with watch set */
	MODE_AGENT,  /* heapbpf agent: every selected jemalloc process of the node (user/agent.c) */
	MODE_STATUS, /* heapbpf status: every heapbpf running on the host (user/status.c) */
	MODE_RSS,    /* heapbpf rss --pid N: where the RSS is (user/cmd/rss.c) */
};

#define CLI_MAX_DIRS	 16
#define CLI_MAX_LABELS	 16
#define CLI_MAX_WRAPPERS 64   /* --wrapper */
#define CLI_MAX_PIDS	 1024 /* --pid N,N,...: one session (user/fleet.c) */
#define CLI_MAX_RULES	 32   /* heapbpf agent: --select and --exclude */
/* --ringbuf-size's default; with --interval, whose windows pause the reading */
#define RINGBUF_DEFAULT (8u << 20)
#define RINGBUF_DAEMON	(16u << 20)

struct cli {
	const char *record;    /* --record FILE, or NULL */
	const char *recording; /* report: the recording (or core) to read */
	const char *exe;       /* report --exe: a core's executable */
	double from, to;       /* report: window in seconds; to < 0 = the end */
	double duration;       /* seconds; 0 = until a signal */
	const char *output;
	/* heapbpf watch: stay attached, write a profile when a trigger fires (user/watch.c) */
	uint64_t watch_growth;	   /* --on-growth SIZE: of the sampled in-use estimate; 0: off */
	uint64_t watch_rss_growth; /* --on-rss-growth SIZE: of the RSS; 0: off */
	double watch_cooldown;	   /* --cooldown SECONDS between pressure profiles */
	size_t ringbuf_bytes;
	const char *layout;    /* forced jemalloc layout, or NULL */
	char *debug_dirs;      /* --debug-dir values joined by ':', or NULL (owned) */
	const char *at_peak;   /* --at-peak FILE: the in-use profile at the peak, or NULL */
	uint64_t temporary_ns; /* --temporary-threshold: shorter lifetimes are temporary */
	/* fleet use (user/fleet.c) */
	const char *unit;	/* --unit NAME */
	const char *pidfile;	/* --pidfile PATH */
	const char *output_dir; /* --output-dir DIR: snapshot mode */
	unsigned long keep;	/* --keep N snapshots, 0 = all */
	uint64_t max_bytes;	/* --max-bytes, 0 = no limit */
	double interval;	/* --interval SECONDS, 0 = one window */
	const char *pyroscope;	/* --pyroscope URL */
	const char *service_name;
	const char *spool_dir;
	unsigned long spool_keep;
	uint64_t spool_max_bytes;
	double pyro_timeout;
	const char *pyro_ca;
	const char *pyro_proxy;	   /* --pyroscope-proxy URL */
	const char *diff_paths[2]; /* diff: BASE and NEW */
	/* heapbpf agent (user/agent.c) */
	const char *select_rules[CLI_MAX_RULES];  /* --select RULE, as typed */
	const char *exclude_rules[CLI_MAX_RULES]; /* --exclude RULE, as typed */
	size_t nselect, nexclude;
	unsigned long max_targets; /* --max-targets: processes sampled at once */
	uint64_t max_rss;	   /* --max-rss: heapbpf's own RSS */
	double max_cpu;		   /* --max-cpu: heapbpf's own CPU, percent of one core */
	double rotate;		   /* --rotate SECONDS between the budget's rotations */
	const char *test_root;	   /* --test-root DIR (tests): its /var/log, /var/lib/docker */
	const char *labels[CLI_MAX_LABELS]; /* --label K=V, as typed */
	/* --wrapper NAME: more allocator wrappers that sites are named past (profile/wrappers.h) */
	const char *wrappers[CLI_MAX_WRAPPERS];
	size_t nwrappers;
	const char *binary_dirs[CLI_MAX_DIRS + 1]; /* report: --binary-path, NULL-terminated */
	enum cli_mode mode;
	/* the command as typed, for its --help and its entry in main's table (mode: what runs) */
	enum cli_mode command;
	pid_t pid;
	int nbinary_dirs;
	enum out_format format;
	enum hb_value sample_type;
	mode_t file_mode; /* --file-mode: of every profile, snapshot and recording written */
	/* heapbpf top: the first sort and rows */
	enum top_sort top_sort;
	enum top_by top_by;
	unsigned int formats; /* 1 << FMT_* of every -f, for --output-dir */
	int nlabels;
	int npids; /* of pids[] (beside nlabels: no padding) */
	int pyro_retries;
	/* --pid N,N,...: every pid (npids of them), pids[0] == pid; one session for them */
	pid_t pids[CLI_MAX_PIDS];
	bool core;	       /* report --core: it is a core file */
	bool output_set;       /* -o or --format given */
	bool reset;	       /* --reset: only restore what a killed heapbpf left */
	bool allow_shared_dir; /* --allow-shared-dir: directories other users can write */
	bool watch;	       /* heapbpf watch */
	bool watch_no_oom;     /* --no-oom: no profile of an OOM victim */
	bool watch_pressure;   /* --on-pressure: the kernel's word of memory pressure */
	bool raw;
	bool follow_forks; /* also profile the children forked while sampling is on */
	bool children;	   /* --children: also the targets' descendants running at the start */
	bool rss_json;	   /* heapbpf rss --format json */
	bool live_heap;	   /* --live-heap: read jemalloc's own tables once (user/liveheap.c) */
	/* what is leaking (user/collect/leaks.h) */
	bool leaks; /* --leaks: leak suspects and lifetimes after the profile */
	bool quiet, verbose;
	bool help; /* -h: the command's help is to be printed (cli_parse returned 1) */
	bool zstd; /* --compress zstd: folded files as .folded.zst */
	bool pyro_multipart;
	bool pyro_ingest; /* --pyroscope-api ingest (default: push) */
	bool pyro_api;	  /* --pyroscope-api was given */
};

/*
 * Parses argv into c. Returns 0 to run, 1 when it printed help or the
 * version (exit 0), or -EINVAL after printing a one-sentence error.
 */
int cli_parse(int argc, char **argv, struct cli *c);

/*
 * The option that makes c's run one process's ("--record names one file",
 * ...), as a message ends with it; NULL when none does.
 */
const char *cli_one_process_option(const struct cli *c);

#endif /* __HEAPBPF_CLI_H */
