// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every way a heapbpf run can end leaves the target as it was: prof_active
 * back at its original value (read from the target's memory, located with nm,
 * not with heapbpf's code) and no uprobe left (a uprobe shows at the probed
 * function's first byte in the target's memory: int3, 0xcc, on x86-64, the
 * first byte of BRK #5 on arm64; HB_UPROBE_BYTE).
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "profile/pprof.h"

#define IDLE_CONF "prof:true,prof_active:false"

struct run {
	struct svc s;
	uint64_t flag, probe;
	char pid[16], out[PATH_MAX], err[PATH_MAX];
	pid_t hp;
};

static void start_target(struct run *r, const char *conf)
{
	const char *args[] = { "--threads", "2", NULL };
	const char *bin;

	hb_require_bpf();
	/* uprobes another test puts on the example would read as ones heapbpf left behind */
	bin = hb_own_example("alloc-service-static");
	cr_assert_eq(svc_start(&r->s, bin, conf, args), 0);
	cr_assert_eq(hb_sym_addr(r->s.pid, bin, "je_prof_active_state", &r->flag), 0);
	cr_assert_eq(hb_sym_addr(r->s.pid, bin, "je_prof_malloc_sample_object", &r->probe), 0);
	snprintf(r->pid, sizeof(r->pid), "%d", r->s.pid);
	snprintf(r->out, sizeof(r->out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(r->err, sizeof(r->err), "%s/heapbpf.err", hb_tmpdir());
}

static uint8_t peek(struct run *r, uint64_t addr)
{
	uint8_t b = 0xff;

	cr_assert_eq(hb_peek(r->s.pid, addr, &b, 1), 0);
	return b;
}

static void spawn_heapbpf(struct run *r, const char *duration)
{
	const char *argv[] = { hb_path("heapbpf"), "--pid", r->pid, "-d",
			       duration,	   "-o",    r->out, NULL };

	r->hp = hb_spawn(argv, r->err);
	cr_assert_gt(r->hp, 0);
}

/* Starts heapbpf and waits until its uprobe is in and it has switched sampling on. */
static void start_heapbpf(struct run *r, const char *duration)
{
	spawn_heapbpf(r, duration);
	/* assert_clean's uprobe check is meaningful only if a live uprobe shows this way */
	cr_assert(hb_wait_switched(r->s.pid, r->probe, HB_UPROBE_BYTE, r->hp),
		  "no uprobe at the probed function: heapbpf did not attach");
	cr_assert(hb_wait_switched(r->s.pid, r->flag, 1, r->hp),
		  "heapbpf did not switch prof_active on");
}

/*
 * Until the target has allocated 2000 times more since the flag went on
 * (about 170 MiB at the example's mix, 340 sampling periods: some object is
 * sampled, so the run's profile has samples and it exits 0). Its own count,
 * not a wall-clock wait.
 */
static void sampled_some(struct run *r)
{
	svc_allocs_more(&r->s, 2000);
}

static void assert_clean(struct run *r, uint8_t want_flag)
{
	cr_assert_eq(peek(r, r->flag), want_flag, "prof_active not restored to %u", want_flag);
	cr_assert_neq(peek(r, r->probe), HB_UPROBE_BYTE, "a uprobe is still installed");
}

static void assert_profile(struct run *r)
{
	Perftools__Profiles__Profile *p;
	char *buf;
	ssize_t len = hb_read_file(r->out, &buf);

	cr_assert_gt(len, 0, "no profile written");
	cr_assert_eq(pprof_decode((uint8_t *)buf, len, &p), 0);
	cr_assert_gt(p->n_sample, 0);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
}

TestSuite(exit_paths, .fini = hb_tmpdir_cleanup, .timeout = 90);

Test(exit_paths, duration_elapsed)
{
	struct run r;

	start_target(&r, IDLE_CONF);
	start_heapbpf(&r, "2");
	cr_assert_eq(hb_wait(r.hp, 30000), 0);
	assert_clean(&r, 0);
	assert_profile(&r);
	cr_assert_eq(svc_stop(&r.s), 0);
}

static void by_signal(int sig)
{
	struct run r;

	start_target(&r, IDLE_CONF);
	start_heapbpf(&r, "0");
	sampled_some(&r);
	kill(r.hp, sig);
	cr_assert_eq(hb_wait(r.hp, 30000), 0, "heapbpf did not exit cleanly on signal %d", sig);
	assert_clean(&r, 0);
	assert_profile(&r);
	cr_assert_eq(svc_stop(&r.s), 0);
}

Test(exit_paths, sigint)
{
	by_signal(SIGINT);
}

Test(exit_paths, sigterm)
{
	by_signal(SIGTERM);
}

Test(exit_paths, sighup)
{
	by_signal(SIGHUP);
}

Test(exit_paths, target_exits)
{
	struct run r;
	char *err;

	start_target(&r, IDLE_CONF);
	start_heapbpf(&r, "0");
	sampled_some(&r);
	cr_assert_eq(svc_stop(&r.s), 0);
	cr_assert_eq(hb_wait(r.hp, 30000), 0, "heapbpf did not end when the target exited");
	assert_profile(&r);
	cr_assert_geq(hb_read_file(r.err, &err), 0);
	cr_assert(strstr(err, "exited"), "no word that the target exited: %s", err);
	free(err);
}

/*
 * A run that failed as it should: it said what, its flag was restored, and
 * it left no profile. Its stderr returned (free it).
 */
static char *failed_cleanly(struct run *r, const char *said)
{
	struct stat st;
	char *err;

	cr_assert_geq(hb_read_file(r->err, &err), 0);
	cr_assert(strstr(err, said), "unexpected stderr: %s", err);
	assert_clean(r, 0);
	cr_assert_neq(stat(r->out, &st), 0, "a failed run must not leave a profile");
	return err;
}

Test(exit_paths, internal_error)
{
	struct run r;

	start_target(&r, IDLE_CONF);
	/* fails on the first event, which exists only once sampling was switched on */
	setenv("HEAPBPF_FAULT_INJECT", "collect", 1);
	spawn_heapbpf(&r, "0");
	unsetenv("HEAPBPF_FAULT_INJECT");
	cr_assert_eq(hb_wait(r.hp, 30000), 1, "an internal error must exit 1");
	free(failed_cleanly(&r, "collecting events failed"));
	cr_assert_eq(svc_stop(&r.s), 0);
}

/*
 * A layout that does not fit (HEAPBPF_FAULT_INJECT=layout: the tctx read as
 * 0): every sample's read of jemalloc's memory faults. The run writes no
 * profile that would look like data, says why in one sentence and exits 1;
 * the flag is restored all the same.
 */
Test(exit_paths, unreadable_samples_write_no_profile)
{
	struct run r;
	char *err;

	start_target(&r, IDLE_CONF);
	setenv("HEAPBPF_FAULT_INJECT", "layout", 1);
	start_heapbpf(&r, "0");
	unsetenv("HEAPBPF_FAULT_INJECT");
	sampled_some(&r);
	kill(r.hp, SIGINT);
	cr_assert_eq(hb_wait(r.hp, 30000), 1, "a run whose samples all faulted must exit 1");
	err = failed_cleanly(&r, "samples could not read jemalloc's memory, so heapbpf wrote no "
				 "profile");
	cr_assert_null(strstr(err, "allocated (estimated)"), "a summary of unread samples: %s",
		       err);
	free(err);
	cr_assert_eq(svc_stop(&r.s), 0);
}

Test(exit_paths, already_active_is_left_active)
{
	struct run r;

	start_target(&r, "prof:true,prof_active:true");
	start_heapbpf(&r, "1");
	cr_assert_eq(hb_wait(r.hp, 30000), 0);
	assert_clean(&r, 1);
	assert_profile(&r);
	cr_assert_eq(svc_stop(&r.s), 0);
}

/* ---- SIGUSR1 ---- */

/* True once pid holds signal sig pending for the whole process (ShdPnd): blocked, not acted on. */
static bool pending(pid_t pid, int sig)
{
	char path[64], *text = NULL;
	const char *l;
	bool yes = false;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (hb_read_file(path, &text) > 0 && (l = strstr(text, "ShdPnd:")))
		yes = (strtoull(l + strlen("ShdPnd:"), NULL, 16) >> (sig - 1)) & 1;
	free(text);
	return yes;
}

/*
 * A one-shot run told SIGUSR1 (as `kill -USR1 $(pidof heapbpf)` tells every
 * heapbpf on a host): before, it died with exit 138 and left prof_active
 * on. Now the signal waits, ignored (the kernel holds it pending), and the
 * run ends as it would have: its profile, the flag back off.
 */
Test(exit_paths, sigusr1_leaves_a_one_shot_run_alone)
{
	struct run r;

	start_target(&r, IDLE_CONF);
	start_heapbpf(&r, "0");
	cr_assert_eq(kill(r.hp, SIGUSR1), 0);
	cr_assert(pending(r.hp, SIGUSR1), "SIGUSR1 is not held: it acts on heapbpf");
	cr_assert_eq(kill(r.hp, SIGUSR1), 0);
	sampled_some(&r);
	kill(r.hp, SIGTERM);
	cr_assert_eq(hb_wait(r.hp, 30000), 0, "heapbpf did not end cleanly after SIGUSR1");
	assert_clean(&r, 0);
	assert_profile(&r);
	cr_assert_eq(svc_stop(&r.s), 0);
}

/* The windows of an --interval run into dir (its .pb.gz files). */
static int windows_in(const char *dir)
{
	return hb_count_files(dir, ".pb.gz", NULL, 0);
}

/*
 * An --interval run told SIGUSR1: its window ends now and is written (an
 * hour-long interval would have written none yet), and the run goes on to
 * its end, the flag back off.
 */
Test(exit_paths, sigusr1_writes_an_interval_window_now)
{
	struct run r;
	char dir[PATH_MAX];
	const char *argv[] = { hb_path("heapbpf"), "--pid", NULL, "--interval", "3600",
			       "--output-dir",	   dir,	    NULL };

	start_target(&r, IDLE_CONF);
	snprintf(dir, sizeof(dir), "%s/windows", hb_tmpdir());
	cr_assert_eq(mkdir(dir, 0700), 0);
	argv[2] = r.pid;
	r.hp = hb_spawn(argv, r.err);
	cr_assert_gt(r.hp, 0);
	cr_assert(hb_wait_switched(r.s.pid, r.flag, 1, r.hp),
		  "heapbpf did not switch prof_active on");
	cr_assert_eq(windows_in(dir), 0);
	cr_assert_eq(kill(r.hp, SIGUSR1), 0);
	for (int waited = 0; waited < 30000 && windows_in(dir) < 1; waited += 50)
		hb_sleep_ms(50);
	cr_assert_eq(windows_in(dir), 1, "no window written on SIGUSR1");
	cr_assert_eq(peek(&r, r.flag), 1, "the run stopped sampling");
	kill(r.hp, SIGTERM);
	cr_assert_eq(hb_wait(r.hp, 30000), 0, "heapbpf did not end cleanly");
	assert_clean(&r, 0);
	cr_assert_eq(svc_stop(&r.s), 0);
}
