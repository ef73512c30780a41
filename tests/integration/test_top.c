// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf top against the example service, on a real terminal: tmux runs it
 * in an 80x24 pane, keys go in with send-keys and the screen comes back with
 * capture-pane. Every way out (q, Ctrl-C, the pane killed, the target
 * exiting) must leave prof_active as it was (read from the target's memory,
 * located with nm), no uprobe, and the terminal as it was: the alternate
 * screen left and the line discipline back (stty). With stdout a pipe it
 * prints plain tables.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "profile/pprof.h"

#define IDLE_CONF "prof:true,prof_active:false"

/* The allocation sites of examples/alloc-service.c. */
static const char *const sites[] = { "churn_small",	 "large_buffers", "make_session",
				     "session_add_item", "parse_request", "leak_slowly" };
#define NSITES (sizeof(sites) / sizeof(sites[0]))

struct tt {
	struct svc s;
	uint64_t flag, probe;
	char sock[PATH_MAX], pidfile[PATH_MAX];
	pid_t hp; /* heapbpf, in the pane (not our child) */
};

/* Runs a tmux command on the test's own server; its stdout into out (when not NULL). */
static int tmux(struct tt *t, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int tmux(struct tt *t, char *out, size_t len, const char *fmt, ...)
{
	char args[2048], cmd[2048 + PATH_MAX + 64];
	size_t n = 0;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "tmux -f /dev/null -S '%s' %s", t->sock, args);
	p = popen(cmd, "r");
	cr_assert_not_null(p, "popen: %s", strerror(errno));
	if (out) {
		n = fread(out, 1, len - 1, p);
		out[n] = '\0';
	} else {
		char sink[4096];

		while (fread(sink, 1, sizeof(sink), p) > 0)
			;
	}
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void capture(struct tt *t, char *buf, size_t len)
{
	cr_assert_eq(tmux(t, buf, len, "capture-pane -p -t top"), 0, "capture-pane failed");
}

static bool alternate_on(struct tt *t)
{
	char buf[16];

	cr_assert_eq(tmux(t, buf, sizeof(buf), "display -p -t top '#{alternate_on}'"), 0);
	return buf[0] == '1';
}

static uint8_t peek(struct tt *t, uint64_t addr)
{
	uint8_t b = 0xff;

	cr_assert_eq(hb_peek(t->s.pid, addr, &b, 1), 0);
	return b;
}

static bool gone(pid_t pid, int timeout_ms)
{
	for (int i = 0; i < timeout_ms / 50; i++) {
		if (kill(pid, 0) && errno == ESRCH)
			return true;
		hb_sleep_ms(50);
	}
	return false;
}

/* Polls the screen until it contains want (or every string in want, NULL-ended). */
static bool screen_has(struct tt *t, const char *const *want, char *buf, size_t len, int ms)
{
	for (int i = 0; i < ms / 200; i++) {
		size_t k = 0;

		capture(t, buf, len);
		while (want[k] && strstr(buf, want[k]))
			k++;
		if (!want[k])
			return true;
		hb_sleep_ms(200);
	}
	return false;
}

#define has(t, buf, ms, ...)                                                                       \
	screen_has(t, (const char *const[]){ __VA_ARGS__, NULL }, buf, sizeof(buf), ms)

/* The test's service and tmux server, for the suite's fini to end whatever the test left. */
static struct tt *current;

/* The service, with its flag's and its probe's addresses. */
static void start_svc(struct tt *t)
{
	const char *bin = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "2", NULL };

	hb_require_bpf();
	memset(t, 0, sizeof(*t));
	current = t;
	cr_assert_eq(svc_start(&t->s, bin, IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(t->s.pid, bin, "je_prof_active_state", &t->flag), 0);
	cr_assert_eq(hb_sym_addr(t->s.pid, bin, "je_prof_malloc_sample_object", &t->probe), 0);
}

/* A tmux server with an 80x24 pane running sh, and heapbpf top typed into it. */
static void start_pane(struct tt *t, const char *extra)
{
	char screen[8192], *pid = NULL;

	snprintf(t->sock, sizeof(t->sock), "%s/tmux.sock", hb_tmpdir());
	snprintf(t->pidfile, sizeof(t->pidfile), "%s/heapbpf.pid", hb_tmpdir());
	cr_assert_eq(tmux(t, NULL, 0, "new-session -d -s top -x 80 -y 24 /bin/sh"), 0);
	/* the pane's shell execs heapbpf: its pid is the one the shell wrote */
	cr_assert_eq(tmux(t, NULL, 0,
			  "send-keys -t top \"sh -c 'echo \\$\\$ > %s; exec %s top --pid %d%s'; "
			  "echo top-exit=\\$?\" Enter",
			  t->pidfile, hb_path("heapbpf"), t->s.pid, extra),
		     0);
	for (int i = 0; i < 100 && hb_read_file(t->pidfile, &pid) <= 0; i++)
		hb_sleep_ms(100);
	cr_assert_not_null(pid, "heapbpf did not start in the pane");
	t->hp = atoi(pid);
	free(pid);
	cr_assert_gt(t->hp, 0);
	cr_assert(hb_wait_byte(t->s.pid, t->flag, 1, 20000, 0), "prof_active was not switched on");
	cr_assert(has(t, screen, 20000, "heapbpf top  pid", "churn_small"),
		  "no view with sites: %s", screen);
	cr_assert(alternate_on(t), "the view is not on the alternate screen");
}

static void start_top(struct tt *t, const char *extra)
{
	start_svc(t);
	start_pane(t, extra);
}

/* heapbpf gone, the flag and the code as they were, the shell's screen back after exit 0. */
static void assert_restored(struct tt *t, bool pane_alive)
{
	char screen[8192];

	cr_assert(gone(t->hp, 20000), "heapbpf did not exit");
	cr_assert(hb_wait_byte(t->s.pid, t->flag, 0, 5000, 0), "prof_active not restored");
	cr_assert_neq(peek(t, t->probe), HB_UPROBE_BYTE, "a uprobe is still installed");
	if (!pane_alive)
		return;
	cr_assert(has(t, screen, 10000, "top-exit=0"), "no shell after heapbpf: %s", screen);
	cr_assert_not(alternate_on(t), "the alternate screen was not left");
	/* (the command line typed into the shell says "heapbpf top": look for the view's titles) */
	cr_assert_null(strstr(screen, "GROWTH/s"), "the view is still shown: %s", screen);
	/* the line discipline as the shell had it: canonical, echo, signals */
	cr_assert_eq(tmux(t, NULL, 0, "send-keys -t top 'clear; stty -a' Enter"), 0);
	cr_assert(has(t, screen, 10000, "isig", "icanon", "echo "), "no stty output: %s", screen);
	cr_assert_null(strstr(screen, "-isig"), "%s", screen);
	cr_assert_null(strstr(screen, "-icanon"), "%s", screen);
	cr_assert_null(strstr(screen, "-echo "), "%s", screen);
}

/* heapbpf watch holding the service, in the held tests; their state directory's own */
static pid_t watcher;

static void tt_fini(void)
{
	if (watcher > 0) {
		kill(watcher, SIGKILL);
		hb_wait(watcher, 10000);
		watcher = 0;
	}
	unsetenv("HEAPBPF_STATE_DIR");
	if (current) {
		if (current->sock[0])
			tmux(current, NULL, 0, "kill-server 2>/dev/null");
		if (current->s.pid > 0)
			svc_stop(&current->s);
		current = NULL;
	}
	hb_tmpdir_cleanup();
}

TestSuite(top, .fini = tt_fini, .timeout = 120);

/* Parses "+1.5 MiB", "-512 B", "0 B" into bytes. */
static double bytes_of(const char *s)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	char unit[8] = "";
	double v = 0;

	cr_assert_eq(sscanf(s, "%lf %7s", &v, unit), 2, "not bytes: \"%s\"", s);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(unit, units[i]) == 0)
			return v * (double)(1ULL << (10 * i));
	}
	cr_assert_fail("unit of \"%s\"", s);
	return 0;
}

