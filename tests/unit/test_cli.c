// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cli_parse: defaults, every option, every error. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/profile.h"
#include "commands.h"

#define MAXARGS 160

struct run {
	int rc;
	struct cli c;
	char *out, *err; /* what cli_parse printed */
};

/*
 * Every argv string made by parse_v stays allocated until the test ends:
 * cli_parse's struct points into argv, and so may getopt's saved state.
 */
static char *kept[256];
static size_t nkept;

static char *keep(const char *s)
{
	char *d = strdup(s);

	cr_assert_not_null(d);
	cr_assert_lt(nkept, sizeof(kept) / sizeof(kept[0]));
	kept[nkept++] = d;
	return d;
}

static void free_kept(void)
{
	while (nkept)
		free(kept[--nkept]);
}

TestSuite(cli, .fini = free_kept);

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* Runs cli_parse on "heapbpf" followed by the NULL-terminated args, capturing its output. */
static struct run parse_v(const char *const *args)
{
	FILE *saved_out = stdout, *saved_err = stderr;
	char *argv[MAXARGS + 2];
	size_t outlen, errlen;
	struct run r = { 0 };
	int argc = 0;

	argv[argc++] = keep("heapbpf");
	for (; args[argc - 1]; argc++) {
		cr_assert_lt(argc, MAXARGS);
		argv[argc] = keep(args[argc - 1]);
	}
	argv[argc] = NULL;

	stdout = open_memstream(&r.out, &outlen);
	stderr = open_memstream(&r.err, &errlen);
	cr_assert(stdout && stderr);
	r.rc = hb_cli_parse(argc, argv, &r.c);
	fclose(stdout);
	fclose(stderr);
	stdout = saved_out;
	stderr = saved_err;
	return r;
}

#define parse(...) parse_v((const char *const[]){ __VA_ARGS__, NULL })

Test(cli, defaults)
{
	struct run r = parse("--pid", "1234");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.pid, 1234);
	cr_assert_eq(r.c.run.duration, 10.0);
	cr_assert_null(r.c.run.output);
	cr_assert_eq(r.c.run.format, FMT_PPROF);
	cr_assert_eq(r.c.run.sample_type, HB_INUSE_SPACE);
	cr_assert_not(r.c.run.raw);
	cr_assert_eq(r.c.run.ringbuf_bytes, 8u << 20);
	cr_assert_null(r.c.run.layout);
	cr_assert_not(r.c.run.quiet);
	cr_assert_not(r.c.run.verbose);
	cr_assert_not(r.c.run.follow_forks);
	cr_assert_str_empty(r.err);
	cr_assert_str_empty(r.out);
	run_free(&r);
}

/* A daemon (--interval) stops reading while it writes a window: a larger ring by default. */
Test(cli, interval_ring_buffer_default)
{
	struct run r = parse("--pid", "1", "--interval", "2", "-d", "6", "--output-dir", "/tmp");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.ringbuf_bytes, RINGBUF_DAEMON);
	cr_assert_eq(RINGBUF_DAEMON, 16u << 20);
	run_free(&r);
	r = parse("--pid", "1", "--interval", "2", "-d", "6", "--output-dir", "/tmp",
		  "--ringbuf-size", "2");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.ringbuf_bytes, 2u << 20, "the size asked for, whatever the mode");
	run_free(&r);
}

/* --children with --pid, a --pid list, --pidfile, and beside --follow-forks; -o: known later */
Test(cli, children)
{
	struct run r = parse("--pid", "11", "--children");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert(r.c.run.children);
	run_free(&r);
	r = parse("--pid", "11,12", "--children", "--follow-forks", "--output-dir", "d");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert(r.c.run.children && r.c.run.follow_forks);
	run_free(&r);
	/* how many processes -o would name is known once they are found (fleet.c) */
	r = parse("--pidfile", "/run/x.pid", "--children", "-o", "x.pb.gz");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert(r.c.run.children);
	run_free(&r);
	r = parse("--pid", "11");
	cr_assert_not(r.c.run.children);
	run_free(&r);
}

Test(cli, pid_list)
{
	struct run r = parse("--pid", "11,12,13");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.npids, 3);
	cr_assert_eq(r.c.run.pid, 11);
	cr_assert_eq(r.c.run.pids[0], 11);
	cr_assert_eq(r.c.run.pids[1], 12);
	cr_assert_eq(r.c.run.pids[2], 13);
	run_free(&r);
	/* the last --pid wins, list or not */
	r = parse("-p", "5,6", "-p", "7");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.npids, 1);
	cr_assert_eq(r.c.run.pid, 7);
	run_free(&r);
	/* a pid named twice is one target (two would contend for its guard) */
	r = parse("--pid", "8,9,8,9");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.npids, 2);
	cr_assert_eq(r.c.run.pids[0], 8);
	cr_assert_eq(r.c.run.pids[1], 9);
	run_free(&r);
}

