// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <linux/sched.h> /* struct clone_args */
#include <netinet/in.h>

#include "harness.h"

static char tmpdir[PATH_MAX];

const char *hb_build_dir(void)
{
	const char *b = getenv("HEAPBPF_BUILD");

	return b && b[0] ? b : "build";
}

const char *hb_path(const char *rel)
{
	static char bufs[4][PATH_MAX];
	static int next;
	char *b = bufs[next++ & 3];

	snprintf(b, PATH_MAX, "%s/%s", hb_build_dir(), rel);
	return b;
}

void hb_require_bpf(void)
{
	const char *opt_out = getenv("HEAPBPF_TEST_NO_BPF");

	if (opt_out && strcmp(opt_out, "1") == 0)
		cr_skip_test("HEAPBPF_TEST_NO_BPF=1: BPF tests skipped at the runner's request");
	if (geteuid() != 0)
		cr_assert_fail(
			"this test needs root (BPF, uprobes, process_vm_writev); run make test "
			"as root, or set HEAPBPF_TEST_NO_BPF=1 to skip the BPF tests explicitly");
}

const char *hb_tmpdir(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/heapbpf-test.XXXXXX");
		if (!mkdtemp(tmpdir))
			cr_assert_fail("mkdtemp: %s", strerror(errno));
	}
	return tmpdir;
}