/*
 * The rows of an 80-column screen: names in order, and the number of column
 * col (0: growth, 1: allocation, 2: in use; 12 columns each). Returns how many.
 */
static size_t rows_of(char *screen, const char **names, double *vals, int col, size_t max)
{
	char *line = strstr(screen, "GROWTH/s"), *end;
	size_t n = 0;

	cr_assert_not_null(line, "no titles: %s", screen);
	line = strchr(line, '\n') + 1;
	for (; *line && *line != '\n' && n < max; line = end + 1) {
		char cell[16];

		end = strchr(line, '\n');
		cr_assert_not_null(end);
		*end = '\0';
		cr_assert_gt(strlen(line), 38, "short row: %s", line);
		memcpy(cell, line + 12 * col, 12);
		cell[12] = '\0';
		vals[n] = bytes_of(cell);
		names[n++] = line + 38;
	}
	return n;
}

/* Paused (the same interval for every sort): the sorted column falls, row by row. */
static void sorted_rows(struct tt *t, char key, const char *title, int col, char *out,
			size_t outlen)
{
	char screen[8192];
	const char *names[32];
	double vals[32];
	size_t n;

	cr_assert_eq(tmux(t, NULL, 0, "send-keys -t top %c", key), 0);
	cr_assert(has(t, screen, 5000, title, "[paused]"), "sort key %c: %s", key, screen);
	n = rows_of(screen, names, vals, col, 32);
	cr_assert_geq(n, 3, "%s", screen);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i)
			cr_assert_geq(vals[i - 1], vals[i], "not sorted by %s: %s", title, screen);
		strncat(out, names[i], outlen - strlen(out) - 2);
		strcat(out, "|");
	}
}