/* A list and one file or one terminal: a usage error (exit 2: errors/usage), before any process is looked at. */
Test(cli, pid_list_with_one_file_is_a_usage_error)
{
	static const char *const cases[][7] = {
		{ "--pid", "11,12", "-o", "x.pb.gz", NULL },
		{ "--pid", "11,12", "--record", "r.hbrec", NULL },
		{ "--pid", "11,12", "--at-peak", "peak.pb.gz", NULL },
		{ "top", "--pid", "11,12", NULL },
	};
	static const char *const want[] = { "--output names one file; use --output-dir",
					    "--record names one file", "--at-peak names one file",
					    "heapbpf top shows one process" };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r = parse_v(cases[i]);

		cr_assert_eq(r.rc, -EINVAL, "case %zu: %d, stderr: %s", i, r.rc, r.err);
		cr_assert(strstr(r.err, "--pid lists 2 processes and "), "%s", r.err);
		cr_assert(strstr(r.err, want[i]), "%s", r.err);
		run_free(&r);
	}
	/* one pid, or a list with --output-dir: fine */
	{
		struct run r = parse("--pid", "11", "-o", "x.pb.gz");

		cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
		run_free(&r);
		r = parse("--pid", "11,12", "--output-dir", "d");
		cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
		run_free(&r);
	}
}

Test(cli, long_options)
{
	char *argv[] = {
		strdup("heapbpf"),
		strdup("--pid"),
		strdup("42"),
		strdup("--duration"),
		strdup("2.5"),
		strdup("--output"),
		strdup("out.folded"),
		strdup("--format"),
		strdup("folded"),
		strdup("--sample-type"),
		strdup("alloc_objects"),
		strdup("--raw"),
		strdup("--ringbuf-size"),
		strdup("64"),
		strdup("--jemalloc-layout"),
		strdup("5.3.0"),
		strdup("--quiet"),
		strdup("--verbose"),
		strdup("--follow-forks"),
		NULL,
	};
	int argc = sizeof(argv) / sizeof(argv[0]) - 1;
	char *copies[sizeof(argv) / sizeof(argv[0])];
	struct cli c;

	memcpy(copies, argv, sizeof(argv));
	cr_assert_eq(hb_cli_parse(argc, argv, &c), 0);
	cr_assert(c.run.follow_forks);
	cr_assert_eq(c.run.pid, 42);
	cr_assert_eq(c.run.duration, 2.5);
	cr_assert_str_eq(c.run.output, "out.folded");
	cr_assert_eq(c.run.format, FMT_FOLDED);
	cr_assert_eq(c.run.sample_type, HB_ALLOC_OBJECTS);
	cr_assert(c.run.raw);
	cr_assert_eq(c.run.ringbuf_bytes, 64u << 20);
	cr_assert_str_eq(c.run.layout, "5.3.0");
	cr_assert(c.run.quiet);
	cr_assert(c.run.verbose);
	for (int i = 0; i < argc; i++)
		free(copies[i]);
}

Test(cli, file_mode)
{
	struct run r = parse("-p", "1");

	/* profiles hold the target's names and addresses: the owner's alone by default */
	cr_assert_eq(r.rc, 0);
	cr_assert_eq(r.c.file_mode, 0600);
	run_free(&r);
	r = parse("-p", "1", "--file-mode", "0640");
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.c.file_mode, 0640);
	run_free(&r);
	r = parse("-p", "1", "--file-mode=644");
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.c.file_mode, 0644);
	run_free(&r);
	r = parse("report", "x.hbr", "--file-mode", "0666");
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.c.file_mode, 0666);
	run_free(&r);
	r = parse("diff", "a.pb.gz", "b.pb.gz", "--file-mode", "0600");
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.c.file_mode, 0600);
	run_free(&r);
}

Test(cli, short_options_and_equals_forms)
{
	struct run r = parse("-p", "7", "-d", "0", "-o", "-", "-f", "folded", "-t", "inuse_objects",
			     "-q", "-v");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.pid, 7);
	cr_assert_eq(r.c.run.duration, 0.0);
	cr_assert_str_eq(r.c.run.output, "-");
	cr_assert_eq(r.c.run.format, FMT_FOLDED);
	cr_assert_eq(r.c.run.sample_type, HB_INUSE_OBJECTS);
	cr_assert(r.c.run.quiet && r.c.run.verbose);
	run_free(&r);

	r = parse("--pid=9", "--duration=60", "--format=pprof", "--ringbuf-size=1", "-qv");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.pid, 9);
	cr_assert_eq(r.c.run.duration, 60.0);
	cr_assert_eq(r.c.run.format, FMT_PPROF);
	cr_assert_eq(r.c.run.ringbuf_bytes, 1u << 20);
	cr_assert(r.c.run.quiet && r.c.run.verbose);
	cr_assert_not(r.c.run.raw);
	run_free(&r);

	r = parse("-p9", "-ffolded", "-talloc_space", "--ringbuf-size", "1024");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.pid, 9);
	cr_assert_eq(r.c.run.format, FMT_FOLDED);
	cr_assert_eq(r.c.run.sample_type, HB_ALLOC_SPACE);
	cr_assert_eq(r.c.run.ringbuf_bytes, (size_t)1024 << 20);
	run_free(&r);
}