void hb_tmpdir_cleanup(void)
{
	char cmd[PATH_MAX + 16];

	if (!tmpdir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	tmpdir[0] = '\0';
}

void hb_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int hb_guard_ms(int timeout_ms)
{
	const char *f = getenv("HEAPBPF_TEST_GUARD_FACTOR");
	long k = f && f[0] ? strtol(f, NULL, 10) : 1;

	if (k < 1 || k > 100)
		k = 1;
	return timeout_ms > INT_MAX / (int)k ? INT_MAX : timeout_ms * (int)k;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line from the service's stdout, within timeout_ms. */
static int svc_line(struct svc *s, char *line, size_t len, int timeout_ms)
{
	int64_t deadline = mono_ms() + hb_guard_ms(timeout_ms);

	for (;;) {
		char *nl = memchr(s->buf, '\n', s->buflen);
		struct pollfd pfd = { .fd = s->out_fd, .events = POLLIN };
		int64_t left;
		ssize_t n;

		if (nl) {
			size_t l = nl - s->buf;

			snprintf(line, len, "%.*s", (int)l, s->buf);
			memmove(s->buf, nl + 1, s->buflen - l - 1);
			s->buflen -= l + 1;
			return 0;
		}
		left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		if (s->buflen == sizeof(s->buf))
			return -ENOBUFS;
		n = read(s->out_fd, s->buf + s->buflen, sizeof(s->buf) - s->buflen);
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		s->buflen += n;
	}
}

int svc_start(struct svc *s, const char *binary, const char *malloc_conf, const char *const *args)
{
	return svc_start_env(s, binary, malloc_conf, NULL, args);
}

void hb_child_signals(void)
{
	static const int sigs[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 };
	sigset_t none;

	/*
	 * A test runner started in the background of a non-interactive shell
	 * (nohup cmd &) ignores SIGINT and SIGQUIT, and ignored dispositions
	 * survive exec: heapbpf would never see the SIGINT that stops it, and
	 * the service the SIGQUIT that dumps its core.
	 */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* name (up to its '=') is set by one of the entries of list. */
static bool env_named(const char *entry, char *const *list, size_t n)
{
	size_t len = strcspn(entry, "=");

	for (size_t i = 0; i < n; i++) {
		if (strncmp(list[i], entry, len) == 0 && list[i][len] == '=')
			return true;
	}
	return false;
}

/*
 * environ with o->env's entries in place of those of the same names, and
 * MALLOC_CONF as o->malloc_conf says (NULL: unset) unless o->env sets it; in
 * static storage, made before the fork.
 */
static char *const *service_env(const struct svc_opts *o)
{
	static char conf[1024];
	static char *envp[512];
	size_t n = 0, own;

	for (const char *const *e = o->env; e && *e && n < 8; e++)
		envp[n++] = (char *)*e;
	if (!env_named("MALLOC_CONF=", envp, n)) {
		snprintf(conf, sizeof(conf), "MALLOC_CONF=%s",
			 o->malloc_conf ? o->malloc_conf : "");
		if (o->malloc_conf)
			envp[n++] = conf;
	}
	own = n;
	for (char **e = environ; *e && n < 510; e++) {
		if (strncmp(*e, "MALLOC_CONF=", 12) != 0 && !env_named(*e, envp, own))
			envp[n++] = *e;
	}
	envp[n] = NULL;
	return envp;
}

/*
 * A child as fork() makes one, or with exactly pid want: clone3's set_tid, so
 * a test that needs a freed pid reused does not race the machine's other
 * forks for it. The child must only exec (it has not been through glibc's
 * fork handlers).
 */
static pid_t fork_as(pid_t want)
{
	pid_t tid[1] = { want };
	struct clone_args ca = { .exit_signal = SIGCHLD,
				 .set_tid = (uint64_t)(uintptr_t)tid,
				 .set_tid_size = 1 };

	return want ? (pid_t)syscall(SYS_clone3, &ca, sizeof(ca)) : fork();
}

bool hb_wait_gone(pid_t pid, int timeout_ms)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p;
	int rc;

	/* no such process: it has exited and been reaped already */
	if (fd < 0)
		return errno == ESRCH;
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	do
		rc = poll(&p, 1, hb_guard_ms(timeout_ms));
	while (rc < 0 && errno == EINTR);
	close(fd);
	return rc > 0;
}

bool hb_wait_reaped(pid_t pid, int timeout_ms)
{
	if (!hb_wait_gone(pid, timeout_ms))
		return false;
	/* a zombie answers kill(pid, 0) until its parent reaps it */
	for (int waited = 0; waited < hb_guard_ms(timeout_ms); waited += 10) {
		if (kill(pid, 0) && errno == ESRCH)
			return true;
		hb_sleep_ms(10);
	}
	return false;
}

bool hb_freed_pid_taken(int rc, int tries)
{
	if (rc == -EEXIST && tries < HB_FREED_PID_TRIES)
		return true;
	cr_assert_neq(
		rc, -EEXIST,
		"%d freed pids in a row were taken before the test could start a process as one",
		tries);
	cr_assert_eq(rc, 0, "cannot start a process as a freed pid: %s", strerror(-rc));
	return false;
}

/*
 * In the service's child: a time namespace of its own, its monotonic clocks
 * ahead_s seconds ahead. The namespace is its children's, so it forks: the
 * grandchild returns (and dies with it), the child waits and exits with the
 * grandchild's status. System calls only (the child of the test's process).
 */
static void enter_time_namespace(int64_t ahead_s)
{
	char line[64];
	int fd, n, st;
	pid_t kid;

	n = snprintf(line, sizeof(line), "monotonic %lld 0\n", (long long)ahead_s);
	if (unshare(CLONE_NEWTIME))
		_exit(126);
	fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		_exit(126);
	close(fd);
	kid = fork();
	if (kid < 0)
		_exit(126);
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		return;
	}
	/* the pipes are the service's: their ends close when it exits */
	close(0);
	close(1);
	while (waitpid(kid, &st, 0) < 0) {
		if (errno != EINTR)
			_exit(126);
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

int svc_start_opts(struct svc *s, const char *binary, const struct svc_opts *o,
		   const char *const *args)
{
	int in[2], out[2];
	char line[256];
	const char *argv[32];
	char *const *envp;
	int n = 0, err;

	memset(s, 0, sizeof(*s));
	/* a service that died must not take the test with it through SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	argv[n++] = binary;
	argv[n++] = "--control";
	for (; args && *args && n < 30; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	envp = service_env(o);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	s->pid = fork_as(o->pid);
	if (s->pid < 0) {
		err = -errno;
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return err;
	}
	if (s->pid == 0) {
		/* nothing that allocates or locks: the environment was made before */
		hb_child_signals();
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (o->no_aslr)
			personality(ADDR_NO_RANDOMIZE);
		if (o->time_ahead_s > 0)
			enter_time_namespace(o->time_ahead_s);
		execve(argv[0], (char *const *)argv, envp);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	s->in_fd = in[1];
	s->out_fd = out[0];
	err = svc_line(s, line, sizeof(line), 10000);
	if (err)
		return err;
	if (strncmp(line, "ready ", 6) != 0)
		return -EPROTO;
	s->served = (pid_t)strtol(line + 6, NULL, 10);
	if (s->served <= 0)
		s->served = s->pid;
	return 0;
}

int svc_start_env(struct svc *s, const char *binary, const char *malloc_conf,
		  const char *const *env, const char *const *args)
{
	return svc_start_opts(s, binary,
			      &(struct svc_opts){ .malloc_conf = malloc_conf, .env = env }, args);
}

int svc_read(struct svc *s, char *line, size_t len, int timeout_ms)
{
	return svc_line(s, line, len, timeout_ms);
}

int svc_cmd(struct svc *s, const char *cmd, char *reply, size_t len, int timeout_ms)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s\n", cmd);

	if (write(s->in_fd, buf, n) != n)
		return -EPIPE;
	return svc_line(s, reply, len, timeout_ms);
}

/* The allocations the service has made so far (its "stats" command). */
uint64_t svc_allocs(struct svc *s)
{
	unsigned long long allocs = 0, frees = 0;
	char reply[128];

	cr_assert_eq(svc_cmd(s, "stats", reply, sizeof(reply), 10000), 0,
		     "the service stopped answering");
	cr_assert_eq(sscanf(reply, "stats %llu %llu", &allocs, &frees), 2, "%s", reply);
	return allocs;
}

void svc_allocs_more(struct svc *s, uint64_t more)
{
	uint64_t allocs = svc_allocs(s);

	for (int waited = 0; waited < 60000 && svc_allocs(s) < allocs + more; waited += 50)
		hb_sleep_ms(50);
	cr_assert_geq(svc_allocs(s), allocs + more, "the service stopped allocating");
}

int svc_stop(struct svc *s)
{
	char reply[64];
	int st;

	if (s->pid <= 0)
		return -1;
	if (svc_cmd(s, "quit", reply, sizeof(reply), 5000) != 0)
		kill(s->pid, SIGKILL);
	close(s->in_fd);
	close(s->out_fd);
	st = hb_wait(s->pid, 10000);
	s->pid = 0;
	return st;
}

pid_t hb_spawn(const char *const *argv, const char *errpath)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(errpath ? errpath : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		hb_child_signals();
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int hb_wait(pid_t pid, int timeout_ms)
{
	int64_t deadline = mono_ms() + hb_guard_ms(timeout_ms);
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0)
			return -1;
		if (mono_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		hb_sleep_ms(10);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

ssize_t hb_read_file(const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return -errno;
	for (;;) {
		size_t n;

		if (len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	buf[len] = '\0';
	*out = buf;
	return len;
}

int hb_run(const char *const *args, char *errbuf, size_t errlen, int timeout_ms)
{
	const char *argv[64];
	char errpath[PATH_MAX + 32], *text = NULL;
	int n = 0, rc;
	pid_t pid;

	argv[n++] = hb_path("heapbpf");
	for (; args && *args && n < 62; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.stderr", hb_tmpdir());
	pid = hb_spawn(argv, errpath);
	if (pid < 0)
		return -1;
	rc = hb_wait(pid, timeout_ms);
	if (errbuf) {
		errbuf[0] = '\0';
		if (hb_read_file(errpath, &text) >= 0) {
			snprintf(errbuf, errlen, "%s", text);
			free(text);
		}
	}
	return rc;
}

int hb_sym_addr(pid_t pid, const char *path, const char *sym, uint64_t *addr)
{
	char real[PATH_MAX], cmd[PATH_MAX + 64], line[1024], mpath[64];
	uint64_t vaddr = 0, base = 0;
	bool found = false;
	FILE *f;

	if (!realpath(path, real))
		return -errno;
	snprintf(cmd, sizeof(cmd), "nm -a --defined-only '%s' 2>/dev/null", real);
	f = popen(cmd, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char name[512], type;
		uint64_t v;

		if (sscanf(line, "%" SCNx64 " %c %511s", &v, &type, name) == 3 &&
		    strcmp(name, sym) == 0) {
			vaddr = v;
			found = true;
		}
	}
	pclose(f);
	if (!found)
		return -ENOENT;
	/* a PIE or shared object: its first PT_LOAD (vaddr 0) is mapped at file offset 0 */
	snprintf(mpath, sizeof(mpath), "/proc/%d/maps", pid);
	f = fopen(mpath, "re");
	if (!f)
		return -errno;
	found = false;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off;
		char perms[8], p[PATH_MAX];

		p[0] = '\0';
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %4095s", &start,
			   &end, perms, &off, p) >= 4 &&
		    off == 0 && strcmp(p, real) == 0) {
			base = start;
			found = true;
			break;
		}
	}
	fclose(f);
	if (!found)
		return -ESRCH;
	*addr = base + vaddr;
	return 0;
}

int hb_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { .iov_base = buf, .iov_len = len };
	struct iovec r = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -errno;
}

bool hb_wait_byte(pid_t pid, uint64_t addr, uint8_t want, int timeout_ms, pid_t alive)
{
	int64_t deadline = mono_ms() + hb_guard_ms(timeout_ms);
	uint8_t b;

	while (mono_ms() < deadline) {
		if (hb_peek(pid, addr, &b, 1) == 0 && b == want)
			return true;
		if (alive > 0) {
			siginfo_t si = {};

			/* WNOWAIT: leave the exit status for hb_wait */
			if (waitid(P_PID, alive, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
			    si.si_pid)
				return false;
		}
		hb_sleep_ms(10);
	}
	return false;
}

uint64_t hb_wait_count(pid_t pid, uint64_t addr, uint64_t want, int timeout_ms)
{
	int64_t deadline = mono_ms() + timeout_ms;
	uint64_t v = 0;

	while (hb_peek(pid, addr, &v, sizeof(v)) == 0 && v < want && mono_ms() < deadline)
		hb_sleep_ms(20);
	return v;
}

bool hb_wait_file(const char *path, int timeout_ms)
{
	char dir[PATH_MAX], buf[4096];
	int64_t deadline = mono_ms() + timeout_ms;
	int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	bool there;

	snprintf(dir, sizeof(dir), "%s", path);
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	/* watched first, then looked for: a file made in between is not missed */
	if (fd < 0 || inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO) < 0) {
		if (fd >= 0)
			close(fd);
		return access(path, F_OK) == 0;
	}
	while (!(there = access(path, F_OK) == 0) && mono_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, (int)(deadline - mono_ms())) > 0)
			while (read(fd, buf, sizeof(buf)) > 0)
				;
	}
	close(fd);
	return there;
}

bool hb_wait_switched(pid_t pid, uint64_t addr, uint8_t want, pid_t by)
{
	uint8_t b;

	cr_assert_gt(by, 0, "hb_wait_switched needs the process that switches the byte");
	for (;;) {
		siginfo_t si = {};
		int rc = hb_peek(pid, addr, &b, 1);

		if (rc == 0 && b == want)
			return true;
		/* the target gone: nothing will switch it */
		if (rc == -ESRCH)
			return false;
		/* WNOWAIT: leave the exit status for hb_wait */
		if (waitid(P_PID, by, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
			return hb_peek(pid, addr, &b, 1) == 0 && b == want;
		hb_sleep_ms(10);
	}
}

const char *hb_tmp(const char *name)
{
	static char bufs[64][PATH_MAX];
	static int next;

	int len;

	cr_assert_lt(next, 64, "more than 64 temporary paths in one test");
	len = snprintf(bufs[next], PATH_MAX, "%s/%s", hb_tmpdir(), name);
	cr_assert_lt(len, PATH_MAX, "%s/%s is too long", hb_tmpdir(), name);
	return bufs[next++];
}

const char *hb_fixture(const char *rel)
{
	static char bufs[8][PATH_MAX];
	static unsigned int next;
	const char *dir = getenv("HEAPBPF_FIXTURES");
	char *b = bufs[next++ % 8];

	snprintf(b, PATH_MAX, "%s/%s", dir && dir[0] ? dir : hb_path("fixtures"), rel);
	return b;
}

void hb_fixture_check(const char *path)
{
	struct stat st;

	cr_assert_eq(
		stat(path, &st), 0,
		"fixture %s is missing: make test builds it (scripts/build-jemalloc-fixtures.sh)",
		path);
}

const char *hb_fixture_built(const char *rel)
{
	const char *path = hb_fixture(rel);

	hb_fixture_check(path);
	return path;
}

const char *hb_own_example(const char *name)
{
	char rel[PATH_MAX];
	const char *copy = hb_tmp(name);

	snprintf(rel, sizeof(rel), "examples/%s", name);
	hb_sh("cp '%s' '%s'", hb_path(rel), copy);
	return copy;
}

int hb_count_files(const char *dir, const char *suffix, char names[][256], int max)
{
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name), sl = strlen(suffix);

		if (de->d_type != DT_REG || l < sl || strcmp(de->d_name + l - sl, suffix) != 0)
			continue;
		if (names && n < max)
			snprintf(names[n], 256, "%s", de->d_name);
		n++;
	}
	closedir(d);
	if (names)
		qsort(names, n < max ? n : max, 256, (int (*)(const void *, const void *))strcmp);
	return n;
}

void hb_start_idle_service(struct svc *s, const char *threads, char *pid, size_t len)
{
	const char *args[] = { "--threads", threads, NULL };

	cr_assert_eq(svc_start(s, hb_path("examples/alloc-service-static"),
			       "prof:true,prof_active:false", args),
		     0);
	if (pid)
		snprintf(pid, len, "%d", s->pid);
}

void hb_cgroup_drain(char *dir)
{
	char procs[PATH_MAX + 1024], line[32];

	if (!dir[0])
		return;
	/* empty once its processes are gone; an exiting one lingers a moment */
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	for (int i = 0; i < 100 && rmdir(dir) && errno == EBUSY; i++) {
		FILE *f = fopen(procs, "re");

		while (f && fgets(line, sizeof(line), f))
			kill(atoi(line), SIGKILL);
		if (f)
			fclose(f);
		hb_sleep_ms(20);
	}
	dir[0] = '\0';
}

void *hb_xcalloc(size_t n, size_t size)
{
	void *r = calloc(n ? n : 1, size);

	cr_assert_not_null(r);
	return r;
}

char *hb_xstrdup(const char *s)
{
	char *r = s ? strdup(s) : NULL;

	cr_assert(!s || r);
	return r;
}

void hb_sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	cr_assert_eq(rc, 0, "command failed (%d): %s", rc, cmd);
}

