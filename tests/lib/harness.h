/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Integration-test helpers: run the example service under control, run
 * heapbpf, and look into the target's memory independently of heapbpf's own
 * code (nm for symbols, /proc/PID/maps for the load address).
 */
#ifndef __HEAPBPF_HARNESS_H
#define __HEAPBPF_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The build directory (HEAPBPF_BUILD, default "build"), for binaries. */
const char *hb_build_dir(void);
/* "<build>/<rel>" in a static buffer rotation (4 slots). */
const char *hb_path(const char *rel);

/*
 * Tests that need BPF call this first: they fail loudly when not root,
 * and are skipped only when HEAPBPF_TEST_NO_BPF=1 is set by the person running them.
 */
void hb_require_bpf(void);

/* A fresh temporary directory for one test; removed by hb_tmpdir_cleanup. */
const char *hb_tmpdir(void);
void hb_tmpdir_cleanup(void);

struct svc {
	pid_t pid;
	pid_t served; /* the service's own pid, from its "ready PID" (pid's child: time_ahead_s) */
	int in_fd, out_fd;
	char buf[4096];
	size_t buflen;
};

/*
 * Starts binary with MALLOC_CONF=malloc_conf (NULL: unset) and args, in control
 * mode, and waits for "ready". Returns 0 or negative errno.
 */
int svc_start(struct svc *s, const char *binary, const char *malloc_conf, const char *const *args);
/* The same with extra "NAME=value" environment entries (env may be NULL). */
int svc_start_env(struct svc *s, const char *binary, const char *malloc_conf,
		  const char *const *env, const char *const *args);
/* How svc_start_opts starts a service. */
struct svc_opts {
	const char *malloc_conf; /* MALLOC_CONF (NULL: unset) */
	const char *const *env;	 /* extra "NAME=value" entries, or NULL */
	bool no_aslr;		 /* mapped where a non-PIE build would be, every run alike */
	pid_t pid;		 /* this pid exactly (clone3's set_tid; root), 0: any */
	/*
	 * > 0: in a time namespace of its own, its monotonic clocks this many
	 * seconds ahead (as a restored container is); the service is then the
	 * child of s->pid, which waits for it (as unshare --time --fork does)
	 */
	int64_t time_ahead_s;
};
/* The same, as o says; -EEXIST when o->pid is taken. */
int svc_start_opts(struct svc *s, const char *binary, const struct svc_opts *o,
		   const char *const *args);
/* Sends a command, reads the one-line reply (no newline) within timeout_ms. */
int svc_cmd(struct svc *s, const char *cmd, char *reply, size_t len, int timeout_ms);
/* Reads one more line the service printed unasked (its "ready" after an exec) within timeout_ms. */
int svc_read(struct svc *s, char *line, size_t len, int timeout_ms);
/* The allocations the service has made so far (its "stats" command); asserts it answers. */
uint64_t svc_allocs(struct svc *s);
/*
 * Until s has allocated more times more than now (2000: about 170 MiB at the
 * example's mix, 340 sampling periods, so a run sampling it has objects to
 * write); asserted.
 */
void svc_allocs_more(struct svc *s, uint64_t more);
/* "quit", then waits; kills it if it does not exit. Returns its exit status or -1. */
int svc_stop(struct svc *s);

/* In a child before exec: default dispositions and no blocked signals, whatever the runner's. */
void hb_child_signals(void);
/* Spawns argv with stderr (and stdout) into the file errpath. Returns the pid. */
pid_t hb_spawn(const char *const *argv, const char *errpath);
/*
 * A guard's timeout_ms as the harness's waits take it: times
 * HEAPBPF_TEST_GUARD_FACTOR (1 to 100; default 1). The guards only bound a
 * hang, no test asserts a time: make test-arm64 sets 10 in its guests, whose
 * software emulation on a loaded machine runs a hundred times slower, and
 * scripts/run-tests.sh 3 for the sanitized build.
 */
int hb_guard_ms(int timeout_ms);

