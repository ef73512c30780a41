// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Several heapbpf on one host: `heapbpf status` lists every run (its mode,
 * since when, where it writes, what it holds), a run refused a process
 * another holds names that one, and a run killed with -9 is not listed.
 * Each test keeps its runs' locks and registrations in a state directory
 * of its own (HEAPBPF_STATE_DIR), apart from the other tests' runs.
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

#define IDLE_CONF "prof:true,prof_active:false"

static struct svc a, b;
static pid_t runs[3];

static void status_fini(void)
{
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		if (runs[i] > 0) {
			kill(runs[i], SIGKILL);
			hb_wait(runs[i], 10000);
			runs[i] = 0;
		}
	}
	if (a.pid > 0)
		svc_stop(&a);
	if (b.pid > 0)
		svc_stop(&b);
	unsetenv("HEAPBPF_STATE_DIR");
	hb_tmpdir_cleanup();
}

TestSuite(status, .fini = status_fini, .timeout = 180);

/* The services, and a state directory of the test's own for every heapbpf it runs. */
static void start_services(void)
{
	const char *args[] = { "--threads", "1", "--rate", "20000", NULL };
	const char *state = hb_tmp("state");

	hb_require_bpf();
	cr_assert_eq(mkdir(state, 0700), 0);
	setenv("HEAPBPF_STATE_DIR", state, 1);
	cr_assert_eq(svc_start(&a, hb_path("examples/alloc-service-static"), IDLE_CONF, args), 0);
	cr_assert_eq(svc_start(&b, hb_path("examples/alloc-service-static"), IDLE_CONF, args), 0);
}

/* heapbpf with argv[1..], its output into errpath; waits until it samples. */
/*
 * Once run has switched s's flag on, until s has allocated 2000 times more
 * (about 170 MiB at the example's mix, 340 sampling periods): the run has
 * some object sampled.
 */