/* pid has exited or is a zombie. */
static bool gone(pid_t pid)
{
	char p[64], *stat = NULL, *close_paren;
	bool z;

	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	if (hb_read_file(p, &stat) <= 0 || !stat) {
		free(stat);
		return true;
	}
	close_paren = strrchr(stat, ')');
	z = !close_paren || close_paren[1] == '\0' || close_paren[2] == 'Z' ||
	    close_paren[2] == 'X';
	free(stat);
	return z;
}

bool hb_wait_text(const char *path, const char *text, int timeout_ms, pid_t pid)
{
	for (int waited = 0;; waited += 50) {
		char *got = NULL;
		bool found = hb_read_file(path, &got) > 0 && got && strstr(got, text);

		free(got);
		if (found)
			return true;
		if (waited >= hb_guard_ms(timeout_ms))
			return false;
		/* exited (not reaped: the caller waits for it), after a last look */
		if (pid > 0 && gone(pid))
			return hb_wait_text(path, text, 0, 0);
		hb_sleep_ms(50);
	}
}

void hb_sh_line(char *out, size_t len, const char *cmd)
{
	FILE *p = popen(cmd, "r");

	cr_assert_not_null(p);
	out[0] = '\0';
	if (fgets(out, (int)len, p))
		out[strcspn(out, "\n")] = '\0';
	pclose(p);
}

