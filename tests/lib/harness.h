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
};
/* The same, as o says. */
int svc_start_opts(struct svc *s, const char *binary, const struct svc_opts *o,
		   const char *const *args);
/* The next pid the kernel hands out is want, unless another fork comes first (root). */
int hb_next_pid(pid_t want);
/* Sends a command, reads the one-line reply (no newline) within timeout_ms. */
int svc_cmd(struct svc *s, const char *cmd, char *reply, size_t len, int timeout_ms);
/* The allocations the service has made so far (its "stats" command); asserts it answers. */
uint64_t svc_allocs(struct svc *s);
/* "quit", then waits; kills it if it does not exit. Returns its exit status or -1. */
int svc_stop(struct svc *s);

/* In a child before exec: default dispositions and no blocked signals, whatever the runner's. */
void hb_child_signals(void);
/* Spawns argv with stderr (and stdout) into the file errpath. Returns the pid. */
pid_t hb_spawn(const char *const *argv, const char *errpath);
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

/* Polls until pid's byte at addr equals want, or timeout_ms passes; true if it did. */
bool hb_wait_byte(pid_t pid, uint64_t addr, uint8_t want, int timeout_ms, pid_t alive);

/* Reads a whole file (NUL-terminated) into *out; returns its length or negative errno. */
ssize_t hb_read_file(const char *path, char **out);

void hb_sleep_ms(int ms);

#endif /* __HEAPBPF_HARNESS_H */
