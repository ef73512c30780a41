// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf runs as root and writes into directories an operator names. Here
 * an unprivileged user (nobody, by setpriv) plants links, pipes and files
 * where heapbpf will write, in a directory of theirs, and the test checks
 * that heapbpf neither follows nor blocks, says why in one sentence, and
 * that nothing outside the intended file changes. Also: --reset restores
 * every child a killed run listed (there was a cap of 256), and refuses to
 * forget one it could not restore; spool and state directories and spool
 * entries that are not heapbpf's own are refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "standin.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define IDLE_CONF   "prof:true,prof_active:false"
#define NOBODY	    65534
#define PUSH_SERVER "tests/pyroscope/pyroscope_push_server.py"
#define NKIDS	    300

/* Children of the target a test forked: killed when the test ends, however it ends. */
static pid_t kids[NKIDS];
static pid_t server;

static void safety_fini(void)
{
	for (int i = 0; i < NKIDS; i++) {
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
	}
	if (server > 0)
		hb_standin_stop(&server);
	hb_tmpdir_cleanup();
}

TestSuite(host_safety, .fini = safety_fini, .timeout = 240);

static struct svc svc;
static char pid[16];
static uint64_t flag_addr;

static void start(void)
{
	const char *bin = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "1", NULL };

	hb_require_bpf();
	cr_assert_eq(svc_start(&svc, bin, IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(svc.pid, bin, "je_prof_active_state", &flag_addr), 0);
	snprintf(pid, sizeof(pid), "%d", svc.pid);
}

static uint8_t flag_of(pid_t p)
{
	uint8_t b = 0xff;

	cr_assert_eq(hb_peek(p, flag_addr, &b, 1), 0, "cannot read pid %d", p);
	return b;
}

/* The unprivileged user's own directory, <test dir>/attacker, 0755, reachable by nobody. */
static const char *attacker_dir(void)
{
	const char *d = hb_tmp("attacker");

	cr_assert_eq(chmod(hb_tmpdir(), 0711), 0);
	cr_assert_eq(mkdir(d, 0755), 0);
	cr_assert_eq(chown(d, NOBODY, NOBODY), 0);
	return d;
}

/* Runs a shell command (fmt with two strings) as nobody, with no groups: an unprivileged user. */
static void as_nobody(const char *fmt, const char *a, const char *b)
{
	char inner[2 * PATH_MAX + 64], cmd[3 * PATH_MAX];

	snprintf(inner, sizeof(inner), fmt, a, b);
	snprintf(cmd, sizeof(cmd), "setpriv --reuid=%d --regid=%d --clear-groups /bin/sh -c '%s'",
		 NOBODY, NOBODY, inner);
	cr_assert_eq(system(cmd), 0, "as nobody: %s", cmd);
}

/* A root-owned 0644 file outside the attacker's reach, with known content. */
static const char *precious(void)
{
	const char *p = hb_tmp("precious.conf");
	FILE *f = fopen(p, "we");

	cr_assert_not_null(f);
	fputs("root's own text\n", f);
	fclose(f);
	cr_assert_eq(chmod(p, 0644), 0);
	return p;
}

static void assert_precious(const char *p)
{
	char *text = NULL;
	struct stat st;

	cr_assert_eq(hb_read_file(p, &text), 16);
	cr_assert_str_eq(text, "root's own text\n", "the file behind the link changed");
	free(text);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644, "its mode changed");
	cr_assert_eq(st.st_uid, 0);
}

/* heapbpf's message: one line, saying want. */
static void one_sentence(const char *err, const char *want)
{
	const char *line = strstr(err, want);

	cr_assert(line, "expected \"%s\" in: %s", want, err);
}

static bool is_link(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
}

/* ---- -o ---- */

/* A link to a pipe root reads: before, the profile went through it to whoever reads it. */
Test(host_safety, output_link_to_a_pipe_is_not_followed)
{
	const char *dir = attacker_dir(), *fifo = hb_tmp("root.fifo");
	char out[PATH_MAX], err[8192], buf[64];
	int rfd;

	start();
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	/* a reader, so that the old open() would not block but write */
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(rfd, 0);
	snprintf(out, sizeof(out), "%s/heap.pb.gz", dir);
	as_nobody("ln -s %s %s", fifo, out);
	/* the operator insists on the attacker's directory: the link is still not followed */
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--allow-shared-dir", "-o",
					      out, NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "symbolic link");
	cr_assert_eq(read(rfd, buf, sizeof(buf)), 0, "the profile reached the pipe");
	close(rfd);
	cr_assert(is_link(out), "the link was replaced");
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * A pipe with no reader planted as the output: open() blocked heapbpf
 * forever (SIGTERM ignored, its lock held); now refused at once, before the
 * window, and the next run on the pid is not refused.
 */
