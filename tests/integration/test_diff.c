// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf diff on two live profiles of the example service taken before and
 * after a known change (hold 64: 64 MiB more in use from held_buffers, in
 * 1 MiB blocks): the change is the first one listed, positive, and of the
 * right size (64 blocks sampled at 1-exp(-2) each: the unbiased estimate is
 * within 20% with overwhelming probability).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <zlib.h>

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
	/* a tenth of the default rate: a loaded machine (sanitizers, CI) loses no frees at it */
	const char *args[] = { "--threads", "2", "--rate", "2000", NULL };
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
	if (!strstr(line, "held_buffers") || strstr(line, "held_buffers") > strchr(line, '\n')) {
		char *after_err = NULL;

		hb_read_file(errpath, &after_err);
		cr_assert_fail(
			"held_buffers is not the first change:\n%s\nthe second run said:\n%s", err,
			after_err ? after_err : "");
	}
	cr_assert_eq(line[strspn(line, " ")], '+', "%s", err);
	mib = mib_after(line, "held_buffers");
	/*
	 * 64 blocks of 1 MiB at jemalloc's 512 KiB mean: each sampled with
	 * p = 1 - e^-2, about 55 samples of 1.16 MiB each. Within 20% failed on
	 * 44 samples or fewer, a 2e-4 chance a run; 30% on 38 or fewer, 8e-8
	 * (and more than 64 samples cannot be).
	 */
	cr_assert(mib > 64 * 0.7 && mib < 64 * 1.3, "held_buffers +%.1f MiB, not about 64", mib);

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
	cr_assert(new_col > (64LL << 20) * 7 / 10 && new_col < (64LL << 20) * 13 / 10, "%lld",
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

/*
 * A 16 KiB gzip of 8 million empty samples (the two bytes 0x12 0x00 each,
 * 16 MB decompressed) unpacks to some 1 GB with protobuf-c: heapbpf diff
 * once reached 1.36 GB of RSS on an 8 KiB one. It refuses it in one
 * sentence within its 128 MiB budget: the child's peak RSS (from wait4)
 * stays under 256 MiB.
 */
Test(diff, a_decompression_bomb_is_refused_within_256_mib)
{
	char bomb[PATH_MAX], errpath[PATH_MAX], *text;
	uint8_t chunk[8192];
	struct rusage ru;
	gzFile gz;
	pid_t pid;
	int st;

	for (size_t i = 0; i < sizeof(chunk); i += 2) {
		chunk[i] = 0x12;  /* field 2 (sample), length-delimited */
		chunk[i + 1] = 0; /* of length 0 */
	}
	snprintf(bomb, sizeof(bomb), "%s/bomb.pb.gz", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/bomb.err", hb_tmpdir());
	gz = gzopen(bomb, "wb9");
	cr_assert_not_null(gz);
	for (int i = 0; i < 2000; i++)
		cr_assert_eq(gzwrite(gz, chunk, sizeof(chunk)), (int)sizeof(chunk));
	cr_assert_eq(gzclose(gz), Z_OK);

	pid = hb_spawn((const char *[]){ hb_path("heapbpf"), "diff", bomb, bomb, NULL }, errpath);
	cr_assert_gt(pid, 0);
	cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
	cr_assert_eq(hb_read_file(errpath, &text) >= 0, 1);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, text);
	cr_assert(strstr(text, "heapbpf: ") == text &&
			  strstr(text, "bomb.pb.gz is too large to read") &&
			  strchr(text, '\n') == text + strlen(text) - 1,
		  "%s", text);
	/* ru_maxrss is in KiB */
	cr_assert_lt(ru.ru_maxrss, 256 * 1024, "peak RSS %ld KiB: %s", ru.ru_maxrss, text);
	free(text);
}