Test(top, sites_sort_keys_and_quit_in_tmux)
{
	struct tt t;
	char screen[8192], by_growth[2048], by_alloc[2048], by_inuse[2048];
	bool seen[NSITES] = { 0 };
	int tries = 0;

	start_top(&t, "");
	/* every site of the example shows within a while (make_session's row comes and goes) */
	for (int i = 0; i < 150; i++) {
		size_t k = 0;

		capture(&t, screen, sizeof(screen));
		for (size_t j = 0; j < NSITES; j++)
			seen[j] |= strstr(screen, sites[j]) != NULL;
		while (k < NSITES && seen[k])
			k++;
		if (k == NSITES)
			break;
		hb_sleep_ms(200);
	}
	for (size_t j = 0; j < NSITES; j++)
		cr_assert(seen[j], "%s never shown; last screen: %s", sites[j], screen);
	cr_assert(strstr(screen, "alloc-service.c:"), "sites without file:line: %s", screen);
	cr_assert(strstr(screen, "q quit"), "%s", screen);
	/* the same interval sorted three ways: each falls in its column, and the orders differ */
	do {
		if (tries)
			cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top p"), 0);
		hb_sleep_ms(1500);
		cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top p"), 0);
		sorted_rows(&t, 'g', "sorted by in-use growth", 0, by_growth, sizeof(by_growth));
		sorted_rows(&t, 'a', "sorted by allocation rate", 1, by_alloc, sizeof(by_alloc));
		sorted_rows(&t, 'u', "sorted by in use", 2, by_inuse, sizeof(by_inuse));
	} while (strcmp(by_growth, by_alloc) == 0 && strcmp(by_alloc, by_inuse) == 0 &&
		 ++tries < 5);
	cr_assert(strcmp(by_growth, by_alloc) || strcmp(by_alloc, by_inuse),
		  "no sort key changed the order: %s", by_alloc);
	/* collapsed to files: one file, the example's */
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top F"), 0);
	cr_assert(has(&t, screen, 5000, "by file", "examples/alloc-service.c"), "%s", screen);
	cr_assert_null(strstr(screen, "churn_small"), "%s", screen);
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top f"), 0);
	cr_assert(has(&t, screen, 5000, "by function", "large_buffers"), "%s", screen);
	cr_assert_null(strstr(screen, "alloc-service.c:"), "%s", screen);
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top q"), 0);
	assert_restored(&t, true);
}

/* With -o, the profile of the whole run is written once the view is gone. */
Test(top, ctrl_c_in_tmux_with_output)
{
	char out[PATH_MAX], extra[PATH_MAX + 8], *buf;
	Perftools__Profiles__Profile *p;
	struct tt t;
	ssize_t len;

	snprintf(out, sizeof(out), "%s/top.pb.gz", hb_tmpdir());
	snprintf(extra, sizeof(extra), " -o %s", out);
	start_top(&t, extra);
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top C-c"), 0);
	assert_restored(&t, true);
	len = hb_read_file(out, &buf);
	cr_assert_gt(len, 0, "no profile written with -o");
	cr_assert_eq(pprof_decode((uint8_t *)buf, len, &p), 0);
	cr_assert_gt(p->n_sample, 0);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
}