Test(host_safety, output_pipe_does_not_block_or_keep_the_lock)
{
	const char *dir = attacker_dir();
	char out[PATH_MAX], good[PATH_MAX], err[8192];
	struct stat st;

	start();
	snprintf(out, sizeof(out), "%s/heap.pb.gz", dir);
	as_nobody("mkfifo -m 0666 %s%s", out, "");
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--allow-shared-dir", "-o",
					      out, NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "not a regular file");
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode));
	cr_assert_eq(flag_of(svc.pid), 0);
	snprintf(good, sizeof(good), "%s", hb_tmp("good.pb.gz"));
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "-o", good, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* A link to a device: refused, the device not opened for writing. */
Test(host_safety, output_link_to_a_device_is_refused)
{
	const char *dir = attacker_dir();
	char out[PATH_MAX], err[8192];

	start();
	snprintf(out, sizeof(out), "%s/heap.pb.gz", dir);
	/* /dev/full: a write that got through would fail with ENOSPC, not with our refusal */
	as_nobody("ln -s /dev/full %s%s", out, "");
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--allow-shared-dir", "-o",
					      out, NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "symbolic link");
	cr_assert_null(strstr(err, "No space"), "it wrote to the device: %s", err);
	cr_assert(is_link(out));
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * The default name in a working directory everyone can write (no sticky
 * bit): refused before the window; with the sticky bit or
 * --allow-shared-dir, written, root's and 0600.
 */
Test(host_safety, default_name_in_a_shared_directory)
{
	const char *dir = hb_tmp("shared");
	char cmd[3 * PATH_MAX], errpath[PATH_MAX], bin[PATH_MAX], *err = NULL;
	struct dirent **names;
	int n, rc;
	pid_t hp;

	start();
	cr_assert_not_null(realpath(hb_path("heapbpf"), bin));
	cr_assert_eq(mkdir(dir, 0777), 0);
	cr_assert_eq(chmod(dir, 0777), 0);
	snprintf(errpath, sizeof(errpath), "%s", hb_tmp("shared.err"));
	snprintf(cmd, sizeof(cmd), "cd '%s' && exec '%s' --pid %s -d 1", dir, bin, pid);
	hp = hb_spawn((const char *[]){ "/bin/sh", "-c", cmd, NULL }, errpath);
	rc = hb_wait(hp, 60000);
	cr_assert_geq(hb_read_file(errpath, &err), 0);
	cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
	one_sentence(err, "other users can write into the directory");
	cr_assert_null(strstr(err, "sampling every"), "it profiled first: %s", err);
	free(err);
	n = scandir(dir, &names, NULL, alphasort);
	cr_assert_eq(n, 2, "it wrote into the shared directory");
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);

	/* the operator insists */
	snprintf(cmd, sizeof(cmd), "cd '%s' && exec '%s' --pid %s -d 1 --allow-shared-dir", dir,
		 bin, pid);
	hp = hb_spawn((const char *[]){ "/bin/sh", "-c", cmd, NULL }, errpath);
	rc = hb_wait(hp, 60000);
	cr_assert(rc == 0 || rc == 3, "exit %d", rc);

	/* sticky, as /tmp is */
	cr_assert_eq(chmod(dir, 01777), 0);
	snprintf(cmd, sizeof(cmd), "cd '%s' && exec '%s' --pid %s -d 1", dir, bin, pid);
	hp = hb_spawn((const char *[]){ "/bin/sh", "-c", cmd, NULL }, errpath);
	rc = hb_wait(hp, 60000);
	cr_assert(rc == 0 || rc == 3, "exit %d", rc);
	n = scandir(dir, &names, NULL, alphasort);
	cr_assert_eq(n, 4, "two profiles expected");
	for (int i = 0; i < n; i++) {
		char p[2 * PATH_MAX];
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", dir, names[i]->d_name);
		if (names[i]->d_name[0] != '.') {
			cr_assert_eq(lstat(p, &st), 0);
			cr_assert(S_ISREG(st.st_mode));
			cr_assert_eq(st.st_uid, 0);
			cr_assert_eq(st.st_mode & 07777, 0600);
		}
		free(names[i]);
	}
	free(names);
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * Another user's directory (0755, theirs: they may write there whatever
 * its mode says, and no sticky bit binds them) is refused for -o and
 * --record before the window (-d 600 would outlast the run's guard), with
 * nothing created there and the flag never left on; --allow-shared-dir
 * writes there, a file of root's, 0600.
 */
Test(host_safety, directory_of_another_user_is_refused)
{
	const char *dir = attacker_dir();
	char out[PATH_MAX], rec[PATH_MAX], err[8192], names[4][256];
	struct stat st;

	start();
	snprintf(out, sizeof(out), "%s/heap.pb.gz", dir);
	snprintf(rec, sizeof(rec), "%s/heap.hbr", dir);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "600", "-o", out, NULL }, err,
			    sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "the directory belongs to another user");
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "600", "--record", rec, "-o",
					      hb_tmp("r.pb.gz"), NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "the directory belongs to another user");
	cr_assert_eq(hb_count_files(dir, "", names, 4), 0, "%s was written into", names[0]);
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--allow-shared-dir", "-o",
					      out, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_uid, 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * A link on the way: the attacker's directory holds "sub", a link to a
 * directory of root's. The directory the path ends in was root's and passed
 * its check, so the profile went there; now the path's own directories are
 * checked as they are walked, and the run is refused, root's directory
 * left empty.
 */