static void sampled_some(struct svc *s, pid_t run)
{
	uint64_t flag;

	cr_assert_eq(hb_sym_addr(s->pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert(hb_wait_byte(s->pid, flag, 1, 60000, run), "the run did not switch it on");
	svc_allocs_more(s, 2000);
}

static pid_t sampling(const char *const *argv, const char *errpath)
{
	pid_t hp = hb_spawn(argv, errpath);

	cr_assert_gt(hp, 0);
	cr_assert(hb_wait_text(errpath, "sampling every", 60000, hp), "heapbpf did not start");
	return hp;
}

/* `heapbpf status`'s output (static). */
static const char *status(void)
{
	static char out[16384];

	cr_assert_eq(hb_run((const char *[]){ "status", NULL }, out, sizeof(out), 60000), 0, "%s",
		     out);
	return out;
}

static void has(const char *text, const char *want)
{
	cr_assert(strstr(text, want), "expected \"%s\" in: %s", want, text);
}

Test(status, lists_every_run_and_names_the_holder)
{
	char pa[16], pb[16], line[256], err[8192];
	const char *dir = hb_tmp("watch"), *one = hb_tmp("one.pb.gz"), *text;
	int rc;

	start_services();
	snprintf(pa, sizeof(pa), "%d", a.pid);
	snprintf(pb, sizeof(pb), "%d", b.pid);
	cr_assert_eq(mkdir(dir, 0700), 0);
	runs[0] = sampling((const char *[]){ hb_path("heapbpf"), "watch", "--pid", pa,
					     "--output-dir", dir, NULL },
			   hb_tmp("watch.err"));
	runs[1] = sampling((const char *[]){ hb_path("heapbpf"), "--pid", pb, "-d", "600", "-o",
					     one, NULL },
			   hb_tmp("one.err"));
	text = status();
	snprintf(line, sizeof(line), "pid %d  watch  since ", runs[0]);
	has(text, line);
	snprintf(line, sizeof(line), "writes %s\n    holds pid %d (alloc-service-s)", dir, a.pid);
	has(text, line);
	snprintf(line, sizeof(line), "pid %d  one-shot  since ", runs[1]);
	has(text, line);
	snprintf(line, sizeof(line), "writes %s\n    holds pid %d (alloc-service-s)", one, b.pid);
	has(text, line);
	/* a second watch of the watched service (no holder serves one): refused, naming the holder */
	cr_assert_eq(hb_run((const char *[]){ "watch", "--pid", pa, "-d", "1", "--output-dir", dir,
					      NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	snprintf(line, sizeof(line), "held by heapbpf watch, pid %d, since ", runs[0]);
	has(err, line);
	has(err, "kill -USR1");
	/* --record, which no holder serves yet: refused the same way, what is served said */
	cr_assert_eq(hb_run((const char *[]){ "--pid", pa, "-d", "1", "--record",
					      hb_tmp("held.hbr"), NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	has(err, line);
	snprintf(line, sizeof(line),
		 "a one-shot run (heapbpf --pid %d -d SECONDS) or heapbpf top gets its view",
		 a.pid);
	has(err, line);
	/* ended: not listed */
	kill(runs[0], SIGTERM);
	kill(runs[1], SIGTERM);
	/* cleanly: 0, or 3 when its short window had no sample */
	rc = hb_wait(runs[0], 60000);
	cr_assert(rc == 0 || rc == 3, "the watch ended with %d: %s", rc,
		  hb_file_text(hb_tmp("watch.err")));
	rc = hb_wait(runs[1], 60000);
	cr_assert(rc == 0 || rc == 3, "the one-shot ended with %d: %s", rc,
		  hb_file_text(hb_tmp("one.err")));
	runs[0] = runs[1] = 0;
	has(status(), "no heapbpf is running on this host");
}

/*
 * A run killed with -9 leaves its registration and its socket behind:
 * status neither lists it nor keeps them; a live run's socket stays.
 */
Test(status, a_killed_run_is_not_listed)
{
	char pa[16], pb[16], reg[PATH_MAX], sock[PATH_MAX], live[PATH_MAX];

	start_services();
	snprintf(pa, sizeof(pa), "%d", a.pid);
	snprintf(pb, sizeof(pb), "%d", b.pid);
	runs[0] = sampling((const char *[]){ hb_path("heapbpf"), "--pid", pa, "-d", "600", "-o",
					     hb_tmp("killed.pb.gz"), NULL },
			   hb_tmp("killed.err"));
	runs[1] = sampling((const char *[]){ hb_path("heapbpf"), "--pid", pb, "-d", "600", "-o",
					     hb_tmp("live.pb.gz"), NULL },
			   hb_tmp("live.err"));
	snprintf(reg, sizeof(reg), "%s/%d.run", getenv("HEAPBPF_STATE_DIR"), runs[0]);
	snprintf(sock, sizeof(sock), "%s/%d.sock", getenv("HEAPBPF_STATE_DIR"), runs[0]);
	snprintf(live, sizeof(live), "%s/%d.sock", getenv("HEAPBPF_STATE_DIR"), runs[1]);
	cr_assert_eq(access(reg, F_OK), 0, "%s: the run is not registered", reg);
	cr_assert_eq(access(sock, F_OK), 0, "%s: the run does not listen", sock);
	kill(runs[0], SIGKILL);
	hb_wait(runs[0], 60000);
	runs[0] = 0;
	cr_assert_eq(access(sock, F_OK), 0, "%s went with the kill", sock);
	has(status(), "holds pid");
	cr_assert_neq(access(reg, F_OK), 0, "%s was kept", reg);
	cr_assert_neq(access(sock, F_OK), 0, "%s was kept", sock);
	cr_assert_eq(access(live, F_OK), 0, "%s, a live run's, was removed", live);
	sampled_some(&b, runs[1]);
	kill(runs[1], SIGTERM);
	cr_assert_eq(hb_wait(runs[1], 60000), 0, "%s", hb_file_text(hb_tmp("live.err")));
	runs[1] = 0;
	has(status(), "no heapbpf is running on this host");
	/* what the killed run left on, as ever: --reset */
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", pa, NULL }, reg, sizeof(reg),
			    60000),
		     0, "%s", reg);
}

/* heapbpf watch of service a into dir (runs[0]), its pid as text in pa; some object sampled. */
static void watch_a(const char *dir, char *pa, size_t len)
{
	snprintf(pa, len, "%d", a.pid);
	cr_assert_eq(mkdir(dir, 0700), 0);
	runs[0] = sampling((const char *[]){ hb_path("heapbpf"), "watch", "--pid", pa,
					     "--output-dir", dir, NULL },
			   hb_tmp("watch.err"));
	sampled_some(&a, runs[0]);
}

/* The watch still there, then stopped: cleanly (0, or 3 when its window had no sample). */
static void stop_watch(void)
{
	int rc;

	cr_assert_eq(waitpid(runs[0], NULL, WNOHANG), 0, "the watch ended: %s",
		     hb_file_text(hb_tmp("watch.err")));
	kill(runs[0], SIGTERM);
	rc = hb_wait(runs[0], 60000);
	runs[0] = 0;
	cr_assert(rc == 0 || rc == 3, "the watch ended with %d: %s", rc,
		  hb_file_text(hb_tmp("watch.err")));
}

/*
 * A one-shot run on a service heapbpf watch holds: before, refused ("another
 * heapbpf is already profiling"). Now its window comes from the watch: a
 * profile with the service's sites, exit 0, and the watch's own files and
 * flag untouched; the watch goes on and ends as it would have.
 */
Test(status, a_held_service_is_profiled_through_its_holder)
{
	char pa[16], err[8192], before[8192], *text = NULL;
	const char *dir = hb_tmp("watch"), *out = hb_tmp("served.folded");

	start_services();
	watch_a(dir, pa, sizeof(pa));
	snprintf(before, sizeof(before), "%s", hb_listing(dir));
	cr_assert_eq(hb_run((const char *[]){ "--pid", pa, "-d", "2", "-f", "folded", "-t",
					      "alloc_space", "-o", out, NULL },
			    err, sizeof(err), 120000),
		     0, "%s", err);
	has(err, "which holds it: this run's window comes from it");
	has(err, "wrote ");
	cr_assert_gt(hb_read_file(out, &text), 0);
	has(text, "churn_small");
	has(text, "large_buffers");
	free(text);
	cr_assert_str_eq(hb_listing(dir), before, "the watch's files changed");
	stop_watch();
	cr_assert_null(strstr(hb_file_text(hb_tmp("watch.err")), "demand"),
		       "the request fired a trigger of the watch's");
}

/* Only root reaches a run's socket: an unprivileged user's connection is refused. */
Test(status, an_unprivileged_user_cannot_ask)
{
	char pa[16], cmd[PATH_MAX * 2], sock[PATH_MAX];
	struct stat st;

	start_services();
	snprintf(pa, sizeof(pa), "%d", a.pid);
	runs[0] = sampling((const char *[]){ hb_path("heapbpf"), "--pid", pa, "-d", "600", "-o",
					     hb_tmp("one.pb.gz"), NULL },
			   hb_tmp("one.err"));
	snprintf(sock, sizeof(sock), "%s/%d.sock", getenv("HEAPBPF_STATE_DIR"), runs[0]);
	cr_assert_eq(stat(sock, &st), 0, "%s: the run does not listen", sock);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(st.st_uid, 0);
	/* the directory above it is root's 0700 too: nobody cannot even reach the name */
	cr_assert_eq(chmod(hb_tmpdir(), 0711), 0);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups /usr/bin/python3 -c '"
		 "import socket,sys\n"
		 "s=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET)\n"
		 "try:\n s.connect(sys.argv[1])\nexcept PermissionError:\n sys.exit(3)\n"
		 "sys.exit(0)' '%s'",
		 HB_NOBODY, HB_NOBODY, sock);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 3, "nobody connected to %s", sock);
}

/*
 * --live-heap on a service a watch holds: it reads jemalloc's own tables and
 * takes no lock, so it is neither refused nor served: the live heap with the
 * service's sites, exit 0, the watch untouched.
 */
Test(status, the_live_heap_of_a_held_service)
{
	char pa[16], err[8192], *text = NULL;
	const char *dir = hb_tmp("watch"), *out = hb_tmp("live.folded");

	start_services();
	watch_a(dir, pa, sizeof(pa));
	cr_assert_eq(hb_run((const char *[]){ "--pid", pa, "--live-heap", "-f", "folded", "-o", out,
					      NULL },
			    err, sizeof(err), 120000),
		     0, "%s", err);
	cr_assert_gt(hb_read_file(out, &text), 0);
	has(text, "large_buffers");
	free(text);
	stop_watch();
}