void hb_redis_cli(int port, const char *args, char *out, size_t len)
{
	char cmd[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d %s 2>&1", port, args);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	out[0] = '\0';
	if (!fgets(out, (int)len, p))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	pclose(p);
}

double hb_bytes_after(const char *text, const char *prefix)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	const char *s = strstr(text, prefix);
	char unit[8];
	double v;

	if (!s || sscanf(s + strlen(prefix), "%lf %7[A-Za-z]", &v, unit) != 2)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++, v *= 1024) {
		if (!strcmp(unit, units[i]))
			return v;
	}
	return -1;
}

const char *hb_jail(const char *binary, const char *lib, const char *libdir)
{
	const char *jail = hb_tmp("jail");

	/* the test's directory: others may pass through it, not list or write it */
	cr_assert_eq(chmod(hb_tmpdir(), 0711), 0);
	hb_sh("mkdir -p '%s/bin' && cp '%s' '%s/bin/svc'", jail, binary, jail);
	/* the loader and every library ldd finds, each at its own path inside */
	hb_sh("for f in $(ldd '%s' | grep -o '/[^ ]*'); do "
	      "mkdir -p \"%s$(dirname $f)\" && cp -L \"$f\" \"%s$f\"; done",
	      binary, jail, jail);
	if (lib)
		hb_sh("mkdir -p '%s%s' && cp '%s' '%s%s/'", jail, libdir, lib, jail, libdir);
	hb_sh("chown -R %d:%d '%s'", HB_NOBODY, HB_NOBODY, jail);
	return jail;
}