Test(cli, every_sample_type_with_folded)
{
	static const struct {
		const char *name;
		enum hb_value v;
	} t[] = {
		{ "alloc_objects", HB_ALLOC_OBJECTS },
		{ "alloc_space", HB_ALLOC_SPACE },
		{ "inuse_objects", HB_INUSE_OBJECTS },
		{ "inuse_space", HB_INUSE_SPACE },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		/* order does not matter: -t before -f */
		struct run r = parse("-t", t[i].name, "-p", "5", "-f", "folded");

		cr_assert_eq(r.rc, 0, "%s: %s", t[i].name, r.err);
		cr_assert_eq(r.c.run.sample_type, t[i].v);
		run_free(&r);
	}
}

Test(cli, last_option_wins)
{
	/* not -f: two formats for one file are refused (format_follows_the_file_name) */
	struct run r = parse("-p", "5", "-p", "6", "-f", "folded", "-f", "folded");

	cr_assert_eq(r.rc, 0);
	cr_assert_eq(r.c.run.pid, 6);
	cr_assert_eq(r.c.run.format, FMT_FOLDED);
	run_free(&r);
}

/* Without -f the format is the one -o's name ends in; any other name: pprof. */
Test(cli, format_follows_the_file_name)
{
	static const struct {
		const char *args[8];
		enum out_format want;
	} t[] = {
		{ { "-p", "1", "-o", "heap.html" }, FMT_HTML },
		{ { "-p", "1", "-o", "dir.d/heap.HTM" }, FMT_HTML },
		{ { "-p", "1", "-o", "heap.folded" }, FMT_FOLDED },
		{ { "-p", "1", "-o", "heap.collapsed" }, FMT_FOLDED },
		{ { "-p", "1", "-o", "heap.pb.gz" }, FMT_PPROF },
		{ { "-p", "1", "-o", "heap.pb" }, FMT_PPROF },
		{ { "-p", "1", "-o", "heap.pprof" }, FMT_PPROF },
		{ { "-p", "1", "-o", "heap.txt" }, FMT_PPROF },
		{ { "-p", "1", "-o", "-" }, FMT_PPROF },
		{ { "-p", "1", "-o", ".html" }, FMT_PPROF },
		{ { "-p", "1", "-o", "html.d/heap" }, FMT_PPROF },
		/* -f, with a name that agrees or says nothing */
		{ { "-p", "1", "-f", "html", "-o", "heap.html" }, FMT_HTML },
		{ { "-p", "1", "-f", "folded", "-o", "heap.txt" }, FMT_FOLDED },
		{ { "-p", "1", "-f", "html", "-f", "html" }, FMT_HTML },
		/* -t applies to the format the name gave */
		{ { "-p", "1", "-o", "heap.folded", "-t", "alloc_space" }, FMT_FOLDED },
		{ { "-p", "1", "-o", "heap.html", "--at-peak", "peak.html" }, FMT_HTML },
		{ { "report", "x.hbr", "-o", "r.html" }, FMT_HTML },
		{ { "report", "x.hbr", "-o", "r.folded" }, FMT_FOLDED },
		{ { "diff", "a", "b", "-o", "c.folded" }, FMT_FOLDED },
		{ { "diff", "a", "b", "-o", "c.html" }, FMT_HTML },
		{ { "diff", "a", "b", "-f", "html", "-o", "c.htm" }, FMT_HTML },
		{ { "top", "-p", "1", "-o", "t.folded" }, FMT_FOLDED },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct run r = parse_v(t[i].args);

		cr_assert_eq(r.rc, 0, "%s %s: %s", t[i].args[2], t[i].args[3], r.err);
		cr_assert_eq(r.c.run.format, t[i].want, "%s %s %s", t[i].args[2], t[i].args[3],
			     t[i].args[4] ? t[i].args[4] : "");
		run_free(&r);
	}
	/* --output-dir: a file per format, as before */
	struct run r = parse("-p", "1", "--output-dir", "d", "-f", "pprof", "-f", "html");

	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.c.run.formats, 1u << FMT_PPROF | 1u << FMT_HTML);
	run_free(&r);
}

/* What one command takes that another refuses: the values it parses to. */
Test(cli, report_takes_its_inputs)
{
	struct run r = parse("report", "x.hbr", "--core", "--exe", "./svc", "--jemalloc-layout",
			     "5.3.0", "--binary-path", "/b", "--from", "1", "--to", "2.5", "--raw");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_REPORT);
	cr_assert_str_eq(r.c.recording, "x.hbr");
	cr_assert(r.c.core && r.c.run.raw);
	cr_assert_str_eq(r.c.exe, "./svc");
	cr_assert_str_eq(r.c.run.layout, "5.3.0");
	cr_assert_eq(r.c.nbinary_dirs, 1);
	cr_assert_str_eq(r.c.binary_dirs[0], "/b");
	cr_assert_null(r.c.binary_dirs[1]);
	cr_assert_eq(r.c.from, 1.0);
	cr_assert_eq(r.c.to, 2.5);
	cr_assert_eq(r.c.run.duration, 10.0);
	cr_assert_eq(r.c.run.ringbuf_bytes, RINGBUF_DEFAULT);
	run_free(&r);
	/* no --to: the end */
	r = parse("report", "x.hbr", "-f", "folded", "-t", "alloc_space", "--leaks");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.to, -1.0);
	cr_assert_eq(r.c.run.format, FMT_FOLDED);
	cr_assert_eq(r.c.run.sample_type, HB_ALLOC_SPACE);
	cr_assert(r.c.run.leaks);
	run_free(&r);
}