/*
 * SIGUSR1 to top (what `kill -USR1 $(pidof heapbpf)` sends every heapbpf):
 * before, the view died with exit 138, the terminal left raw and the flag
 * on. Now it is ignored: the view stays, and q ends it cleanly.
 */
Test(top, sigusr1_in_tmux_is_ignored)
{
	char screen[8192];
	struct tt t;

	start_top(&t, "");
	cr_assert_eq(kill(t.hp, SIGUSR1), 0);
	cr_assert_eq(kill(t.hp, SIGUSR1), 0);
	/* the view goes on: a refresh after the signal (the next interval's rows) */
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top a"), 0);
	cr_assert(has(&t, screen, 20000, "heapbpf top  pid", "churn_small"), "%s", screen);
	cr_assert_eq(kill(t.hp, 0), 0, "top died of SIGUSR1");
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top q"), 0);
	assert_restored(&t, true);
}

Test(top, target_exit_in_tmux)
{
	struct tt t;
	char screen[8192];

	start_top(&t, "");
	cr_assert_eq(svc_stop(&t.s), 0);
	cr_assert(gone(t.hp, 20000), "heapbpf did not end when the target exited");
	cr_assert(has(&t, screen, 10000, "top-exit=0", "exited"), "%s", screen);
	cr_assert_not(alternate_on(&t), "the alternate screen was not left");
	cr_assert_null(strstr(screen, "GROWTH/s"), "%s", screen);
}

Test(top, terminal_closed_in_tmux)
{
	struct tt t;

	start_top(&t, "");
	/* the pane and its terminal go away, as when an ssh connection drops */
	cr_assert_eq(tmux(&t, NULL, 0, "kill-session -t top"), 0);
	assert_restored(&t, false);
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(top, resized_in_tmux)
{
	struct tt t;
	char screen[8192];

	start_top(&t, "");
	cr_assert_eq(tmux(&t, NULL, 0, "resize-window -t top -x 50 -y 12"), 0);
	/* SIGWINCH: redrawn at once, at most 50 columns and 12 lines, the sorted number kept */
	cr_assert(has(&t, screen, 3000, "GROWTH/s", "g/a/u"), "%s", screen);
	for (char *l = screen, *e; *l; l = e + 1) {
		e = strchr(l, '\n');
		if (!e)
			break;
		cr_assert_leq(e - l, 50, "a line wider than 50 columns: %.*s", (int)(e - l), l);
	}
	cr_assert_null(strstr(screen, "IN USE"), "%s", screen);
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top q"), 0);
	assert_restored(&t, true);
}

/* Reads a descriptor to its end. */
static char *read_all(int fd)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	ssize_t n;

	cr_assert_not_null(buf);
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
	}
	buf[len] = '\0';
	return buf;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

/*
 * heapbpf top -d SECONDS --by function on a pipe, run in the temporary
 * directory (where a profile would land by default); its stdout.
 */
static char *top_on_a_pipe(struct tt *t, const char *seconds)
{
	char pid[16], errpath[PATH_MAX], exe[PATH_MAX];
	int fds[2], st;
	char *out;
	pid_t hp;

	snprintf(pid, sizeof(pid), "%d", t->s.pid);
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	/* absolute: the child runs in the temporary directory */
	cr_assert_not_null(realpath(hb_path("heapbpf"), exe));
	cr_assert_eq(pipe(fds), 0);
	hp = fork();
	cr_assert_geq(hp, 0);
	if (hp == 0) {
		const char *argv[] = { exe,	"top",	"--pid",    pid, "-d",
				       seconds, "--by", "function", NULL };
		FILE *err = fopen(errpath, "w");

		hb_child_signals();
		dup2(fds[1], 1);
		if (err)
			dup2(fileno(err), 2);
		close(fds[0]);
		if (chdir(hb_tmpdir()))
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	out = read_all(fds[0]);
	close(fds[0]);
	cr_assert_eq(waitpid(hp, &st, 0), hp);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "heapbpf top exited %d: %s", st, out);
	return out;
}