Test(host_safety, link_on_the_way_is_not_followed)
{
	const char *dir = attacker_dir(), *roots = hb_tmp("roots");
	char out[PATH_MAX], err[8192], names[4][256], link[PATH_MAX];

	start();
	cr_assert_eq(mkdir(roots, 0755), 0);
	snprintf(link, sizeof(link), "%s/sub", dir);
	as_nobody("ln -s %s %s", roots, link);
	snprintf(out, sizeof(out), "%s/heap.pb.gz", link);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "600", "-o", out, NULL }, err,
			    sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "a directory on its path belongs to another user");
	cr_assert_eq(hb_count_files(roots, "", names, 4), 0, "%s was written", names[0]);
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* ---- --record ---- */

/* A link to root's 0644 file: it was truncated, filled and made 0600. */
Test(host_safety, record_link_is_not_followed)
{
	const char *dir = attacker_dir(), *victim = precious();
	char rec[PATH_MAX], err[8192];

	start();
	snprintf(rec, sizeof(rec), "%s/heap.hbr", dir);
	as_nobody("ln -s %s %s", victim, rec);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--allow-shared-dir",
					      "--record", rec, NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "symbolic link");
	assert_precious(victim);
	cr_assert(is_link(rec));
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * A file the attacker made first, 0666: it stayed theirs (readable by
 * them, whatever mode heapbpf set) with the recording in it. Now a new
 * file of root's, 0600, takes its name; the planted inode keeps its bytes.
 */
Test(host_safety, record_over_a_planted_file_is_a_new_file_of_roots)
{
	const char *dir = attacker_dir();
	char rec[PATH_MAX], err[8192], buf[32] = "";
	struct stat planted, now;
	int fd;

	start();
	snprintf(rec, sizeof(rec), "%s/heap.hbr", dir);
	as_nobody("printf planted > %s && chmod 0666 %s", rec, rec);
	/* the attacker's own handle on their file, kept across the run */
	fd = open(rec, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &planted), 0);
	cr_assert_eq(planted.st_uid, NOBODY);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--allow-shared-dir",
					      "--record", rec, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(pread(fd, buf, sizeof(buf) - 1, 0), 7, "the planted file was written to");
	cr_assert_str_eq(buf, "planted");
	close(fd);
	cr_assert_eq(lstat(rec, &now), 0);
	cr_assert(S_ISREG(now.st_mode));
	cr_assert_neq(now.st_ino, planted.st_ino, "the attacker's file holds the recording");
	cr_assert_eq(now.st_uid, 0);
	cr_assert_eq(now.st_mode & 07777, 0600);
	/* and it is a recording heapbpf reports */
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-f", "folded", "-o",
					      hb_tmp("rec.folded"), NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* ---- --reset ---- */

/* The state file's text, or NULL when there is none. */
static char *state_text(void)
{
	char path[128], *text = NULL;

	snprintf(path, sizeof(path), "/run/heapbpf/%d.state", svc.pid);
	return hb_read_file(path, &text) >= 0 ? text : NULL;
}

static size_t count_children(const char *text)
{
	size_t n = 0;

	for (const char *p = text; p && (p = strstr(p, "child=")); p++)
		n++;
	return n;
}

/* heapbpf -d 0 sampling; NKIDS children forked meanwhile, all in its state file; then kill -9. */
static void killed_run_with_children(void)
{
	char out[PATH_MAX], reply[128], *text = NULL;
	pid_t hp;
	size_t listed = 0;

	snprintf(out, sizeof(out), "%s", hb_tmp("killed.pb.gz"));
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-o", out,
					NULL },
		      hb_tmp("killed.err"));
	cr_assert(hb_wait_byte(svc.pid, flag_addr, 1, 30000, hp), "heapbpf did not start sampling");
	for (int i = 0; i < NKIDS; i++) {
		cr_assert_eq(svc_cmd(&svc, "fork 120", reply, sizeof(reply), 10000), 0);
		cr_assert_eq(sscanf(reply, "forked %d", &kids[i]), 1, "%s", reply);
	}
	/* heapbpf lists each child as it hears of its fork: wait for all of them */
	for (int tries = 0; tries < 600 && listed < NKIDS; tries++) {
		free(text);
		text = state_text();
		listed = count_children(text);
		if (listed < NKIDS)
			hb_sleep_ms(100);
	}
	free(text);
	cr_assert_eq(listed, NKIDS, "the state file lists %zu children", listed);
	kill(hp, SIGKILL);
	hb_wait(hp, 10000);
	for (int i = 0; i < NKIDS; i++)
		cr_assert_eq(flag_of(kids[i]), 1, "child %d: the test shows nothing", kids[i]);
}