Test(cli, diff_takes_two_profiles)
{
	/* -t ranks diff's summary: taken with pprof too */
	struct run r = parse("diff", "a.pb.gz", "b.pb.gz", "-t", "alloc_space", "--binary-path",
			     "/b", "--debug-dir", "/d", "-q");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_DIFF);
	cr_assert_str_eq(r.c.diff_paths[0], "a.pb.gz");
	cr_assert_str_eq(r.c.diff_paths[1], "b.pb.gz");
	cr_assert_eq(r.c.run.format, FMT_PPROF);
	cr_assert_eq(r.c.run.sample_type, HB_ALLOC_SPACE);
	cr_assert_eq(r.c.nbinary_dirs, 1);
	cr_assert_str_eq(r.c.debug_dirs, "/d");
	cr_assert(r.c.run.quiet);
	free(r.c.debug_dirs);
	run_free(&r);
	/* options before the operands */
	r = parse("diff", "-f", "folded", "-o", "c.folded", "a", "b");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.c.diff_paths[0], "a");
	cr_assert_str_eq(r.c.diff_paths[1], "b");
	cr_assert_str_eq(r.c.run.output, "c.folded");
	cr_assert_eq(r.c.run.format, FMT_FOLDED);
	run_free(&r);
	/* a differential flame graph page, of the -t value */
	r = parse("diff", "a", "b", "-f", "html", "-t", "alloc_objects");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.format, FMT_HTML);
	cr_assert_eq(r.c.run.sample_type, HB_ALLOC_OBJECTS);
	run_free(&r);
}

Test(cli, top_runs_until_stopped)
{
	struct run r = parse("top", "-p", "1", "--debug-dir", "/d", "--ringbuf-size", "2");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_TOP);
	cr_assert_eq(r.c.run.duration, 0.0, "top's default: until q");
	cr_assert_eq(r.c.run.ringbuf_bytes, 2u << 20);
	free(r.c.debug_dirs);
	run_free(&r);
	/* a live run's duration stays 10 s, top's given one is kept */
	r = parse("top", "-p", "1", "-d", "30");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.duration, 30.0);
	run_free(&r);
}

/* --debug-dir, repeatable, for every command: joined by ':' */
Test(cli, debug_dirs_joined)
{
	struct run r = parse("-p", "1", "--debug-dir", "/a", "--debug-dir=/b");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.c.debug_dirs, "/a:/b");
	cr_assert_eq(r.c.mode, MODE_LIVE);
	free(r.c.debug_dirs);
	run_free(&r);
}

/* --wrapper: repeatable, names and globs as typed, for every command that names sites */
Test(cli, wrappers_repeatable)
{
	struct run r = parse("-p", "1", "--wrapper", "my_alloc", "--wrapper=app_*_alloc");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.nwrappers, 2);
	cr_assert_str_eq(r.c.run.wrappers[0], "my_alloc");
	cr_assert_str_eq(r.c.run.wrappers[1], "app_*_alloc");
	run_free(&r);

	r = parse("-p", "1");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.nwrappers, 0);
	run_free(&r);

	r = parse("top", "-p", "1", "--wrapper", "operator new[](unsigned long)");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.c.run.wrappers[0], "operator new[](unsigned long)");
	run_free(&r);

	r = parse("report", "x.hbr", "--wrapper", "x*");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.nwrappers, 1);
	run_free(&r);

	r = parse("watch", "-p", "1", "--output-dir", "/tmp", "--wrapper", "x*");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.nwrappers, 1);
	run_free(&r);

	r = parse("-p", "1", "--live-heap", "--wrapper", "x*");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	run_free(&r);

	cr_assert_not_null(strstr(profile_help, "--wrapper NAME"));
}

/* At most RUN_MAX_WRAPPERS, said in one sentence. */
Test(cli, wrappers_at_most_64)
{
	const char *args[2 + 2 * (RUN_MAX_WRAPPERS + 1) + 1] = { "-p", "1" };
	struct run r;
	size_t n = 2;

	for (int i = 0; i <= RUN_MAX_WRAPPERS; i++) {
		args[n++] = "--wrapper";
		args[n++] = "w";
	}
	args[n] = NULL;
	r = parse_v(args);
	cr_assert_eq(r.rc, -EINVAL);
	cr_assert_str_eq(r.err, "heapbpf: at most 64 --wrapper options (see heapbpf --help)\n");
	run_free(&r);
}

