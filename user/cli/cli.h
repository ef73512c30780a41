/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The command line of heapbpf: the options every command reads alike, in
 * groups (cli.c), the refusals several commands share, and the table of
 * commands (user/main.c) whose parsers (user/cmd/) check what applies to
 * each. What a live run is asked for goes in struct run_opts (run/opts.h),
 * the part of struct cli the run layer sees.
 */
#ifndef __HEAPBPF_CLI_H
#define __HEAPBPF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "run/opts.h"
#include "util/version.h"

enum cli_mode {
	MODE_LIVE,   /* heapbpf --pid N */
	MODE_REPORT, /* heapbpf report FILE */
	MODE_TOP,    /* heapbpf top --pid N */
	MODE_DIFF,   /* heapbpf diff BASE NEW */
	MODE_WATCH,  /* heapbpf watch --pid N: a live run with triggers */
	MODE_AGENT,  /* heapbpf agent: every selected jemalloc process of the node */
	MODE_STATUS, /* heapbpf status: every heapbpf running on the host */
	MODE_RSS,    /* heapbpf rss --pid N: where the RSS is */
};

#define CLI_MAX_DIRS 16

struct cli {
	struct run_opts run;	   /* what the run layer is asked for */
	const char *recording;	   /* report: the recording (or core) to read */
	const char *exe;	   /* report --exe: a core's executable */
	double from, to;	   /* report: window in seconds; to < 0 = the end */
	char *debug_dirs;	   /* --debug-dir values joined by ':', or NULL (owned) */
	const char *diff_paths[2]; /* diff: BASE and NEW */
	const char *binary_dirs[CLI_MAX_DIRS + 1]; /* report: --binary-path, NULL-terminated */
	/* what runs: the command typed, but heapbpf --reset without a target runs the agent's */
	enum cli_mode mode;
	/* the command as typed, for its --help */
	enum cli_mode command;
	int nbinary_dirs;
	mode_t file_mode;      /* --file-mode: of every profile, snapshot and recording written */
	bool core;	       /* report --core: it is a core file */
	bool output_set;       /* -o or --format given */
	bool allow_shared_dir; /* --allow-shared-dir: directories other users can write */
	bool rss_json;	       /* heapbpf rss --format json */
	bool help;	       /* -h: the command's help is to be printed (cli_parse returned 1) */
	bool pyro_api;	       /* --pyroscope-api was given */
};

/* What the options said that struct cli's values do not tell, for the commands' checks. */
struct cli_given {
	bool pid;      /* --pid */
	bool duration; /* --duration */
	bool type;     /* --sample-type */
	bool top;      /* --sort or --by */
	bool watch;    /* a trigger option of heapbpf watch */
	bool agent;    /* an option of heapbpf agent's */
};

struct run;

/* A command: a row of main's table. */
struct cli_command {
	const char *name; /* as typed after heapbpf; NULL: none (heapbpf --pid N) */
	enum cli_mode mode;
	/*
	 * Checks what the options and the operands (n of them) say for this
	 * command, and sets its defaults: 0, or -EINVAL after cli_bad().
	 */
	int (*parse)(struct cli *c, const struct cli_given *g, int n, char **operands);
	int (*run)(const struct cli *c, struct run *r, char *err, size_t errlen);
	const char *help; /* its --help */
};

/*
 * Parses argv into c for one of the n commands of cmds; *cmd is the one
 * that runs. Returns 0 to run, 1 when it printed the version or help was
 * asked for (c->help: print (*cmd)->help; exit 0), or -EINVAL after
 * printing a one-sentence error.
 */
int cli_parse(int argc, char **argv, struct cli *c, const struct cli_command *cmds, size_t n,
	      const struct cli_command **cmd);

/* One sentence on stderr, the way every refused command line ends (exit 2 in main): -EINVAL. */
int cli_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* __HEAPBPF_CLI_H */