pid_t hb_jail_start(const char *jail, const char *malloc_conf, const char *const *args,
		    const char *errpath)
{
	char uid[32], gid[32];
	const char *argv[32] = {
		"/usr/bin/setpriv", uid,  gid,	     "--clear-groups", "/usr/bin/unshare", "-Ur",
		"/usr/sbin/chroot", jail, "/bin/svc"
	};
	size_t n = 9;
	pid_t pid;

	snprintf(uid, sizeof(uid), "--reuid=%d", HB_NOBODY);
	snprintf(gid, sizeof(gid), "--regid=%d", HB_NOBODY);
	for (; args && *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	setenv("MALLOC_CONF", malloc_conf, 1);
	pid = hb_spawn(argv, errpath);
	unsetenv("MALLOC_CONF");
	cr_assert_gt(pid, 0);
	/* one process all along (each step execs the next): its first words are its own */
	cr_assert(hb_wait_text(errpath, "alloc-service: pid", 60000, pid),
		  "the jailed service did not start");
	return pid;
}

void hb_jail_plant(const char *jail, const char *path, const char *target)
{
	char inner[PATH_MAX * 2];
	char cmd[PATH_MAX * 6];

	/* the host's name of the file, as /proc/PID/maps shows it to root, made inside the jail */
	snprintf(inner, sizeof(inner), "%s%s", jail, path);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups /bin/sh -c "
		 "'mkdir -p \"$(dirname %s)\" && ln -s %s %s'",
		 HB_NOBODY, HB_NOBODY, inner, target, inner);
	cr_assert_eq(system(cmd), 0, "as nobody: %s", cmd);
}