Test(cli, help_and_version)
{
	struct run r = parse("--help");

	/* asked for: main prints the command's (its table), cli_parse nothing */
	cr_assert_eq(r.rc, 1);
	cr_assert(r.c.help);
	cr_assert_eq(r.c.command, MODE_LIVE);
	cr_assert_str_empty(r.out);
	cr_assert_str_empty(r.err);
	cr_assert_not_null(strstr(profile_help, "Usage: heapbpf --pid PID"));
	cr_assert_not_null(strstr(profile_help, "--sample-type"));
	run_free(&r);

	/* help wins over a missing --pid, and -h is the same; a command's is its own */
	r = parse("-h");
	cr_assert_eq(r.rc, 1);
	cr_assert(r.c.help);
	run_free(&r);
	r = parse("watch", "-h");
	cr_assert_eq(r.rc, 1);
	cr_assert(r.c.help);
	cr_assert_eq(r.c.command, MODE_WATCH);
	run_free(&r);

	r = parse("--version");
	cr_assert_eq(r.rc, 1);
	cr_assert_not(r.c.help);
	cr_assert_eq(strncmp(r.out, "heapbpf ", 8), 0, "%s", r.out);
	run_free(&r);
}

/*
 * Criterion hands each case to a new process, where pointers into this one
 * are not valid: the strings are stored inline.
 */
struct bad_case {
	char args[8][24]; /* ends at the first "" */
	char msg[112];	  /* part of the one-sentence error */
};

