// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf diff on two live profiles of the example service taken before and
 * after a known change (hold 64: 64 MiB more in use from held_buffers, in
 * 1 MiB blocks): the change is the first one listed, positive, and of the
 * right size (64 blocks sampled at 1-exp(-2) each: the unbiased estimate is
 * within 20% with overwhelming probability).
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define IDLE_CONF "prof:true,prof_active:false"

TestSuite(diff, .fini = hb_tmpdir_cleanup, .timeout = 120);

static double mib_after(const char *text, const char *what)
{
	const char *p = strstr(text, what);
	double v = 0;
	char unit[8] = "";

	cr_assert_not_null(p, "no %s in:\n%s", what, text);
	/* "  +64.3 MiB  main;...;held_buffers": the value is before the stack */
	while (p > text && p[-1] != '\n')
		p--;
	cr_assert_eq(sscanf(p, " %lf %7s", &v, unit), 2, "%s", p);
	cr_assert_str_eq(unit, "MiB", "%s", p);
	return v;
}

Test(diff, known_change_comes_first_with_its_sign_and_size)
{
	char pid[16], before[PATH_MAX], after[PATH_MAX], folded[PATH_MAX], err[8192], reply[64];
	char errpath[PATH_MAX], *text, *line;
	const char *args[] = { "--threads", "2", NULL };
	long long base_col = -1, new_col = -1;
	uint64_t flag;
	struct svc s;
	double mib;
	pid_t hp;

	hb_require_bpf();
	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"), IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(s.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(before, sizeof(before), "%s/before.pb.gz", hb_tmpdir());
	snprintf(after, sizeof(after), "%s/after.pb.gz", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/after.err", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "2", "-q", "-o", before, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	/* the change happens while heapbpf watches: objects allocated before are not seen */
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-q", "-o",
					after, NULL },
		      errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp), "heapbpf did not start");
	hb_sleep_ms(1000);
	cr_assert_eq(svc_cmd(&s, "hold 64", reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "held 64");
	hb_sleep_ms(1000);
	kill(hp, SIGINT);
	cr_assert_eq(hb_wait(hp, 30000), 0);
	cr_assert_eq(svc_stop(&s), 0);

	snprintf(folded, sizeof(folded), "%s/change.pb.gz", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "diff", before, after, "-o", folded, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	/* the first change listed is the known one, positive */
	line = strstr(err, "the largest changes:\n");
	cr_assert_not_null(line, "%s", err);
	line += strlen("the largest changes:\n");
	cr_assert(strstr(line, "held_buffers") && strstr(line, "held_buffers") < strchr(line, '\n'),
		  "held_buffers is not the first change:\n%s", err);
	cr_assert_eq(line[strspn(line, " ")], '+', "%s", err);
	mib = mib_after(line, "held_buffers");
	cr_assert(mib > 64 * 0.8 && mib < 64 * 1.2, "held_buffers +%.1f MiB, not about 64", mib);

	/* the same change in differential folded stacks: nothing before, all of it after */
	snprintf(folded, sizeof(folded), "%s/change.folded", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "diff", before, after, "-f", "folded", "-o", folded,
					      "-q", NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_gt(hb_read_file(folded, &text), 0);
	line = strstr(text, ";held_buffers ");
	cr_assert_not_null(line, "%s", text);
	cr_assert_eq(sscanf(line, ";held_buffers %lld %lld", &base_col, &new_col), 2);
	cr_assert_eq(base_col, 0);
	cr_assert(new_col > (64LL << 20) * 8 / 10 && new_col < (64LL << 20) * 12 / 10, "%lld",
		  new_col);
	free(text);
}

Test(diff, refuses_a_file_that_is_not_a_profile)
{
	char bad[PATH_MAX], err[4096];
	FILE *f;

	snprintf(bad, sizeof(bad), "%s/notes.txt", hb_tmpdir());
	f = fopen(bad, "w");
	cr_assert_not_null(f);
	fputs("not a profile\n", f);
	fclose(f);
	cr_assert_eq(hb_run((const char *[]){ "diff", bad, bad, NULL }, err, sizeof(err), 30000), 1,
		     "%s", err);
	cr_assert(strstr(err, "neither a gzip-compressed pprof profile nor a heapbpf recording"),
		  "%s", err);
}
