/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Pyroscope stand-ins of tests/pyroscope/ (local servers that enforce
 * the service's documented rules; not Pyroscope) as the tests drive them:
 * started in the test's temporary directory, accepted requests logged there
 * one per line.
 */
#ifndef __HEAPBPF_TEST_STANDIN_H
#define __HEAPBPF_TEST_STANDIN_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Starts cmd (NULL-ended: "/usr/bin/python3" and a script, or a wrapper)
 * with --port-file, --log hb_tmpdir()/server.log, --port port (0: any free
 * one), --lifetime 150 and the extra arguments (NULL-ended, or NULL). env
 * holds "PYRO_EXPECT_*=value" expectations; any other PYRO_EXPECT_* is
 * cleared first. Asserts that it listens; returns its pid, its port in *port_out.
 */
pid_t hb_standin_start(const char *const *cmd, int port, const char *const *extra,
		       const char *const *env, int *port_out);
/* SIGTERM, then waits (up to 5 s); *pid becomes 0. */
void hb_standin_stop(pid_t *pid);
/* For a suite's fini: SIGKILL, then waits (up to 5 s), if *pid is one; *pid becomes 0. */
void hb_standin_kill(pid_t *pid);
/* The log's lines so far (one per accepted request): up to max of linelen bytes each. */
int hb_standin_log(char *lines, size_t linelen, int max);
/*
 * heapbpf --pid pid for a second, delivering to the stand-in at
 * scheme://127.0.0.1:port (--spool-dir spool, one retry, a 5 s timeout, -v),
 * plus up to two more options (NULL: none); asserts it exits with want,
 * its stderr in err.
 */
void hb_standin_deliver(const char *scheme, int port, const char *pid, const char *spool,
			const char *extra1, const char *extra2, int want, char *err, size_t errlen);
/*
 * The options every delivery starts with, into args[0..7]: --pid pid -d 1
 * --pyroscope scheme://127.0.0.1:port --spool-dir spool (the URL written into
 * url). Returns 8, the next free slot.
 */
int hb_standin_args(const char **args, char *url, size_t urllen, const char *scheme, int port,
		    const char *pid, const char *spool);
struct svc;
/*
 * heapbpf --pid pid --interval 2 -d 6 delivering to http://127.0.0.1:port
 * (--spool-dir spool, -q), while the service s allocates in the first window
 * and is paused a second into it (counted from when sampling started), so
 * that no lateness short of 3 s leaves allocations in the third; asserts
 * heapbpf exits 0. Three windows reach the stand-in.
 */
void hb_standin_paused_windows(struct svc *s, const char *pid, int port, const char *spool);

#endif /* __HEAPBPF_TEST_STANDIN_H */