static struct bad_case bad_cases[] = {
	{ { "" }, "--pid is required" },
	{ { "-d", "5" }, "--pid is required" },
	{ { "--pid", "abc" }, "\"abc\"" },
	{ { "--pid", "0" }, "\"0\"" },
	{ { "--pid", "-3" }, "\"-3\"" },
	{ { "--pid=-3" }, "\"-3\"" },
	{ { "--pid", "12abc" }, "\"12abc\"" },
	{ { "--pid", "" }, "--pid" },
	{ { "--pid", "99999999999" }, "\"99999999999\"" },
	{ { "--pid", "1,,2" }, "\"1,,2\"" },
	{ { "--pid", "1," }, "\"1,\"" },
	{ { "--pid", "1,x" }, "\"1,x\"" },
	{ { "--pid", "1,2", "--live-heap" }, "one --pid" },
	{ { "-p", "1", "--duration", "abc" }, "\"abc\"" },
	{ { "-p", "1", "--duration", "-1" }, "\"-1\"" },
	{ { "-p", "1", "--duration", "nan" }, "\"nan\"" },
	{ { "-p", "1", "--duration", "inf" }, "\"inf\"" },
	{ { "-p", "1", "--duration", "1e9" }, "\"1e9\"" },
	{ { "-p", "1", "--duration", "5s" }, "\"5s\"" },
	{ { "-p", "1", "--duration", "" }, "--duration" },
	{ { "-p", "1", "--format", "svg" }, "\"svg\"" },
	{ { "-p", "1", "--format", "PPROF" }, "\"PPROF\"" },
	/* one file, one format: -f against -o's name, two -f */
	{ { "-p", "1", "-f", "pprof", "-f", "html", "-o", "two.pb.gz" },
	  "-f pprof and -f html: one file takes one format; give one -f, or --output-dir" },
	{ { "-p", "1", "-f", "folded", "-f", "pprof" }, "-f pprof and -f folded" },
	{ { "report", "x.hbr", "-f", "html", "-f", "folded" }, "-f folded and -f html" },
	{ { "-p", "1", "-f", "pprof", "-o", "heap.html" },
	  "--output \"heap.html\" is named for html but the format is pprof: drop -f, or end "
	  "the name in .pb.gz" },
	{ { "diff", "a", "b", "-f", "folded", "-o", "c.pb.gz" },
	  "--output \"c.pb.gz\" is named for pprof but the format is folded" },
	{ { "-p", "1", "-o", "heap.html", "--at-peak", "peak.pb.gz" },
	  "--at-peak \"peak.pb.gz\" is named for pprof but the format is html: end the name in "
	  ".html" },
	{ { "-p", "1", "-o", "heap.pb.gz", "-t", "alloc_space" }, "--sample-type" },
	{ { "-p", "1", "--sample-type", "alloc_space" }, "--sample-type" },
	{ { "-p", "1", "-f", "pprof", "-t", "inuse_space" }, "--sample-type" },
	{ { "-p", "1", "-f", "folded", "-t", "bogus" }, "\"bogus\"" },
	{ { "-p", "1", "--ringbuf-size", "0" }, "\"0\"" },
	{ { "-p", "1", "--ringbuf-size", "1025" }, "\"1025\"" },
	{ { "-p", "1", "--ringbuf-size", "x" }, "\"x\"" },
	{ { "-p", "1", "--output", "" }, "--output" },
	{ { "-p", "1", "--bogus" }, "--bogus" },
	{ { "-p", "1", "-x" }, "unknown option" },
	{ { "-p", "1", "-qz" }, "unknown option" },
	{ { "--pid" }, "--pid" },
	{ { "-p" }, "-p" },
	{ { "-p", "1", "--duration" }, "--duration" },
	{ { "-p", "1", "--format" }, "--format" },
	{ { "-p", "1", "-o" }, "-o" },
	{ { "-p", "1", "--raw=yes" }, "--raw" },
	{ { "-p", "1", "extra" }, "\"extra\"" },
	{ { "extra", "-p", "1" }, "\"extra\"" },
	{ { "-p", "1", "--", "-q" }, "\"-q\"" },
	{ { "-p", "1", "--follow-forks", "--record", "x" }, "--follow-forks and --record" },
	{ { "report", "x.hbr", "--follow-forks" }, "--follow-forks" },
	/* --children: the descendants of --pid's or --pidfile's processes, in a live run */
	{ { "--unit", "x", "--children" }, "--children applies to --pid and --pidfile" },
	{ { "-p", "1", "--live-heap", "--children" }, "--children does not apply" },
	{ { "top", "-p", "1", "--children" }, "--children do not apply" },
	{ { "report", "x.hbr", "--children" }, "--children do not apply" },
	{ { "diff", "a", "b", "--children" }, "--children" },
	{ { "watch", "--pidfile", "x", "--output-dir", "d", "--children" },
	  "--children does not apply" },
	{ { "-p", "1", "--file-mode", "0755" }, "\"0755\"" },
	{ { "-p", "1", "--file-mode", "4600" }, "\"4600\"" },
	{ { "-p", "1", "--file-mode", "0400" }, "\"0400\"" },
	{ { "-p", "1", "--file-mode", "0044" }, "\"0044\"" },
	{ { "-p", "1", "--file-mode", "644x" }, "\"644x\"" },
	{ { "-p", "1", "--file-mode", "0o644" }, "\"0o644\"" },
	{ { "-p", "1", "--file-mode", "60" }, "\"60\"" },
	{ { "-p", "1", "--file-mode", "00644" }, "\"00644\"" },
	{ { "-p", "1", "--file-mode", "0688" }, "\"0688\"" },
	{ { "-p", "1", "--file-mode", "" }, "--file-mode" },
	{ { "-p", "1", "--live-heap", "-d", "5" }, "--live-heap reads jemalloc's tables" },
	{ { "-p", "1", "--live-heap", "--follow-forks" }, "--live-heap reads jemalloc's tables" },
	{ { "-p", "1", "--live-heap", "--interval", "5" }, "--live-heap reads jemalloc's tables" },
	{ { "-p", "1", "--live-heap", "--record", "x" }, "--live-heap reads jemalloc's tables" },
	{ { "--unit", "x", "--live-heap" }, "--live-heap reads one process" },
	{ { "report", "x.hbr", "--live-heap" }, "--live-heap reads a running" },
	/* what each command refuses that another takes */
	{ { "report" }, "report needs a recording file" },
	{ { "report", "x.hbr", "--pid", "1" }, "report reads a recording" },
	{ { "report", "x.hbr", "-d", "5" }, "report reads a recording" },
	{ { "report", "x.hbr", "--reset" }, "report reads a recording" },
	{ { "report", "x.hbr", "--from", "5", "--to", "5" }, "--to must be after --from" },
	{ { "report", "x.hbr", "y.hbr" }, "unexpected argument \"y.hbr\"" },
	{ { "report", "x.hbr", "--sort", "alloc" }, "--sort and --by apply" },
	{ { "report", "x.hbr", "--pyroscope", "http://x" }, "the fleet options" },
	{ { "diff", "a.pb.gz" }, "diff needs two profiles" },
	{ { "diff", "a", "b", "c" }, "unexpected argument \"c\"" },
	{ { "diff", "a", "b", "--raw" }, "diff compares two profiles" },
	{ { "diff", "a", "b", "--from", "1" }, "diff compares two profiles" },
	{ { "diff", "a", "b", "--jemalloc-layout", "5.3.0" }, "diff compares two profiles" },
	{ { "diff", "a", "b", "-f", "html", "-o", "c.pb.gz" },
	  "--output \"c.pb.gz\" is named for pprof but the format is html: drop -f, or end the "
	  "name in .html" },
	{ { "diff", "a", "b", "-f", "pprof", "-o", "c.html" },
	  "--output \"c.html\" is named for html but the format is pprof" },
	{ { "diff", "a", "b", "--live-heap" }, "--live-heap reads a running" },
	{ { "diff", "a", "b", "--unit", "u" }, "the fleet options" },
	{ { "diff", "a", "b", "--by", "file" }, "--sort and --by apply" },
	{ { "-p", "1", "--core" }, "--core and --exe apply" },
	{ { "top", "-p", "1", "--exe", "x" }, "--core and --exe apply" },
	{ { "-p", "1", "--binary-path", "/x" }, "--from, --to and --binary-path" },
	{ { "-p", "1", "--to", "3" }, "--from, --to and --binary-path" },
	{ { "top", "-p", "1", "--live-heap" }, "--live-heap reads a running" },
	{ { "top", "-p", "1", "--at-peak", "p" }, "heapbpf top shows the sites" },
	/* the command is the first argument only */
	{ { "-p", "1", "report" }, "unexpected argument \"report\"" },
	/* several faults: which one is named */
	{ { "report", "x.hbr", "--pid", "abc" }, "\"abc\"" },
	{ { "report", "x.hbr", "--pid", "1", "y" }, "report reads a recording" },
	{ { "report", "x.hbr", "y", "--live-heap" }, "unexpected argument \"y\"" },
	{ { "-p", "1", "--core", "extra" }, "--core and --exe apply" },
	{ { "top", "-p", "1", "extra", "--live-heap" }, "unexpected argument \"extra\"" },
	{ { "diff", "a", "b", "--raw", "-f", "html" }, "diff compares two profiles" },
	{ { "diff", "a", "b", "-f", "html", "c" }, "unexpected argument \"c\"" },
	{ { "-p", "1", "--live-heap", "--sort", "alloc" }, "--sort and --by apply" },
	{ { "top", "--live-heap", "--unit", "u" }, "--live-heap reads a running" },
	{ { "-p", "1", "--wrapper=" }, "--wrapper needs a function name" },
	{ { "-p", "1", "--wrapper" }, "option --wrapper needs a value" },
	{ { "-p", "1", "--wrapper", "*" }, "would make every function a" },
	{ { "-p", "1", "--wrapper", "**" }, "would make every function a" },
};