Test(host_safety, reset_restores_every_child_listed)
{
	char err[8192], want[128];

	start();
	killed_run_with_children();
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", pid, NULL }, err, sizeof(err),
			    60000),
		     0, "%s", err);
	snprintf(want, sizeof(want), "restored prof_active in %d process(es) forked from pid",
		 NKIDS);
	one_sentence(err, want);
	cr_assert_eq(flag_of(svc.pid), 0);
	for (int i = 0; i < NKIDS; i++)
		cr_assert_eq(flag_of(kids[i]), 0, "child %d (#%d) was left sampling", kids[i], i);
	cr_assert_null(state_text());
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * kill -9 of a run that had not caught up with the target's forks: children
 * forked while it ran and after it died (the flag copied on, none of them
 * in the state file), and a grandchild. --reset walks the target's
 * descendants: none is left sampling. Before, only the listed ones were
 * restored. The state file's temporary copy a killed write leaves is
 * removed too.
 */
Test(host_safety, reset_restores_descendants_never_listed)
{
	char err[8192], reply[128], tmp[128];
	const int n = 40;
	pid_t hp;

	start();
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-o",
					hb_tmp("killed.pb.gz"), NULL },
		      hb_tmp("killed.err"));
	cr_assert(hb_wait_byte(svc.pid, flag_addr, 1, 30000, hp), "heapbpf did not start sampling");
	kill(hp, SIGKILL);
	hb_wait(hp, 10000);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(svc_cmd(&svc, i ? "fork 120" : "fork2 120", reply, sizeof(reply),
				     10000),
			     0);
		cr_assert_geq(sscanf(reply, "forked %d %d", &kids[i], &kids[n]), 1, "%s", reply);
	}
	cr_assert_gt(kids[n], 0, "no grandchild");
	for (int i = 0; i <= n; i++)
		cr_assert_eq(flag_of(kids[i]), 1, "pid %d: the test shows nothing", kids[i]);
	snprintf(tmp, sizeof(tmp), "/run/heapbpf/%d.state.tmp.Ab12Cd", svc.pid);
	hb_sh("install -m 0600 /dev/null '%s'", tmp);
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", pid, NULL }, err, sizeof(err),
			    60000),
		     0, "%s", err);
	cr_assert_eq(flag_of(svc.pid), 0);
	for (int i = 0; i <= n; i++)
		cr_assert_eq(flag_of(kids[i]), 0, "pid %d (#%d) was left sampling: %s", kids[i], i,
			     err);
	cr_assert_null(state_text());
	cr_assert_neq(access(tmp, F_OK), 0, "%s was left behind", tmp);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* One child whose flag holds what no heapbpf wrote: --reset says so, fails, and keeps the state. */
Test(host_safety, reset_keeps_the_state_of_a_child_it_cannot_restore)
{
	char err[8192], *text;
	uint8_t odd = 7, one = 1;
	int fdm;
	char mem[64];

	start();
	killed_run_with_children();
	snprintf(mem, sizeof(mem), "/proc/%d/mem", kids[NKIDS - 1]);
	fdm = open(mem, O_RDWR);
	cr_assert_geq(fdm, 0);
	cr_assert_eq(pwrite(fdm, &odd, 1, (off_t)flag_addr), 1);
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", pid, NULL }, err, sizeof(err),
			    60000),
		     1, "%s", err);
	one_sentence(err, "cannot restore prof_active in 1 process(es)");
	one_sentence(err, "is kept");
	text = state_text();
	cr_assert_not_null(text, "the state file was deleted");
	free(text);
	for (int i = 0; i < NKIDS - 1; i++)
		cr_assert_eq(flag_of(kids[i]), 0);
	/* the cause gone, another --reset finishes the job */
	cr_assert_eq(pwrite(fdm, &one, 1, (off_t)flag_addr), 1);
	close(fdm);
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", pid, NULL }, err, sizeof(err),
			    60000),
		     0, "%s", err);
	cr_assert_eq(flag_of(kids[NKIDS - 1]), 0);
	cr_assert_null(state_text());
	cr_assert_eq(svc_stop(&svc), 0);
}