void hb_touch(const char *name, size_t size)
{
	char path[PATH_MAX + 256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), name);
	f = fopen(path, "we");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	for (size_t i = 0; i < size; i++)
		fputc('x', f);
	cr_assert_eq(fclose(f), 0);
}

bool hb_tmp_exists(const char *name)
{
	char path[PATH_MAX + 256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), name);
	return lstat(path, &st) == 0;
}

/* The hierarchy systemd keeps: v1 name=systemd where mounted, else the cgroup2 mount. */
void hb_cgroup_root(char *out, size_t len)
{
	char line[1024], mnt[512], type[64], opts[512];
	FILE *f = fopen("/proc/self/mounts", "re");
	bool v2 = false;

	out[0] = '\0';
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %511s %63s %511s", mnt, type, opts) != 3)
			continue;
		if (!strcmp(type, "cgroup") && strstr(opts, "name=systemd")) {
			snprintf(out, len, "%s", mnt);
			break;
		}
		if (!strcmp(type, "cgroup2") && !v2) {
			snprintf(out, len, "%s", mnt);
			v2 = true;
		}
	}
	fclose(f);
	cr_assert(out[0], "no name=systemd or cgroup2 hierarchy is mounted");
}

const char *hb_listing(const char *dir)
{
	static char text[8192];
	char names[64][256];
	int n = hb_count_files(dir, "", names, 64);
	size_t len = 0;

	text[0] = '\0';
	for (int i = 0; i < n && i < 64; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s\n", names[i]);
	return text;
}

const char *hb_file_text(const char *path)
{
	static char copy[65536];
	char *text = NULL;

	copy[0] = '\0';
	if (hb_read_file(path, &text) >= 0)
		snprintf(copy, sizeof(copy), "%s", text);
	free(text);
	return copy;
}

bool hb_file_has(const char *path, const char *needle)
{
	char *text = NULL;
	ssize_t n = hb_read_file(path, &text);
	bool found = n > 0 && text && memmem(text, (size_t)n, needle, strlen(needle)) != NULL;

	free(text);
	return found;
}

int hb_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}