ParameterizedTestParameters(cli, errors)
{
	return cr_make_param_array(struct bad_case, bad_cases,
				   sizeof(bad_cases) / sizeof(bad_cases[0]));
}

ParameterizedTest(struct bad_case *bc, cli, errors)
{
	const char *args[9];
	const char *a0 = bc->args[0][0] ? bc->args[0] : "(no args)";
	struct run r;
	size_t n = 0;

	while (n < 8 && bc->args[n][0]) {
		args[n] = bc->args[n];
		n++;
	}
	args[n] = NULL;
	r = parse_v(args);

	cr_assert_eq(r.rc, -EINVAL, "%s ...: rc %d", a0, r.rc);
	cr_assert_eq(strncmp(r.err, "heapbpf: ", 9), 0, "%s ...: %s", a0, r.err);
	cr_assert_not_null(strstr(r.err, bc->msg), "%s ...: \"%s\" lacks \"%s\"", a0, r.err,
			   bc->msg);
	/* one sentence, one line */
	cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "%s", r.err);
	cr_assert_str_empty(r.out);
	run_free(&r);
}

Test(cli, unknown_short_option_inside_a_group_is_named)
{
	struct run r = parse("-p", "1", "-qzv");

	cr_assert_eq(r.rc, -EINVAL);
	/* the message names the offending option, not a neighbouring argument */
	cr_assert_not_null(strstr(r.err, "z"), "%s", r.err);
	run_free(&r);
}

/*
 * cli_parse can be called again: a parse that stopped in the middle of a
 * group of short options ("-qzv" stops at z) must not leak the rest of the
 * group ("v") into the next call. The strings of the first argv stay alive.
 */
Test(cli, second_parse_starts_afresh)
{
	struct run r = parse("-p", "1", "-qzv");

	cr_assert_eq(r.rc, -EINVAL);
	run_free(&r);
	r = parse("-p", "3");
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.c.run.pid, 3);
	cr_assert_not(r.c.run.verbose, "-v of the previous argv leaked into this parse");
	cr_assert_not(r.c.run.quiet);
	run_free(&r);
}

Test(cli, watch_takes_its_triggers_and_runs_until_stopped)
{
	struct run r = parse("watch", "--pid", "7", "--output-dir", "/tmp/w", "--on-growth", "64M",
			     "--on-rss-growth", "1G", "--on-pressure", "--cooldown", "30");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert(r.c.run.watch);
	cr_assert_eq(r.c.mode, MODE_LIVE);
	cr_assert_eq(r.c.run.duration, 0.0, "a watch runs until stopped");
	cr_assert_eq(r.c.run.watch_growth, 64u << 20);
	cr_assert_eq(r.c.run.watch_rss_growth, 1u << 30);
	cr_assert(r.c.run.watch_pressure);
	cr_assert_eq(r.c.run.watch_cooldown, 30.0);
	cr_assert_not(r.c.run.watch_no_oom);
	cr_assert_eq(r.c.run.ringbuf_bytes, RINGBUF_DAEMON);
	run_free(&r);
	/* the defaults: oom on, a 300 s cooldown, no growth trigger */
	r = parse("watch", "--unit", "redis", "--pyroscope", "http://127.0.0.1:4040");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.watch_cooldown, 300.0);
	cr_assert_eq(r.c.run.watch_growth, 0);
	run_free(&r);
}