Test(top, plain_tables_on_a_pipe)
{
	const char *bin = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "2", NULL };
	char cmd[PATH_MAX];
	struct tt t = { 0 };
	size_t tables;
	char *out;

	hb_require_bpf();
	current = &t;
	cr_assert_eq(svc_start(&t.s, bin, IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(t.s.pid, bin, "je_prof_active_state", &t.flag), 0);
	out = top_on_a_pipe(&t, "4.5");
	/*
	 * a table at each second's tick, each whole, nothing for a terminal;
	 * on a loaded machine a late tick is one table fewer (seen: up 1 s,
	 * 3 s, 4 s), so their number is at most four, not exactly four
	 */
	tables = count(out, "sorted by in-use growth, by function\n");
	cr_assert(tables >= 1 && tables <= 4, "%zu tables: %s", tables, out);
	cr_assert_eq(count(out, "GROWTH/s     ALLOC/s    ALLOCS/s      IN USE  FUNCTION\n"), tables,
		     "%s", out);
	cr_assert_null(strchr(out, '\x1b'), "escape sequences in a pipe: %s", out);
	cr_assert(strstr(out, "churn_small\n") && strstr(out, "large_buffers\n"), "%s", out);
	/* no -o, no profile: the directory holds only heapbpf's stderr */
	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -vx heapbpf.err", hb_tmpdir());
	cr_assert_neq(system(cmd), 0, "heapbpf top wrote a file without -o");
	cr_assert_eq(peek(&t, t.flag), 0, "prof_active not restored");
	free(out);
	cr_assert_eq(svc_stop(&t.s), 0);
}

/*
 * A service that sampled from its start and holds 64 MiB from before heapbpf
 * came: top's in use is what it saw since attaching, and says so; the live
 * heap beside it is jemalloc's whole sampled heap, the 64 MiB included.
 */
Test(top, live_heap_beside_what_was_seen_since_attach)
{
	const char *bin = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "1", "--rate", "50", NULL };
	char reply[64], *out, *live, *since;
	struct tt t = { 0 };
	double held, seen;

	hb_require_bpf();
	current = &t;
	cr_assert_eq(svc_start(&t.s, bin, "prof:true,prof_active:true", args), 0);
	cr_assert_eq(svc_cmd(&t.s, "hold 64", reply, sizeof(reply), 60000), 0);
	cr_assert(strncmp(reply, "held ", 5) == 0, "%s", reply);
	out = top_on_a_pipe(&t, "2.5");
	live = strstr(out, "  live heap ");
	since = strstr(out, "since attach: in use ");
	cr_assert(live && since, "%s", out);
	held = bytes_of(live + strlen("  live heap "));
	seen = bytes_of(since + strlen("since attach: in use "));
	/* an estimate from 512 KiB samples of 64 MiB: well above 32 MiB */
	cr_assert_gt(held, 32.0 * 1024 * 1024, "live heap %.0f B: %s", held, out);
	cr_assert_lt(seen, held / 4, "since attach %.0f B, live heap %.0f B: %s", seen, held, out);
	free(out);
	cr_assert_eq(svc_stop(&t.s), 0);
}

/* ---- top of a service another heapbpf holds ---- */

/*
 * The service, and heapbpf watch holding it (its flag on), with a state
 * directory of the test's own that the pane's heapbpf sees too (tmux's
 * server starts with the test's environment). dir: the watch's output.
 */
static void start_held(struct tt *t, const char *dir)
{
	const char *state = hb_tmp("state");
	char pid[16];

	start_svc(t);
	cr_assert_eq(mkdir(state, 0700), 0);
	setenv("HEAPBPF_STATE_DIR", state, 1);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(pid, sizeof(pid), "%d", t->s.pid);
	watcher = hb_spawn((const char *[]){ hb_path("heapbpf"), "watch", "--pid", pid,
					     "--output-dir", dir, NULL },
			   hb_tmp("watch.err"));
	cr_assert_gt(watcher, 0);
	cr_assert(hb_wait_byte(t->s.pid, t->flag, 1, 60000, watcher),
		  "the watch did not switch it on");
}

/* The pane's lines as the program wrote them: those tmux wrapped joined again. */
static void capture_joined(struct tt *t, char *buf, size_t len)
{
	cr_assert_eq(tmux(t, buf, len, "capture-pane -J -p -t top"), 0, "capture-pane failed");
}

/* The top in the pane gone with exit 0, its screen left; the view's screen in screen. */
static void assert_pane_back(struct tt *t, char *screen, size_t len)
{
	cr_assert(gone(t->hp, 20000), "heapbpf top did not exit");
	cr_assert(screen_has(t, (const char *const[]){ "top-exit=0", NULL }, screen, len, 10000),
		  "no exit 0: %s", screen);
	cr_assert_not(alternate_on(t), "the alternate screen was not left");
	cr_assert_null(strstr(screen, "GROWTH/s"), "the view is still shown: %s", screen);
}

