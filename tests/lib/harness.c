// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

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

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line from the service's stdout, within timeout_ms. */
static int svc_line(struct svc *s, char *line, size_t len, int timeout_ms)
{
	int64_t deadline = mono_ms() + timeout_ms;

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

/*
 * The next pid the kernel hands out, anywhere, is want, if it is free and no
 * other fork comes first (the kernel's last pid set just below it). Root.
 */
int hb_next_pid(pid_t want)
{
	FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "we");

	if (!f)
		return -errno;
	fprintf(f, "%d", want - 1);
	return fclose(f) ? -errno : 0;
}

int svc_start_opts(struct svc *s, const char *binary, const struct svc_opts *o,
		   const char *const *args)
{
	int in[2], out[2];
	char line[256];
	const char *argv[32];
	const char *const *env;
	int n = 0, err;

	memset(s, 0, sizeof(*s));
	/* a service that died must not take the test with it through SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	argv[n++] = binary;
	argv[n++] = "--control";
	for (; args && *args && n < 30; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	s->pid = fork();
	if (s->pid < 0)
		return -errno;
	if (s->pid == 0) {
		hb_child_signals();
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (o->malloc_conf)
			setenv("MALLOC_CONF", o->malloc_conf, 1);
		else
			unsetenv("MALLOC_CONF");
		for (env = o->env; env && *env; env++)
			putenv((char *)*env);
		if (o->no_aslr)
			personality(ADDR_NO_RANDOMIZE);
		execv(binary, (char *const *)argv);
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
	return 0;
}

int svc_start_env(struct svc *s, const char *binary, const char *malloc_conf,
		  const char *const *env, const char *const *args)
{
	return svc_start_opts(s, binary,
			      &(struct svc_opts){ .malloc_conf = malloc_conf, .env = env }, args);
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
	int64_t deadline = mono_ms() + timeout_ms;
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
	int64_t deadline = mono_ms() + timeout_ms;
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