/* Waits up to timeout_ms; returns the exit code, 128+signal, or -1 after killing it. */
int hb_wait(pid_t pid, int timeout_ms);
/* Runs heapbpf with args (argv[0] added) synchronously; stderr into errbuf. */
int hb_run(const char *const *args, char *errbuf, size_t errlen, int timeout_ms);

/*
 * Address of symbol sym of the object at path (as mapped in pid) in pid's
 * address space: nm for the symbol, the object's offset-0 mapping for the base.
 * Returns 0 or negative errno.
 */
int hb_sym_addr(pid_t pid, const char *path, const char *sym, uint64_t *addr);
/* Reads len bytes of pid's memory at addr. */
int hb_peek(pid_t pid, uint64_t addr, void *buf, size_t len);
/* Reads len bytes of the file at offset of symbol sym's address (for comparing code bytes). */
int hb_file_bytes_at_sym(const char *path, const char *sym, void *buf, size_t len);

/*
 * The first byte a uprobe writes over the probed function's first
 * instruction: x86-64's int3 (0xcc); arm64's BRK #5 (0xd42000a0, stored
 * little-endian: 0xa0 first), where jemalloc's sampling functions start
 * with stp x29, x30 (0xfd first).
 */
#if defined(__aarch64__)
#define HB_UPROBE_BYTE 0xa0
#else
#define HB_UPROBE_BYTE 0xcc
#endif

/* Polls until pid's byte at addr equals want, or timeout_ms passes; true if it did. */
bool hb_wait_byte(pid_t pid, uint64_t addr, uint8_t want, int timeout_ms, pid_t alive);
/*
 * Polls pid's 8-byte counter at addr (work it has done, counted in its own
 * memory) until it reaches want, pid is gone, or timeout_ms passes (a bound
 * for a failure, never a window the work must fit in): the last value read.
 */
uint64_t hb_wait_count(pid_t pid, uint64_t addr, uint64_t want, int timeout_ms);
/*
 * Waits, on inotify, until path exists or timeout_ms passes (a bound for a
 * failure); true when it does.
 */
bool hb_wait_file(const char *path, int timeout_ms);
/*
 * Until pid's byte at addr is want, or process by (a heapbpf run, > 0) has
 * exited without switching it (false): no window of wall-clock time, the
 * run's own answer (under emulation a start takes what it takes; the
 * suite's timeout still ends a hang).
 */
bool hb_wait_switched(pid_t pid, uint64_t addr, uint8_t want, pid_t by);

/* Reads a whole file (NUL-terminated) into *out; returns its length or negative errno. */
ssize_t hb_read_file(const char *path, char **out);

/* "<test dir>/name" (hb_tmpdir()) in one of 64 buffers, never reused within a test (asserted). */
const char *hb_tmp(const char *name);
/* "$HEAPBPF_FIXTURES/rel" (set by make), else "<build>/fixtures/rel", in a rotation of 8 buffers. */
const char *hb_fixture(const char *rel);
/* Asserts that the fixture at path was built (make test builds them: make fixtures). */
void hb_fixture_check(const char *path);
/* hb_fixture(rel), asserted built. */
const char *hb_fixture_built(const char *rel);
/*
 * A copy of examples/name in the test's directory (hb_tmp(name)): a file of
 * the test's own. A test beside it with uprobes on the whole example file (a
 * session of several targets, the agent) puts its int3 in a private copy of
 * a text page of every process that maps that file.
 */
const char *hb_own_example(const char *name);
/*
 * How many regular files in dir have names ending in suffix (-1: no dir); the
 * first max of their names, sorted, into names unless it is NULL.
 */
int hb_count_files(const char *dir, const char *suffix, char names[][256], int max);
/* A file's text, its first 64 KiB ("" when unreadable), for messages and checks (static). */
const char *hb_file_text(const char *path);
/* Whether the file at path holds the bytes of needle anywhere (false when it cannot be read). */
bool hb_file_has(const char *path, const char *needle);
/* The names of the (at most 64) files in dir, one line each, sorted (static). */
const char *hb_listing(const char *dir);

/*
 * Starts examples/alloc-service-static with --threads threads, prof on and
 * inactive ("prof:true,prof_active:false"); asserts it started. Its pid as a
 * string into pid (len bytes) unless pid is NULL.
 */