Test(cli, watch_refusals)
{
	static const struct {
		const char *args[12];
		const char *why;
	} cases[] = {
		{ { "watch", "--pid", "7", NULL }, "needs --output-dir or --pyroscope" },
		{ { "watch", "--pid", "7", "--output-dir", "d", "-o", "x", NULL },
		  "--output, --interval, --record" },
		{ { "watch", "--pid", "7", "--output-dir", "d", "--interval", "5", NULL },
		  "--output, --interval, --record" },
		{ { "watch", "--pid", "7", "--output-dir", "d", "--on-growth", "0", NULL },
		  "--on-growth needs a size" },
		{ { "watch", "--pid", "7", "--output-dir", "d", "--cooldown", "0.5", NULL },
		  "--cooldown needs seconds" },
		{ { "--pid", "7", "--on-pressure", NULL }, "apply to heapbpf watch" },
		{ { "top", "--pid", "7", "--no-oom", NULL }, "apply to heapbpf watch" },
		{ { "watch", "--output-dir", "d", NULL }, "--pid is required" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r = parse_v(cases[i].args);

		cr_assert_eq(r.rc, -EINVAL, "case %zu passed", i);
		cr_assert(strstr(r.err, cases[i].why), "case %zu: %s", i, r.err);
		run_free(&r);
	}
}

Test(cli, agent_takes_rules_and_a_budget)
{
	struct run r = parse("agent", "--pyroscope", "http://127.0.0.1:4040", "--select",
			     "namespace=shop,service_name=cart", "--exclude", "exe=sidecar",
			     "--max-targets", "8", "--max-rss", "128M", "--on-growth", "64M");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_AGENT);
	cr_assert(r.c.run.watch, "the agent watches as heapbpf watch does");
	cr_assert_eq(r.c.run.nselect, 1);
	cr_assert_eq(r.c.run.nexclude, 1);
	cr_assert_eq(r.c.run.max_targets, 8);
	cr_assert_eq(r.c.run.max_rss, 128u << 20);
	cr_assert_eq(r.c.run.interval, 60.0, "a window a minute by default");
	cr_assert_eq(r.c.run.rotate, 180.0, "three windows between rotations by default");
	cr_assert_eq(r.c.run.duration, 0.0, "the agent runs until stopped");
	run_free(&r);
	/* the defaults safe on a 2-CPU node */
	r = parse("agent", "--output-dir", "/tmp/a");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.max_targets, 16);
	cr_assert_eq(r.c.run.max_rss, 512u << 20);
	cr_assert_eq(r.c.run.max_cpu, 50.0);
	run_free(&r);
	/* a tenth of a percent of one core is the least taken */
	r = parse("agent", "--output-dir", "/tmp/a", "--max-cpu", "0.1");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.run.max_cpu, 0.1);
	run_free(&r);
}

Test(cli, agent_refusals)
{
	static const char *const bad[][8] = {
		{ "agent" },
		{ "agent", "--pid", "1", "--output-dir", "d" },
		{ "agent", "--output-dir", "d", "--service-name", "x" },
		{ "agent", "--output-dir", "d", "--select", "nokey" },
		{ "agent", "--output-dir", "d", "--max-targets", "0" },
		{ "agent", "--output-dir", "d", "--max-rss", "1M" },
		{ "agent", "--output-dir", "d", "--max-cpu", "0.05" },
		{ "agent", "--output-dir", "d", "--max-cpu", "101" },
		{ "--pid", "1", "--select", "unit=x" },
		{ "watch", "--pid", "1", "--output-dir", "d", "--max-targets", "2" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct run r = parse_v(bad[i]);

		cr_assert_eq(r.rc, -EINVAL, "case %zu accepted", i);
		cr_assert(strstr(r.err, "heapbpf: "), "case %zu: %s", i, r.err);
		run_free(&r);
	}
}

Test(cli, reset_without_a_target_is_the_node_wide_reset)
{
	struct run r = parse("--reset");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_AGENT);
	cr_assert(r.c.run.reset);
	run_free(&r);
}

/* heapbpf rss: one process, text or json, nothing written but to stdout. */
Test(cli, rss_takes_one_target_and_a_format)
{
	static const char *const bad[][8] = {
		{ "rss" },
		{ "rss", "--pid", "1", "--format", "pprof" },
		{ "rss", "--pid", "1", "-o", "-" },
		{ "rss", "--unit", "redis", "-o", "x.pb.gz" },
		{ "rss", "--pid", "1,2" },
		{ "rss", "--pid", "1", "--duration", "5" },
		{ "rss", "--pid", "1", "--unit", "redis" },
		{ "rss", "--pid", "1", "extra" },
	};
	struct run r = parse("rss", "--pid", "1234");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_RSS);
	cr_assert_not(r.c.rss_json);
	run_free(&r);
	r = parse("rss", "--unit", "redis-server", "--format", "json");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert(r.c.rss_json);
	run_free(&r);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = parse_v(bad[i]);
		cr_assert_eq(r.rc, -EINVAL, "case %zu accepted", i);
		cr_assert(strstr(r.err, "heapbpf: "), "case %zu: %s", i, r.err);
		run_free(&r);
	}
}

/* heapbpf status: nothing to choose; an option that picks a target is refused, said. */
Test(cli, status_takes_nothing)
{
	struct run r = parse("status");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.mode, MODE_STATUS);
	run_free(&r);
	r = parse("status", "--pid", "1234");
	cr_assert_lt(r.rc, 0);
	cr_assert(strstr(r.err, "status lists every heapbpf running on the host"), "%s", r.err);
	run_free(&r);
	r = parse("status", "extra");
	cr_assert_lt(r.rc, 0);
	run_free(&r);
}