/*
 * Polls the screen until the view has been up at least two seconds (its
 * header's "up Ns"; the seconds may skip one under load) with large_buffers
 * among its sites: a second interval the holder flushed, drawn.
 */
static bool second_interval(struct tt *t, char *buf, size_t len)
{
	for (int i = 0; i < 100; i++) {
		const char *up;
		int secs = 0;

		capture(t, buf, len);
		up = strstr(buf, "  up ");
		if (up && sscanf(up, "  up %ds", &secs) == 1 && secs >= 2 &&
		    strstr(buf, "large_buffers"))
			return true;
		hb_sleep_ms(200);
	}
	return false;
}

/*
 * heapbpf top on a service heapbpf watch holds: before, refused ("another
 * heapbpf is already profiling"). Now the view comes from the watch, drawn
 * each second as in a top of its own: the service's sites, sorted by the
 * keys. q ends the view only: the watch goes on holding it with the flag on
 * and ends as it would have, with no profile the view asked for.
 */
Test(top, a_held_service_is_viewed_through_its_holder)
{
	char screen[8192], before[8192], *err = NULL;
	const char *dir = hb_tmp("watch");
	struct tt t;
	int rc;

	start_held(&t, dir);
	snprintf(before, sizeof(before), "%s", hb_listing(dir));
	start_pane(&t, "");
	/* a second interval: the holder flushes its window each second */
	cr_assert(second_interval(&t, screen, sizeof(screen)), "%s", screen);
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top u"), 0);
	cr_assert(has(&t, screen, 5000, "sorted by in use"), "%s", screen);
	cr_assert_eq(tmux(&t, NULL, 0, "send-keys -t top q"), 0);
	assert_pane_back(&t, screen, sizeof(screen));
	capture_joined(&t, screen, sizeof(screen));
	cr_assert(strstr(screen, "which holds it: top's view comes from it"), "%s", screen);
	/* the watch holds it still, flag on, and stops as it would have */
	cr_assert_eq(peek(&t, t.flag), 1, "the view switched the holder's flag off");
	cr_assert_str_eq(hb_listing(dir), before, "the watch's files changed");
	cr_assert_eq(waitpid(watcher, NULL, WNOHANG), 0, "the watch ended with the view");
	kill(watcher, SIGTERM);
	rc = hb_wait(watcher, 60000);
	watcher = 0;
	cr_assert_geq(hb_read_file(hb_tmp("watch.err"), &err), 0);
	cr_assert(rc == 0 || rc == 3, "the watch ended with %d: %s", rc, err);
	cr_assert_null(strstr(err, "demand"), "the view fired a trigger of the watch's: %s", err);
	free(err);
	cr_assert(hb_wait_byte(t.s.pid, t.flag, 0, 5000, 0), "prof_active not restored");
	cr_assert_eq(svc_stop(&t.s), 0);
}

/*
 * The held service exits while viewed: the holder ends the window, and the
 * view ends as a top of its own would, saying so, with the profile of the
 * whole view written (-o) from what the holder sent.
 */
Test(top, a_held_service_that_exits_ends_the_view)
{
	char screen[8192], extra[PATH_MAX + 8], said[64], *buf = NULL;
	const char *out = hb_tmp("top.pb.gz");
	pid_t pid;
	Perftools__Profiles__Profile *p;
	struct tt t;
	ssize_t len;

	start_held(&t, hb_tmp("watch"));
	pid = t.s.pid;
	snprintf(extra, sizeof(extra), " -o %s", out);
	start_pane(&t, extra);
	cr_assert(second_interval(&t, screen, sizeof(screen)), "%s", screen);
	cr_assert_eq(svc_stop(&t.s), 0);
	assert_pane_back(&t, screen, sizeof(screen));
	capture_joined(&t, screen, sizeof(screen));
	snprintf(said, sizeof(said), "heapbpf: pid %d exited", pid);
	cr_assert(strstr(screen, said), "%s", screen);
	len = hb_read_file(out, &buf);
	cr_assert_gt(len, 0, "no profile written with -o: %s", screen);
	cr_assert_eq(pprof_decode((uint8_t *)buf, len, &p), 0);
	cr_assert_gt(p->n_sample, 0);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
}
