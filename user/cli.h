/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command-line options of heapbpf. */
#ifndef __HEAPBPF_CLI_H
#define __HEAPBPF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile.h"
#include "sink.h"
#include "top.h"
#include "version.h"

enum cli_mode {
	MODE_LIVE,   /* heapbpf --pid N */
	MODE_REPORT, /* heapbpf report FILE */
	MODE_TOP,    /* heapbpf top --pid N */
	MODE_DIFF,   /* heapbpf diff BASE NEW */
};

#define CLI_MAX_DIRS   16
#define CLI_MAX_LABELS 16
#define CLI_MAX_PIDS   1024 /* --pid N,N,...: one session (user/fleet.c) */
/* --ringbuf-size's default; with --interval, whose windows pause the reading */
#define RINGBUF_DEFAULT (8u << 20)
#define RINGBUF_DAEMON	(16u << 20)

struct cli {
	enum cli_mode mode;
	pid_t pid;
	/* --pid N,N,...: every pid (npids of them), pids[0] == pid; one session for them */
	pid_t pids[CLI_MAX_PIDS];
	const char *record;			   /* --record FILE, or NULL */
	const char *recording;			   /* report: the recording (or core) to read */
	bool core;				   /* report --core: it is a core file */
	const char *exe;			   /* report --exe: a core's executable */
	const char *diff_paths[2];		   /* diff: BASE and NEW */
	double from, to;			   /* report: window in seconds; to < 0 = the end */
	const char *binary_dirs[CLI_MAX_DIRS + 1]; /* report: --binary-path, NULL-terminated */
	int nbinary_dirs;
	bool output_set; /* -o or --format given */
	bool reset;	 /* --reset: only restore what a killed heapbpf left */
	double duration; /* seconds; 0 = until a signal */
	const char *output;
	enum out_format format;
	enum hb_value sample_type;
	mode_t file_mode; /* --file-mode: of every profile, snapshot and recording written */
	bool raw;
	size_t ringbuf_bytes;
	const char *layout; /* forced jemalloc layout, or NULL */
	char *debug_dirs;   /* --debug-dir values joined by ':', or NULL (owned) */
	bool follow_forks;  /* also profile the children forked while sampling is on */
	bool live_heap;	    /* --live-heap: read jemalloc's own tables once (user/liveheap.c) */
	/* what is leaking (user/leaks.h) */
	bool leaks;	       /* --leaks: leak suspects and lifetimes after the profile */
	const char *at_peak;   /* --at-peak FILE: the in-use profile at the peak, or NULL */
	uint64_t temporary_ns; /* --temporary-threshold: shorter lifetimes are temporary */
	/* heapbpf top: the first sort and rows */
	enum top_sort top_sort;
	enum top_by top_by;
	bool quiet, verbose;
	/* fleet use (user/fleet.c) */
	const char *unit;	/* --unit NAME */
	const char *pidfile;	/* --pidfile PATH */
	const char *output_dir; /* --output-dir DIR: snapshot mode */
	unsigned int formats;	/* 1 << FMT_* of every -f, for --output-dir */
	bool zstd;		/* --compress zstd: folded files as .folded.zst */
	unsigned long keep;	/* --keep N snapshots, 0 = all */
	uint64_t max_bytes;	/* --max-bytes, 0 = no limit */
	double interval;	/* --interval SECONDS, 0 = one window */
	const char *pyroscope;	/* --pyroscope URL */
	const char *service_name;
	const char *labels[CLI_MAX_LABELS]; /* --label K=V, as typed */
	int nlabels;
	int npids; /* of pids[] (beside nlabels: no padding) */
	const char *spool_dir;
	unsigned long spool_keep;
	uint64_t spool_max_bytes;
	double pyro_timeout;
	int pyro_retries;
	bool pyro_multipart;
	bool pyro_ingest; /* --pyroscope-api ingest (default: push) */
	bool pyro_api;	  /* --pyroscope-api was given */
	const char *pyro_ca;
};

/*
 * Parses argv into c. Returns 0 to run, 1 when it printed help or the
 * version (exit 0), or -EINVAL after printing a one-sentence error.
 */
int cli_parse(int argc, char **argv, struct cli *c);

#endif /* __HEAPBPF_CLI_H */