void hb_start_idle_service(struct svc *s, const char *threads, char *pid, size_t len);

/*
 * rc of svc_start_opts as a pid freed on the tries-th attempt: true to try
 * again with another freed pid when a fork elsewhere on the machine took
 * this one first (at most HB_FREED_PID_TRIES attempts); otherwise asserts
 * that it started. 5 were taken in a row once beside another make test
 * (pid_max 32768 here, which that run's forks wrap in seconds).
 */
#define HB_FREED_PID_TRIES 20
bool hb_freed_pid_taken(int rc, int tries);

/*
 * Until pid (a process another reaps) has exited, as the kernel says it
 * (its pidfd becomes readable); timeout_ms only guards against a hang.
 * True when it has.
 */
bool hb_wait_gone(pid_t pid, int timeout_ms);
/*
 * Until pid has exited and its parent has reaped it, so that the pid is
 * free (a zombie still holds it: clone3's set_tid would get EEXIST): its
 * pidfd, then the kernel's ESRCH for it; timeout_ms only guards against a
 * hang. True when it is free.
 */
bool hb_wait_reaped(pid_t pid, int timeout_ms);

/* Kills what is left in the cgroup dir (a failed test's processes) until it can be removed; dir becomes "". */
void hb_cgroup_drain(char *dir);

/* calloc (of at least one element) and strdup (NULL stays NULL) that assert they got memory. */
void *hb_xcalloc(size_t n, size_t size);
char *hb_xstrdup(const char *s);

/* Runs the shell command fmt makes; asserts it exits 0. */
void hb_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Waits until the file at path holds text, up to timeout_ms (a guard against
 * a hang, not a measure) or until process pid (if > 0) has exited. True when
 * the text is there.
 */
bool hb_wait_text(const char *path, const char *text, int timeout_ms, pid_t pid);
/* The first line of what the shell command cmd prints, without its newline, into out. */
void hb_sh_line(char *out, size_t len, const char *cmd);
/* redis-cli -h 127.0.0.1 -p port args: the first line of its output (no newline) into out. */
void hb_redis_cli(int port, const char *args, char *out, size_t len);

void hb_sleep_ms(int ms);
/* A TCP port on 127.0.0.1 nothing listens on now (the kernel's choice). */
int hb_free_port(void);

/*
 * heapbpf's byte figures ("64.0 MiB", "512 B": summary_bytes, the page's
 * human_bytes) after prefix in text, in bytes; -1 where there is none.
 */
double hb_bytes_after(const char *text, const char *prefix);

/* The cgroup hierarchy systemd keeps (v1 name=systemd where mounted, else cgroup2) into out. */
void hb_cgroup_root(char *out, size_t len);
/* A file of size bytes ('x's) named name in the test's directory. */
void hb_touch(const char *name, size_t size);
/* Whether the test's directory holds name (a link counts, whatever it leads to). */
bool hb_tmp_exists(const char *name);

/* An unprivileged user's uid and gid: nobody. */
#define HB_NOBODY 65534

/*
 * An unprivileged user's jail, <test dir>/jail, owned by nobody: binary at
 * /bin/svc inside it with the loader and the libraries ldd finds, and lib
 * (may be NULL) copied into the directory libdir inside. Returns its path.
 */
const char *hb_jail(const char *binary, const char *lib, const char *libdir);
/*
 * /bin/svc with args run in the jail by nobody (setpriv, unshare -Ur,
 * chroot), MALLOC_CONF=malloc_conf, its output into errpath; waits for its
 * first line. Returns its pid (one process: each step execs the next).
 */
pid_t hb_jail_start(const char *jail, const char *malloc_conf, const char *const *args,
		    const char *errpath);
/*
 * What the jailed process can plant: inside the jail, at the host's path of
 * one of its files (as root reads it in /proc/PID/maps: jail + path), an
 * absolute link to target, made by nobody.
 */
void hb_jail_plant(const char *jail, const char *path, const char *target);

#endif /* __HEAPBPF_HARNESS_H */
