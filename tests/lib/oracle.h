/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The oracle: heapbpf against jemalloc's own accounting, for any example
 * binary and jemalloc build. The service runs with sampling compiled in and
 * off, and jemalloc keeping raw accumulated counts; heapbpf profiles it
 * while it works; the workload pauses (no malloc, no free); heapbpf stops;
 * the service calls prof.dump. Every stack's raw sampled count and bytes in
 * heapbpf's profile must equal jemalloc's accumulated counts, and heapbpf's
 * in-use counts must equal jemalloc's current ones.
 */
#ifndef __HEAPBPF_ORACLE_H
#define __HEAPBPF_ORACLE_H

#include <stdint.h>
#include <sys/types.h>

/* The configuration for jemalloc 5.3 (5.2.1 has no prof_unbias and dumps raw counts anyway). */
#define HB_ORACLE_CONF	   "prof:true,prof_active:false,prof_accum:true,prof_unbias:false"
#define HB_ORACLE_CONF_521 "prof:true,prof_active:false,prof_accum:true"

struct hb_oracle {
	const char *bin;       /* the service */
	const char *je_object; /* the object holding jemalloc: bin, or the shared library */
	const char *flag_sym;  /* the prof_active flag's symbol: "je_prof_active_state" */
	const char *conf_env;  /* NULL: "MALLOC_CONF"; "_RJEM_MALLOC_CONF" for _rjem_ builds */
	const char *conf;      /* NULL: HB_ORACLE_CONF */
	const char *threads;   /* worker threads, "1" when NULL */
	const char *layout;    /* --jemalloc-layout, or NULL */
};

/* Runs the comparison; fails the calling Criterion test on any difference. */
void hb_oracle_run(const struct hb_oracle *o);

/*
 * The samples labelled pid in heapbpf's pprof against the jemalloc dump
 * that process wrote, over the stacks that hold the function only (NULL:
 * all); fails the calling test on any difference, returns the samples
 * compared.
 */
int64_t hb_oracle_compare_pid(const char *pprof, pid_t pid, const char *dump, const char *only);
/*
 * The same for a forked child's dump, its addresses read through its
 * parent's mappings (a fork's copy): the child may be gone, its pid reused.
 */
int64_t hb_oracle_compare_child(const char *pprof, pid_t child, pid_t parent, const char *dump,
				const char *only);

/*
 * The same over every sample of the pprof (a profile without pid labels,
 * such as a live-heap snapshot); pid is the process that wrote the dump.
 */
int64_t hb_oracle_compare_all(const char *pprof, pid_t pid, const char *dump, const char *only);

#endif /* __HEAPBPF_ORACLE_H */
