// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Soak: 8 threads allocating as fast as they can, jemalloc sampling every
 * 4 KiB on average, short-lived threads created and exiting all along, and
 * heapbpf stopped by SIGTERM at a random point of a 20-60 s window.
 * Afterwards the target is healthy and still working, its flag is restored,
 * the profile parses, and drops are either zero or reported.
 */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "profile/pprof.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

TestSuite(soak, .fini = hb_tmpdir_cleanup, .timeout = 240);

static uint64_t allocs(struct svc *s)
{
	char reply[128];
	unsigned long long a = 0, f = 0;

	cr_assert_eq(svc_cmd(s, "stats", reply, sizeof(reply), 10000), 0,
		     "the target stopped answering");
	cr_assert_eq(sscanf(reply, "stats %llu %llu", &a, &f), 2, "%s", reply);
	return a;
}

Test(soak, sigterm_at_a_random_point_under_load)
{
	const char *bin = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "8", "--rate", "0", "--thread-churn", "5", NULL };
	char pid[16], out[PATH_MAX], errpath[PATH_MAX], *err, *gz;
	Perftools__Profiles__Profile *p;
	bool noted = false, short_lived = false;
	uint64_t flag, before;
	struct svc s;
	uint8_t b;
	ssize_t len;
	pid_t hp;
	int ms, rc;

	hb_require_bpf();
	cr_assert_eq(svc_start(&s, bin, "prof:true,prof_active:false,lg_prof_sample:12", args), 0);
	cr_assert_eq(hb_sym_addr(s.pid, bin, "je_prof_active_state", &flag), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(out, sizeof(out), "%s/soak.pb.gz", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/soak.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-o", out,
					NULL },
		      errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp), "heapbpf did not start sampling");
	srand((unsigned int)(time(NULL) ^ getpid()));
	ms = 20000 + rand() % 40000;
	fprintf(stderr, "soak: stopping heapbpf after %d ms\n", ms);
	hb_sleep_ms(ms);
	kill(hp, SIGTERM);
	rc = hb_wait(hp, 60000);
	cr_assert_geq(hb_read_file(errpath, &err), 0);
	cr_assert(rc == 0 || rc == 4, "heapbpf exited %d: %s", rc, err);
	/* drops are either zero or reported, on stderr and by the exit status */
	cr_assert_eq(rc == 4, strstr(err, "were dropped") != NULL, "exit %d but: %s", rc, err);

	/* the target: flag restored, still allocating, still answering */
	cr_assert_eq(hb_peek(s.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 0, "prof_active left on");
	before = allocs(&s);
	hb_sleep_ms(500);
	cr_assert_gt(allocs(&s), before, "the target stopped allocating");

	len = hb_read_file(out, &gz);
	cr_assert_gt(len, 0);
	cr_assert_eq(pprof_decode((uint8_t *)gz, len, &p), 0);
	cr_assert_gt(p->n_sample, 0);
	for (size_t i = 0; i < p->n_comment; i++)
		noted |= strstr(p->string_table[p->comment[i]], "dropped") != NULL;
	cr_assert_eq(noted, rc == 4, "drops and the profile's comments disagree");
	for (size_t i = 0; i < p->n_function; i++)
		short_lived |= strcmp(p->string_table[p->function[i]->name], "short_lived") == 0;
	cr_assert(short_lived, "no sample from the short-lived threads");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	free(err);
	cr_assert_eq(svc_stop(&s), 0);
}