/* A state directory another user owns: refused, nothing written there, the target untouched. */
Test(host_safety, state_directory_of_another_user_is_refused)
{
	const char *dir = attacker_dir();
	char err[8192], env[PATH_MAX + 32];

	start();
	snprintf(env, sizeof(env), "%s", dir);
	setenv("HEAPBPF_STATE_DIR", env, 1);
	cr_assert_eq(
		hb_run((const char *[]){ "--pid", pid, "-d", "1", "-o", hb_tmp("s.pb.gz"), NULL },
		       err, sizeof(err), 60000),
		1, "%s", err);
	unsetenv("HEAPBPF_STATE_DIR");
	one_sentence(err, "belongs to another user");
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* ---- the Pyroscope spool ---- */

static int server_port;

static void start_server(void)
{
	const char *cmd[] = { "/usr/bin/python3", PUSH_SERVER, NULL };

	server = hb_standin_start(cmd, 0, NULL, NULL, &server_port);
}

static int accepted(void)
{
	static char lines[8][8192];

	return hb_standin_log(&lines[0][0], 8192, 8);
}

/* A spool directory another user owns, or one everyone can write: refused before the window. */
Test(host_safety, spool_directory_not_ours_is_refused)
{
	const char *dir = attacker_dir(), *shared = hb_tmp("shared-spool");
	static char err[1 << 20]; /* -v: libbpf says much before heapbpf does */

	start();
	start_server();
	hb_standin_deliver("http", server_port, pid, dir, NULL, NULL, 1, err, sizeof(err));
	one_sentence(err, "belongs to another user");
	cr_assert_null(strstr(err, "sampling every"), "it profiled first: %s", err);
	cr_assert_eq(mkdir(shared, 0777), 0);
	cr_assert_eq(chmod(shared, 01777), 0);
	hb_standin_deliver("http", server_port, pid, shared, NULL, NULL, 1, err, sizeof(err));
	one_sentence(err, "other users can write into the directory");
	cr_assert_eq(accepted(), 0);
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/*
 * A file in the spool that heapbpf did not write (another owner, as one
 * left from when the directory was someone else's), with forged labels:
 * left in place and never pushed; heapbpf's own profile is.
 */
Test(host_safety, spool_entry_not_ours_is_never_pushed)
{
	const char *spool = hb_tmp("spool"),
		   *forged = hb_tmp("spool/2026-01-01T00:00:00Z-000000000-1.spool");
	static char err[1 << 20]; /* -v: libbpf says much before heapbpf does */
	struct stat st;
	FILE *f;

	start();
	start_server();
	cr_assert_eq(mkdir(spool, 0700), 0);
	f = fopen(forged, "we");
	cr_assert_not_null(f);
	fputs("HBSPOOL1\nname=forged{service_name=\"victim\"}\nfrom=1\nuntil=2\n\nbody", f);
	fclose(f);
	cr_assert_eq(chown(forged, NOBODY, NOBODY), 0);
	cr_assert_eq(chmod(forged, 0600), 0);
	hb_standin_deliver("http", server_port, pid, spool, NULL, NULL, 0, err, sizeof(err));
	one_sentence(err, "was not written by heapbpf");
	cr_assert_eq(accepted(), 1, "the forged file was pushed: %s", err);
	cr_assert_eq(stat(forged, &st), 0, "the planted file was removed");
	cr_assert_eq(st.st_uid, NOBODY);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* A link planted as the delivery lock: root created the file it named. */
Test(host_safety, spool_lock_link_is_not_followed)
{
	const char *spool = hb_tmp("spool"), *lock = hb_tmp("spool/.deliver.lock");
	const char *target = hb_tmp("created-by-root");
	static char err[1 << 20]; /* -v: libbpf says much before heapbpf does */
	struct stat st;

	start();
	start_server();
	cr_assert_eq(mkdir(spool, 0700), 0);
	cr_assert_eq(symlink(target, lock), 0);
	hb_standin_deliver("http", server_port, pid, spool, NULL, NULL, 5, err, sizeof(err));
	one_sentence(err, "symbolic link");
	cr_assert_eq(stat(target, &st), -1, "root created the file the link names");
	cr_assert(is_link(lock));
	cr_assert_eq(accepted(), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* The spool directories heapbpf makes, through --spool-dir or --output-dir: 0700, as said. */
Test(host_safety, spool_directories_heapbpf_makes_are_0700)
{
	const char *spool = hb_tmp("made/spool"), *outdir = hb_tmp("snapshots");
	static char err[1 << 20]; /* -v: libbpf says much before heapbpf does */
	char url[64], sub[PATH_MAX];
	struct stat st;
	mode_t old;

	start();
	start_server();
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", server_port);
	/* whatever the umask */
	old = umask(0);
	hb_standin_deliver("http", server_port, pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert_eq(stat(spool, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "--spool-dir made %04o", st.st_mode & 07777);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--output-dir", outdir,
					      "--pyroscope", url, "-q", NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	umask(old);
	snprintf(sub, sizeof(sub), "%s/spool", outdir);
	cr_assert_eq(stat(sub, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "--output-dir's spool is %04o", st.st_mode & 07777);
	cr_assert_eq(stat(outdir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0750);
	cr_assert_eq(accepted(), 2);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* A pipe named as the file to read (report's recording, diff's profiles): refused, not waited on. */
Test(host_safety, pipes_named_as_inputs_are_refused)
{
	const char *fifo = hb_tmp("input.fifo");
	char err[8192];

	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(hb_run((const char *[]){ "report", fifo, "-o", hb_tmp("r.pb.gz"), NULL }, err,
			    sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "not a regular file");
	cr_assert_eq(hb_run((const char *[]){ "diff", fifo, fifo, "-o", hb_tmp("d.pb.gz"), NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	one_sentence(err, "not a regular file");
}

/* ---- debug files ---- */

/*
 * The target's binary in its owner's directory, stripped of DWARF with a
 * .gnu_debuglink to app.debug, and FIFOs planted where the debug file is
 * looked for: app.debug beside it, .debug/app.debug, and the build-id tree of
 * a --debug-dir of the owner's. libdwfl's search opened each with a blocking
 * open(): heapbpf hung on the first; now each is passed over, and the
 * functions come from the binary's own symbol table.
 */
Test(host_safety, debug_file_pipes_do_not_block)
{
	const char *dir = attacker_dir();
	char app[PATH_MAX], dbg[PATH_MAX], out[PATH_MAX], cmd[PATH_MAX + 64], id[64], *text;
	static char err[1 << 20];
	struct svc s;

	hb_require_bpf();
	snprintf(app, sizeof(app), "%s/app", dir);
	snprintf(dbg, sizeof(dbg), "%s/dbg", dir);
	hb_sh("cp '%s' '%s/app' && cd '%s' && objcopy --only-keep-debug app app.debug && "
	      "strip --strip-debug app && objcopy --add-gnu-debuglink=app.debug app && "
	      "rm app.debug && chown -R %d:%d .",
	      hb_path("examples/alloc-service-static"), dir, dir, NOBODY, NOBODY);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | awk '/Build ID/{print $3}'", app);
	hb_sh_line(id, sizeof(id), cmd);
	cr_assert_eq(strlen(id), 40, "build-id: \"%s\"", id);
	as_nobody("cd %s && mkfifo app.debug && mkdir .debug && mkfifo .debug/app.debug%s", dir,
		  "");
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s/.build-id/%.2s && mkfifo %s/.build-id/%.2s/%s.debug", dbg, id, dbg,
		 id, id + 2);
	as_nobody("%s%s", cmd, "");

	cr_assert_eq(svc_start(&s, app, IDLE_CONF, (const char *[]){ "--threads", "1", NULL }), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(out, sizeof(out), "%s", hb_tmp("app.folded"));
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "-q", "-f", "folded", "-o",
					      out, "--debug-dir", dbg, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_gt(hb_read_file(out, &text), 0);
	cr_assert(strstr(text, ";worker_main;run_one;"), "%.2000s", text);
	free(text);
}

/* ---- a jailed process's own files ---- */

/* An inotify watch on path for any open or read of it. */
static int watch_opens(const char *path)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_geq(inotify_add_watch(fd, path, IN_OPEN | IN_ACCESS), 0);
	return fd;
}

static void assert_never_opened(int fd, const char *path)
{
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	cr_assert(n < 0 && errno == EAGAIN, "%s, the host file the link leads to, was opened",
		  path);
	close(fd);
}

/*
 * An unprivileged user's process in a chroot of theirs (user namespace and
 * chroot) maps binary, and lib in libdir when given. Root reads its maps
 * with the jail's path in front (/tmp/.../jail/bin/svc), so the jailed
 * user plants, inside the jail, at that host path, an absolute link to a
 * host file: a copy of the very object (a jemalloc heapbpf would take).
 * Before, heapbpf opened /proc/PID/root + path, the link resolved against
 * root's own root, and the host file was parsed and probed while the target
 * got no sample. Now the object is the file the process maps.
 */
static void jailed_object_is_the_mapped_one(const char *binary, const char *lib, const char *libdir,
					    const char *flag_in)
{
	const char *decoy = hb_tmp("decoy"), *log = hb_tmp("jail.log");
	const char *out = hb_tmp("heap.folded"), *jail;
	char planted[PATH_MAX], host[PATH_MAX], p[16], err[8192], *text = NULL;
	uint64_t addr;
	uint8_t b = 0xff;
	pid_t jailed;
	int ino;

	hb_require_bpf();
	jail = hb_jail(binary, lib, libdir);
	jailed = hb_jail_start(jail, IDLE_CONF,
			       (const char *[]){ "--threads", "1", "--rate", "20000", NULL }, log);
	kids[0] = jailed;
	/* the object the link names: root's, outside the jail, and a jemalloc */
	hb_sh("cp '%s' '%s' && chmod 0755 '%s'", lib ? lib : binary, decoy, decoy);
	snprintf(planted, sizeof(planted), "%s%s/%s", jail, lib ? libdir : "/bin",
		 lib ? "libjemalloc.so.2" : "svc");
	hb_jail_plant(jail, planted, decoy);
	snprintf(host, sizeof(host), "%s%s", jail, planted);
	cr_assert(is_link(host), "nothing planted at %s", host);
	ino = watch_opens(decoy);
	snprintf(p, sizeof(p), "%d", jailed);
	cr_assert_eq(hb_run((const char *[]){ "--pid", p, "-d", "2", "--format", "folded", "-o",
					      out, NULL },
			    err, sizeof(err), 120000),
		     0, "%s", err);
	assert_never_opened(ino, decoy);
	cr_assert_gt(hb_read_file(out, &text), 0, "no profile: %s", err);
	cr_assert(strstr(text, "churn_small"), "the service's sites are not in the profile: %s",
		  err);
	free(text);
	snprintf(host, sizeof(host), "%s%s", jail, flag_in);
	cr_assert_eq(hb_sym_addr(jailed, host, "je_prof_active_state", &addr), 0);
	cr_assert_eq(hb_peek(jailed, addr, &b, 1), 0);
	cr_assert_eq(b, 0, "the jailed service's flag was left on");
	kill(jailed, SIGKILL);
	hb_wait(jailed, 60000);
	kids[0] = 0;
}

Test(host_safety, jailed_binary_link_leads_nowhere)
{
	jailed_object_is_the_mapped_one(hb_path("examples/alloc-service-static"), NULL, NULL,
					"/bin/svc");
}

Test(host_safety, jailed_libjemalloc_link_leads_nowhere)
{
	jailed_object_is_the_mapped_one(hb_path("examples/alloc-service-shared"),
					hb_path("jemalloc/libjemalloc.so.2"),
					"/lib/x86_64-linux-gnu",
					"/lib/x86_64-linux-gnu/libjemalloc.so.2");
}

/* ---- the pid taken between discovery and the write ---- */

/* Opens the FIFO path for mode (no blocking), heapbpf (pid hb) still alive; a guard of 60 s. */
static int fifo_end(const char *path, int mode, pid_t hb)
{
	for (int waited = 0; waited < 60000; waited += 20) {
		int fd = open(path, mode | O_NONBLOCK | O_CLOEXEC);

		/* a writer's end with no reader yet fails with ENXIO */
		if (fd >= 0)
			return fd;
		cr_assert_eq(errno, ENXIO, "%s: %s", path, strerror(errno));
		cr_assert_eq(waitpid(hb, NULL, WNOHANG), 0, "heapbpf exited");
		hb_sleep_ms(20);
	}
	cr_assert_fail("heapbpf never opened %s", path);
	return -1;
}

/*
 * A forked child of the service is the target. Right before heapbpf writes
 * its flag (HEAPBPF_TEST_FLAG_PAUSE) the child is killed and a new fork of
 * the same image, alike in every mapping and in its AT_RANDOM bytes, is
 * given its pid. Before, only the image was compared and the byte went into
 * the newcomer (sampled from then on); now its start time tells them apart:
 * nothing is written into it, and heapbpf says why.
 */
Test(host_safety, pid_taken_before_the_write_gets_no_flag)
{
	const char *dir = hb_tmp("pause"), *errpath = hb_tmp("heapbpf.err");
	char reached[PATH_MAX], go[PATH_MAX], reply[64], target[16], got[64], *text = NULL;
	struct pollfd pfd = { .events = POLLIN };
	pid_t child, newcomer, hb;
	int fd, pidfd, rc;
	ssize_t n;

	start();
	cr_assert_eq(svc_cmd(&svc, "fork", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
	kids[0] = child;
	snprintf(target, sizeof(target), "%d", child);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(reached, sizeof(reached), "%s/reached", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	cr_assert_eq(mkfifo(reached, 0600), 0);
	cr_assert_eq(mkfifo(go, 0600), 0);
	setenv("HEAPBPF_TEST_FLAG_PAUSE", dir, 1);
	hb = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", target, "-d", "600", "-o",
					hb_tmp("heap.pb.gz"), NULL },
		      errpath);
	unsetenv("HEAPBPF_TEST_FLAG_PAUSE");
	cr_assert_gt(hb, 0);
	/* heapbpf found the child and is about to write: it waits for the test */
	fd = fifo_end(reached, O_RDONLY, hb);
	pfd.fd = fd;
	for (int waited = 0; waited < 60000 && poll(&pfd, 1, 200) == 0; waited += 200)
		cr_assert_eq(waitpid(hb, NULL, WNOHANG), 0, "heapbpf exited");
	n = read(fd, got, sizeof(got) - 1);
	close(fd);
	cr_assert_gt(n, 0, "heapbpf never reached the write");
	got[n] = '\0';
	cr_assert_eq(atoi(got), child, "%s", got);
	/* the target goes; the service forks its copy as the same pid */
	pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	cr_assert_geq(pidfd, 0);
	cr_assert_eq(kill(child, SIGKILL), 0);
	pfd.fd = pidfd;
	cr_assert_eq(poll(&pfd, 1, 60000), 1, "the child did not exit");
	close(pidfd);
	snprintf(got, sizeof(got), "forkat %d", child);
	cr_assert_eq(svc_cmd(&svc, got, reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &newcomer), 1, "%s", reply);
	cr_assert_eq(newcomer, child);
	cr_assert_eq(flag_of(newcomer), 0);
	/* heapbpf goes on: it writes, or says why not */
	fd = fifo_end(go, O_WRONLY, hb);
	close(fd);
	/* until the byte goes on, or heapbpf exits without writing it */
	cr_assert_not(hb_wait_byte(newcomer, flag_addr, 1, 60000, hb),
		      "heapbpf wrote the flag into the newcomer");
	kill(hb, SIGTERM);
	rc = hb_wait(hb, 60000);
	cr_assert_geq(hb_read_file(errpath, &text), 0);
	cr_assert_eq(rc, 1, "%s", text);
	cr_assert(strstr(text, "its pid is another process's now"), "%s", text);
	free(text);
	cr_assert_eq(flag_of(newcomer), 0);
	cr_assert_eq(flag_of(svc.pid), 0);
	cr_assert_eq(svc_stop(&svc), 0);
}

/* ---- names a target chose ---- */

/* No byte of an escape sequence in the file at path (or in name). */
static void no_escape_in(const char *what, const char *text)
{
	cr_assert_null(strchr(text, '\x1b'), "%s holds a raw escape: %s", what, text);
	cr_assert_null(strchr(text, '\x07'), "%s holds a raw BEL: %s", what, text);
}

/*
 * A service whose command name is an escape sequence (it was exec'd through
 * a link of that name: what `ps` shows, and /proc/PID/comm) profiled by a
 * one-shot run, an --interval run and heapbpf watch: nothing any of them
 * says, and no name of a file they write, holds the raw bytes.
 */
Test(host_safety, an_escape_in_comm_is_never_written_raw)
{
	const char *link = hb_tmp("\x1b]0;owned\x07\x1b[2J"), *dir = hb_tmp("windows");
	const char *errpath = hb_tmp("run.err"), *one = hb_tmp("one.pb.gz");
	const char *args[] = { "--threads", "1", NULL };
	char names[16][256], target[PATH_MAX], *text = NULL;
	int n;

	hb_require_bpf();
	/* the link's target absolute: HEAPBPF_BUILD may be relative (make test's "build") */
	cr_assert_not_null(realpath(hb_path("examples/alloc-service-static"), target));
	cr_assert_eq(symlink(target, link), 0);
	cr_assert_eq(svc_start(&svc, link, IDLE_CONF, args), 0);
	snprintf(pid, sizeof(pid), "%d", svc.pid);
	cr_assert_eq(mkdir(dir, 0700), 0);
	{
		const char *const modes[][10] = {
			{ hb_path("heapbpf"), "--pid", pid, "-d", "1", "-o", one, NULL },
			{ hb_path("heapbpf"), "--pid", pid, "--interval", "1", "-d", "2",
			  "--output-dir", dir, NULL },
			{ hb_path("heapbpf"), "watch", "--pid", pid, "-d", "2", "--output-dir", dir,
			  NULL },
		};

		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			pid_t hb = hb_spawn((const char **)modes[m], errpath);
			int rc = hb_wait(hb, 120000);

			cr_assert_gt(hb_read_file(errpath, &text), 0);
			cr_assert_eq(rc, 0, "%s %s failed: %s", modes[m][1], modes[m][3], text);
			cr_assert(strstr(text, "\\x1b]0;owned\\x07"),
				  "the name is not said escaped: %s", text);
			no_escape_in("heapbpf's output", text);
			free(text);
			text = NULL;
		}
	}
	n = hb_count_files(dir, "", names, 16);
	cr_assert_gt(n, 0, "no file written into %s", dir);
	for (int i = 0; i < n && i < 16; i++)
		no_escape_in("a file's name", names[i]);
	cr_assert_eq(svc_stop(&svc), 0);
}
