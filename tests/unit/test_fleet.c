// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Fleet helpers without BPF: snapshot names, targets, fleet options. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "export/snapshot.h"
#include "targets/targets.h"

static char dir[PATH_MAX];

static void mkdir_tmp(void)
{
	snprintf(dir, sizeof(dir), "/tmp/heapbpf-unit-fleet.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void rm_tmp(void)
{
	char cmd[PATH_MAX + 16];

	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		cr_assert_eq(system(cmd), 0);
	}
}

TestSuite(fleet_unit, .init = mkdir_tmp, .fini = rm_tmp);

/* ---- snapshots ---- */

Test(fleet_unit, snapshot_names)
{
	char stamp[SNAPSHOT_STAMP_LEN + 1], name[256], parsed[SNAPSHOT_STAMP_LEN + 1];

	snapshot_stamp(86400 * 365 + 3723, stamp);
	cr_assert_str_eq(stamp, "19710101T010203Z");
	cr_assert_eq(snapshot_name(name, sizeof(name), stamp, 42, "my app/x", "pb.gz"), 0);
	cr_assert_str_eq(name, "heap-19710101T010203Z-42-my_app_x.pb.gz");
	cr_assert(snapshot_parse_name(name, parsed));
	cr_assert_str_eq(parsed, stamp);
	cr_assert(snapshot_parse_name("heap-19710101T010203Z-1-a.folded.zst", parsed));
	cr_assert_not(snapshot_parse_name("heap-19710101T010203Z-1-a.pb.gz.tmp.AbC123", parsed));
	cr_assert_not(snapshot_parse_name("heap-1971010XT010203Z-1-a.pb.gz", parsed));
	cr_assert_not(snapshot_parse_name("heap-19710101T010203Z-x-a.pb.gz", parsed));
	cr_assert_not(snapshot_parse_name("notes.txt", parsed));
}

/* ---- targets ---- */

Test(fleet_unit, unit_names)
{
	char out[256];

	cr_assert_eq(targets_unit_name("redis-server", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "redis-server.service");
	cr_assert_eq(targets_unit_name("app@1.service", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "app@1.service");
	cr_assert_eq(targets_unit_name("session-3.scope", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "session-3.scope");
	cr_assert_eq(targets_unit_name("../etc", out, sizeof(out)), -EINVAL);
	cr_assert_eq(targets_unit_name("a b", out, sizeof(out)), -EINVAL);
	cr_assert_eq(targets_unit_name("", out, sizeof(out)), -EINVAL);
}

static void write_procs(const char *rel, const char *text)
{
	char path[PATH_MAX + 256], cmd[PATH_MAX + 300];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", dir, rel);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/%s/cgroup.procs", dir, rel);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

Test(fleet_unit, unit_pids_from_a_cgroup_tree)
{
	pid_t pids[TARGETS_MAX];
	char err[512];
	int n;

	/* systemd's layout: the service, a sub-cgroup of it, and a unit of the same name elsewhere */
	write_procs("system.slice/app.service", "300\n100\n");
	write_procs("system.slice/app.service/worker", "200\n100\n");
	write_procs("user.slice/user-1000.slice/user@1000.service/app.slice/app.service", "999\n");
	n = targets_from_unit("app", dir, pids, TARGETS_MAX, err, sizeof(err));
	cr_assert_eq(n, 3, "%s", err);
	cr_assert_eq(pids[0], 100);
	cr_assert_eq(pids[1], 200);
	cr_assert_eq(pids[2], 300);
	/* not under system.slice: found a few levels down */
	/* "app.slice" means app.slice.service, which does not exist */
	n = targets_from_unit("app.slice", dir, pids, TARGETS_MAX, err, sizeof(err));
	cr_assert_eq(n, -ENOENT);
	write_procs("user.slice/user-1000.slice/user@1000.service/app.slice/other.service", "77\n");
	n = targets_from_unit("other", dir, pids, TARGETS_MAX, err, sizeof(err));
	cr_assert_eq(n, 1, "%s", err);
	cr_assert_eq(pids[0], 77);
	/* stopped: the cgroup is there but empty; or not there at all */
	write_procs("system.slice/idle.service", "");
	cr_assert_eq(targets_from_unit("idle", dir, pids, TARGETS_MAX, err, sizeof(err)), -ESRCH);
	cr_assert(strstr(err, "not running"), "%s", err);
	cr_assert_eq(targets_from_unit("gone", dir, pids, TARGETS_MAX, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "gone.service"), "%s", err);
}

Test(fleet_unit, pidfile_rules)
{
	char path[PATH_MAX + 16], err[512];
	pid_t pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/pid", dir);
	f = fopen(path, "w");
	fprintf(f, "%d\n", getpid());
	fclose(f);
	chmod(path, 0644);
	cr_assert_eq(targets_from_pidfile(path, &pid, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pid, getpid());
	chmod(path, 0664);
	cr_assert_eq(targets_from_pidfile(path, &pid, err, sizeof(err)), -EPERM);
	chmod(path, 0644);
	f = fopen(path, "w");
	fprintf(f, "12x\n");
	fclose(f);
	cr_assert_eq(targets_from_pidfile(path, &pid, err, sizeof(err)), -EINVAL);
	f = fopen(path, "w");
	fprintf(f, "%d\n", INT_MAX - 1);
	fclose(f);
	cr_assert_eq(targets_from_pidfile(path, &pid, err, sizeof(err)), -ESRCH);
	cr_assert_eq(targets_from_pidfile("/nonexistent/pid", &pid, err, sizeof(err)), -ENOENT);
}

/* ---- command line ---- */

static int parse(struct cli *c, const char *const *args, char *errbuf, size_t errlen)
{
	static char *argv[32];
	FILE *saved = stderr, *mem;
	int argc = 0, rc;

	/* cli_parse keeps pointers into argv: the previous call's strings live until now */
	for (int i = 0; argv[i]; i++) {
		free(argv[i]);
		argv[i] = NULL;
	}
	argv[argc++] = strdup("heapbpf");
	for (; *args; args++)
		argv[argc++] = strdup(*args);
	argv[argc] = NULL;
	mem = fmemopen(errbuf, errlen, "w");
	stderr = mem;
	rc = hb_cli_parse(argc, argv, c);
	fclose(mem);
	stderr = saved;
	return rc;
}

Test(fleet_unit, cli_fleet_options)
{
	char err[1024] = "";
	struct cli c;

	{
		const char *a[] = { "--unit", "redis", "--output-dir", "/var/lib/x", "-f",
				    "pprof",  "-f",    "folded",       "--compress", "zstd",
				    "--keep", "5",     "--max-bytes",  "64M",	     NULL };

		cr_assert_eq(parse(&c, a, err, sizeof(err)), 0, "%s", err);
		cr_assert_str_eq(c.run.unit, "redis");
		cr_assert_eq(c.run.formats, 3u);
		cr_assert(c.run.zstd);
		cr_assert_eq(c.run.keep, 5);
		cr_assert_eq(c.run.max_bytes, 64ULL << 20);
		cr_assert_eq(c.run.duration, 10.0);
	}
	{
		const char *a[] = { "-p",	   "1",		"--interval",  "60",
				    "--pyroscope", "https://p", "--spool-dir", "/s",
				    "--label",	   "env=prod",	"--label",     "pid=",
				    NULL };

		cr_assert_eq(parse(&c, a, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(c.run.interval, 60.0);
		cr_assert_eq(c.run.duration, 0.0, "--interval runs until stopped");
		cr_assert_eq(c.run.nlabels, 2);
		cr_assert_eq(c.run.pyro_retries, 3);
	}
	{
		/* alone: the spool goes to heapbpf's state directory */
		const char *a[] = { "-p", "1", "--pyroscope", "https://p", NULL };

		cr_assert_eq(parse(&c, a, err, sizeof(err)), 0, "%s", err);
		cr_assert_null(c.run.spool_dir);
		cr_assert_null(c.run.output_dir);
	}
	static const struct {
		const char *args[8];
		const char *msg;
	} bad[] = {
		{ { "--unit", "a", "-p", "1" }, "one of --pid, --unit" },
		{ { "-p", "1", "--keep", "3" }, "apply to --output-dir" },
		{ { "-p", "1", "--output-dir", "/d", "-o", "x" }, "drop --output" },
		{ { "-p", "1", "--output-dir", "/d", "--compress", "zstd" }, "--format folded" },
		{ { "-p", "1", "--interval", "5" }, "--interval needs" },
		{ { "-p", "1", "--interval", "0.5", "--output-dir", "/d" }, "whole seconds" },
		{ { "-p", "1", "--label", "a=b" }, "apply to --pyroscope" },
		{ { "-p", "1", "--output-dir", "/d", "--max-bytes", "12Q" }, "\"12Q\"" },
		{ { "report", "x.hbr", "--unit", "a" }, "fleet options" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(err, 0, sizeof(err));
		cr_assert_eq(parse(&c, bad[i].args, err, sizeof(err)), -EINVAL, "case %zu", i);
		cr_assert(strstr(err, bad[i].msg), "case %zu: %s", i, err);
	}
}
