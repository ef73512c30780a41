// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cli_parse: defaults, every option, every error. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAXARGS 16

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
	r.rc = cli_parse(argc, argv, &r.c);
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
	cr_assert_eq(r.c.pid, 1234);
	cr_assert_eq(r.c.duration, 10.0);
	cr_assert_null(r.c.output);
	cr_assert_eq(r.c.format, FMT_PPROF);
	cr_assert_eq(r.c.sample_type, HB_INUSE_SPACE);
	cr_assert_not(r.c.raw);
	cr_assert_eq(r.c.ringbuf_bytes, 8u << 20);
	cr_assert_null(r.c.layout);
	cr_assert_not(r.c.quiet);
	cr_assert_not(r.c.verbose);
	cr_assert_not(r.c.follow_forks);
	cr_assert_str_empty(r.err);
	cr_assert_str_empty(r.out);
	run_free(&r);
}

/* A daemon (--interval) stops reading while it writes a window: a larger ring by default. */
Test(cli, interval_ring_buffer_default)
{
	struct run r = parse("--pid", "1", "--interval", "2", "-d", "6", "--output-dir", "/tmp");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.ringbuf_bytes, RINGBUF_DAEMON);
	cr_assert_eq(RINGBUF_DAEMON, 16u << 20);
	r = parse("--pid", "1", "--interval", "2", "-d", "6", "--output-dir", "/tmp",
		  "--ringbuf-size", "2");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.ringbuf_bytes, 2u << 20, "the size asked for, whatever the mode");
}

Test(cli, pid_list)
{
	struct run r = parse("--pid", "11,12,13");

	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.npids, 3);
	cr_assert_eq(r.c.pid, 11);
	cr_assert_eq(r.c.pids[0], 11);
	cr_assert_eq(r.c.pids[1], 12);
	cr_assert_eq(r.c.pids[2], 13);
	run_free(&r);
	/* the last --pid wins, list or not */
	r = parse("-p", "5,6", "-p", "7");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.npids, 1);
	cr_assert_eq(r.c.pid, 7);
	run_free(&r);
	/* a pid named twice is one target (two would contend for its guard) */
	r = parse("--pid", "8,9,8,9");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.npids, 2);
	cr_assert_eq(r.c.pids[0], 8);
	cr_assert_eq(r.c.pids[1], 9);
	run_free(&r);
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
	cr_assert_eq(cli_parse(argc, argv, &c), 0);
	cr_assert(c.follow_forks);
	cr_assert_eq(c.pid, 42);
	cr_assert_eq(c.duration, 2.5);
	cr_assert_str_eq(c.output, "out.folded");
	cr_assert_eq(c.format, FMT_FOLDED);
	cr_assert_eq(c.sample_type, HB_ALLOC_OBJECTS);
	cr_assert(c.raw);
	cr_assert_eq(c.ringbuf_bytes, 64u << 20);
	cr_assert_str_eq(c.layout, "5.3.0");
	cr_assert(c.quiet);
	cr_assert(c.verbose);
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
	cr_assert_eq(r.c.pid, 7);
	cr_assert_eq(r.c.duration, 0.0);
	cr_assert_str_eq(r.c.output, "-");
	cr_assert_eq(r.c.format, FMT_FOLDED);
	cr_assert_eq(r.c.sample_type, HB_INUSE_OBJECTS);
	cr_assert(r.c.quiet && r.c.verbose);
	run_free(&r);

	r = parse("--pid=9", "--duration=60", "--format=pprof", "--ringbuf-size=1", "-qv");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.pid, 9);
	cr_assert_eq(r.c.duration, 60.0);
	cr_assert_eq(r.c.format, FMT_PPROF);
	cr_assert_eq(r.c.ringbuf_bytes, 1u << 20);
	cr_assert(r.c.quiet && r.c.verbose);
	cr_assert_not(r.c.raw);
	run_free(&r);

	r = parse("-p9", "-ffolded", "-talloc_space", "--ringbuf-size", "1024");
	cr_assert_eq(r.rc, 0, "stderr: %s", r.err);
	cr_assert_eq(r.c.pid, 9);
	cr_assert_eq(r.c.format, FMT_FOLDED);
	cr_assert_eq(r.c.sample_type, HB_ALLOC_SPACE);
	cr_assert_eq(r.c.ringbuf_bytes, (size_t)1024 << 20);
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
		cr_assert_eq(r.c.sample_type, t[i].v);
		run_free(&r);
	}
}

Test(cli, last_option_wins)
{
	struct run r = parse("-p", "5", "-p", "6", "-f", "folded", "-f", "pprof");

	cr_assert_eq(r.rc, 0);
	cr_assert_eq(r.c.pid, 6);
	cr_assert_eq(r.c.format, FMT_PPROF);
	run_free(&r);
}

Test(cli, help_and_version)
{
	struct run r = parse("--help");

	cr_assert_eq(r.rc, 1);
	cr_assert_not_null(strstr(r.out, "Usage: heapbpf --pid PID"));
	cr_assert_not_null(strstr(r.out, "--sample-type"));
	cr_assert_str_empty(r.err);
	run_free(&r);

	/* help wins over a missing --pid, and -h is the same */
	r = parse("-h");
	cr_assert_eq(r.rc, 1);
	cr_assert_not_null(strstr(r.out, "Usage:"));
	run_free(&r);

	r = parse("--version");
	cr_assert_eq(r.rc, 1);
	cr_assert_eq(strncmp(r.out, "heapbpf ", 8), 0, "%s", r.out);
	run_free(&r);
}

/*
 * Criterion hands each case to a new process, where pointers into this one
 * are not valid: the strings are stored inline.
 */
struct bad_case {
	char args[8][24]; /* ends at the first "" */
	char msg[40];	  /* part of the one-sentence error */
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
	cr_assert_eq(r.c.pid, 3);
	cr_assert_not(r.c.verbose, "-v of the previous argv leaked into this parse");
	cr_assert_not(r.c.quiet);
	run_free(&r);
}
