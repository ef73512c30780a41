/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf's version and its exit codes: what the outside world sees of a run. */
#ifndef __HEAPBPF_VERSION_H
#define __HEAPBPF_VERSION_H

#define HEAPBPF_VERSION "0.1.0"

/* Exit codes, one table for the whole program; only main chooses among them. */
enum exit_code {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	     /* an error: nothing written (several targets: not for every one) */
	EXIT_USAGE = 2,	     /* bad command line */
	EXIT_NO_SAMPLES = 3, /* profile written, but jemalloc sampled nothing */
	EXIT_DROPS = 4,	     /* profile written, but events were lost (ring buffer full) */
	EXIT_NOT_SENT = 5,   /* profile written, not delivered to Pyroscope yet: spooled */
};

/* The exit statuses above, as every command's --help ends */
#define HB_EXIT_STATUS_HELP                                                                        \
	"Exit status: 0 profile written; 1 error; 2 usage; 3 written but no samples;\n"            \
	"4 written but events were dropped (see the summary); 5 written but not yet delivered\n"   \
	"to Pyroscope (kept in the spool for the next run).\n"

#endif /* __HEAPBPF_VERSION_H */
