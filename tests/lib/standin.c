// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "standin.h"

static void in_tmpdir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", hb_tmpdir(), name);
}

pid_t hb_standin_start(const char *const *cmd, int port, const char *const *extra,
		       const char *const *env, int *port_out)
{
	static const char *const expect[] = { "PYRO_EXPECT_TENANT", "PYRO_EXPECT_USER",
					      "PYRO_EXPECT_PASSWORD", "PYRO_EXPECT_TOKEN" };
	char portfile[PATH_MAX], logfile[PATH_MAX], outfile[PATH_MAX], portarg[16], buf[32];
	const char *argv[32];
	int n = 0;
	pid_t pid;
	FILE *f;

	in_tmpdir(portfile, sizeof(portfile), "server.port");
	in_tmpdir(logfile, sizeof(logfile), "server.log");
	in_tmpdir(outfile, sizeof(outfile), "server.out");
	unlink(portfile);
	snprintf(portarg, sizeof(portarg), "%d", port);
	for (; *cmd && n < 4; cmd++)
		argv[n++] = *cmd;
	argv[n++] = "--port-file";
	argv[n++] = portfile;
	argv[n++] = "--log";
	argv[n++] = logfile;
	argv[n++] = "--port";
	argv[n++] = portarg;
	argv[n++] = "--lifetime";
	argv[n++] = "150";
	for (; extra && *extra && n < 31; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
		unsetenv(expect[i]);
	for (; env && *env; env++)
		putenv((char *)*env);
	pid = hb_spawn(argv, outfile);
	cr_assert_gt(pid, 0);
	/*
	 * Until it writes its port or exits, however long its start takes (the
	 * suite's own timeout ends a stand-in that does neither): python3 and
	 * its imports took more than 10 s to start under qemu's emulation
	 * (make test-kernels).
	 */
	while (access(portfile, F_OK) && waitpid(pid, NULL, WNOHANG) == 0)
		hb_sleep_ms(50);
	f = fopen(portfile, "re");
	cr_assert_not_null(f, "the stand-in did not start (see %s)", outfile);
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	*port_out = atoi(buf);
	cr_assert_gt(*port_out, 0);
	return pid;
}

void hb_standin_stop(pid_t *pid)
{
	kill(*pid, SIGTERM);
	hb_wait(*pid, 5000);
	*pid = 0;
}

int hb_standin_log(char *lines, size_t linelen, int max)
{
	char logfile[PATH_MAX];
	FILE *f;
	int n = 0;

	in_tmpdir(logfile, sizeof(logfile), "server.log");
	f = fopen(logfile, "re");
	if (!f)
		return 0;
	while (n < max && fgets(lines + (size_t)n * linelen, (int)linelen, f))
		n++;
	fclose(f);
	return n;
}

int hb_standin_args(const char **args, char *url, size_t urllen, const char *scheme, int port,
		    const char *pid, const char *spool)
{
	int n = 0;

	snprintf(url, urllen, "%s://127.0.0.1:%d", scheme, port);
	args[n++] = "--pid";
	args[n++] = pid;
	args[n++] = "-d";
	args[n++] = "1";
	args[n++] = "--pyroscope";
	args[n++] = url;
	args[n++] = "--spool-dir";
	args[n++] = spool;
	return n;
}

void hb_standin_deliver(const char *scheme, int port, const char *pid, const char *spool,
			const char *extra1, const char *extra2, int want, char *err, size_t errlen)
{
	char url[64];
	const char *args[20];
	int n, rc;

	n = hb_standin_args(args, url, sizeof(url), scheme, port, pid, spool);
	args[n++] = "--pyroscope-retries";
	args[n++] = "1";
	args[n++] = "--pyroscope-timeout";
	args[n++] = "5";
	args[n++] = "-v";
	if (extra1)
		args[n++] = extra1;
	if (extra2)
		args[n++] = extra2;
	args[n] = NULL;
	rc = hb_run(args, err, errlen, 90000);
	cr_assert_eq(rc, want, "exit %d, wanted %d: %s", rc, want, err);
}

void hb_standin_kill(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		hb_wait(*pid, 5000);
		*pid = 0;
	}
}

void hb_standin_paused_windows(struct svc *s, const char *pid, int port, const char *spool)
{
	char url[64], reply[256];
	uint64_t flag;
	pid_t h;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	{
		const char *argv[] = {
			hb_path("heapbpf"), "--pid", pid,	    "--interval", "2",	"-d", "6",
			"--pyroscope",	    url,     "--spool-dir", spool,	  "-q", NULL
		};

		h = hb_spawn(argv, hb_tmp("heapbpf.out"));
	}
	/*
	 * allocations in the first window, none in the third: the windows are
	 * counted from when sampling started (set-up can take seconds on a loaded
	 * machine), and the pause comes a second after that, while the service
	 * has allocated for a second at its full rate. Only lateness can move the
	 * pause (the test seeing the flag, the sleep, the command): 3 s of it
	 * before the third window begins. Paused 3 s in, as it was, 1 s of it was
	 * enough to put allocations in the third.
	 */
	cr_assert_eq(hb_sym_addr(s->pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert(hb_wait_byte(s->pid, flag, 1, 20000, h), "heapbpf did not start sampling");
	hb_sleep_ms(1000);
	cr_assert_eq(svc_cmd(s, "pause", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(hb_wait(h, 60000), 0);
}
