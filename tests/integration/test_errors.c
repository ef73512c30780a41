// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Bad targets and bad command lines: one clear sentence on stderr, a
 * non-zero exit, no file written, and nothing done to the target.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(errors, .fini = hb_tmpdir_cleanup, .timeout = 60);

/* Exactly one line, starting "heapbpf: ", containing want. */
static void assert_one_sentence(const char *err, const char *want)
{
	const char *nl = strchr(err, '\n');

	cr_assert(strncmp(err, "heapbpf: ", 9) == 0, "not a heapbpf message: %s", err);
	cr_assert(nl && nl[1] == '\0', "more than one line: %s", err);
	cr_assert(strstr(err, want), "expected \"%s\" in: %s", want, err);
}

static void assert_no_output(const char *path)
{
	struct stat st;

	cr_assert_neq(stat(path, &st), 0, "%s was written", path);
}

static void run_expect(const char *pid, int want_rc, const char *want_msg)
{
	char out[PATH_MAX], err[4096];
	const char *args[] = { "--pid", pid, "-d", "1", "-o", out, NULL };

	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), want_rc, "stderr: %s", err);
	assert_one_sentence(err, want_msg);
	assert_no_output(out);
}

Test(errors, no_such_pid)
{
	char pid[16];
	pid_t p = fork();

	/* a pid that existed a moment ago and is gone now */
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	snprintf(pid, sizeof(pid), "%d", p);
	run_expect(pid, 1, "no process with pid");
}

Test(errors, kernel_thread)
{
	hb_require_bpf();
	/* pid 2 is kthreadd */
	run_expect("2", 1, "kernel thread");
}

Test(errors, process_without_jemalloc)
{
	char pid[16];
	pid_t p = fork();

	hb_require_bpf();
	if (p == 0) {
		execl("/bin/sleep", "sleep", "30", NULL);
		_exit(127);
	}
	hb_sleep_ms(200);
	snprintf(pid, sizeof(pid), "%d", p);
	run_expect(pid, 1, "does not use jemalloc");
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

Test(errors, jemalloc_without_prof)
{
	struct svc s;
	char pid[16];

	hb_require_bpf();
	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"), NULL, NULL), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	run_expect(pid, 1,
		   "was started without prof:true; restart it with "
		   "MALLOC_CONF=prof:true,prof_active:false");
	cr_assert_eq(svc_stop(&s), 0);
}

/* jemalloc takes lg_prof_sample up to 63; heapbpf's recordings scale up to 2^62. */
Test(errors, sampling_period_beyond_what_heapbpf_scales)
{
	struct svc s;
	char pid[16];

	hb_require_bpf();
	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"),
			       "prof:true,prof_active:false,lg_prof_sample:63", NULL),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	run_expect(pid, 1, "samples every 2^63 bytes (lg_prof_sample), beyond the periods heapbpf");
	cr_assert_eq(svc_stop(&s), 0);
}

static void usage_error(const char *const *args, const char *want)
{
	char err[4096];

	cr_assert_eq(hb_run(args, err, sizeof(err), 10000), 2, "stderr: %s", err);
	assert_one_sentence(err, want);
}

Test(errors, usage)
{
	usage_error((const char *[]){ NULL }, "--pid is required");
	usage_error((const char *[]){ "--pid", "abc", NULL }, "positive process id");
	usage_error((const char *[]){ "--pid", "1", "-d", "-5", NULL }, "--duration");
	usage_error((const char *[]){ "--pid", "1", "-f", "svg", NULL }, "unknown --format");
	usage_error((const char *[]){ "--pid", "1", "-f", "pprof", "-f", "html", "-o", "two.pb.gz",
				      NULL },
		    "one file takes one format");
	usage_error((const char *[]){ "--pid", "1", "-f", "pprof", "-o", "heap.html", NULL },
		    "is named for html but the format is pprof");
	usage_error((const char *[]){ "--pid", "1", "--bogus", NULL }, "unknown option");
	usage_error((const char *[]){ "--pid", NULL }, "needs a value");
	usage_error((const char *[]){ "--pid", "1,2", "-o", "x.pb.gz", NULL },
		    "--pid lists 2 processes and --output names one file");
}

Test(errors, help_has_examples)
{
	static char out[1 << 16];

	cr_assert_eq(hb_run((const char *[]){ "--help", NULL }, out, sizeof(out), 10000), 0);
	cr_assert(strstr(out, "Examples:"));
	cr_assert(strstr(out, "MALLOC_CONF=prof:true,prof_active:false"));
}

/*
 * An output that cannot be written, -o or --at-peak, is refused before the
 * window: with -d 600 a check after it would outlast hb_run's guard (a
 * bound on a hang, not a measure); nothing was sampled, the flag is off.
 */
Test(errors, unwritable_output_restores_flag)
{
	struct svc s;
	char pid[16], err[4096];
	uint64_t flag;
	uint8_t b;
	const char *args[] = { "--pid", pid, "-d", "600", "-o", "/nonexistent-dir/x.pb.gz", NULL };
	const char *peak[] = { "--pid",	    pid,
			       "-d",	    "600",
			       "-o",	    hb_tmp("x.pb.gz"),
			       "--at-peak", "/nonexistent-dir/peak.pb.gz",
			       NULL };

	hb_require_bpf();
	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"),
			       "prof:true,prof_active:false", NULL),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 1, "stderr: %s", err);
	cr_assert(strstr(err, "cannot write /nonexistent-dir/x.pb.gz"), "stderr: %s", err);
	cr_assert_null(strstr(err, "sampling every"), "it sampled first: %s", err);
	cr_assert_eq(hb_run(peak, err, sizeof(err), 60000), 1, "stderr: %s", err);
	cr_assert(strstr(err, "/nonexistent-dir/peak.pb.gz"), "stderr: %s", err);
	cr_assert_null(strstr(err, "sampling every"), "it sampled first: %s", err);
	cr_assert_eq(hb_sym_addr(s.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert_eq(hb_peek(s.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 0);
	cr_assert_eq(svc_stop(&s), 0);
}
