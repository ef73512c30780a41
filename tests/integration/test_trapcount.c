// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One trap per sample, counted, not timed. The example runs with jemalloc's
 * own accounting on (prof_accum:true,prof_unbias:false); heapbpf profiles it
 * with -v, which prints its BPF counters of uprobe hits; the workload pauses
 * (no malloc, no free), heapbpf stops, and the example dumps jemalloc's
 * profile. Exactly one hit on the allocation path per sampled allocation:
 * the BPF hit counter equals jemalloc's own count of samples taken in the
 * window (accumulated since start, as nothing was sampled before heapbpf
 * switched sampling on) and heapbpf's count of samples; and exactly one on
 * the free path per free of a sampled object (jemalloc's accumulated minus
 * current samples: every such free happened while heapbpf was attached).
 */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "jedump.h"

#define ORACLE_CONF "prof:true,prof_active:false,prof_accum:true,prof_unbias:false"

struct hits {
	uint64_t alloc, free, alloc_drops, free_drops, faults, samples;
};

static void parse_hits(const char *text, struct hits *h)
{
	const char *p = strstr(text, "uprobe hits: ");
	const char *s = strstr(text, "heapbpf: ");
	unsigned long long a, f, ad, fd, rf, n = 0;

	cr_assert(p, "heapbpf -v printed no uprobe counters:\n%s", text);
	cr_assert_eq(sscanf(p,
			    "uprobe hits: %llu on the allocation path, %llu on the free path; "
			    "%llu samples and %llu frees dropped; %llu read faults",
			    &a, &f, &ad, &fd, &rf),
		     5, "unexpected counter line: %.200s", p);
	/* "heapbpf: N samples, " */
	for (; s; s = strstr(s + 1, "heapbpf: ")) {
		if (sscanf(s, "heapbpf: %llu samples, ", &n) == 1)
			break;
	}
	cr_assert(s, "heapbpf printed no sample count:\n%s", text);
	*h = (struct hits){ a, f, ad, fd, rf, n };
}

static void trapcount(const char *bin, const char *je_object, const char *threads)
{
	const char *svc_args[] = { "--threads", threads, "--rate", "0", NULL };
	char dump[PATH_MAX], errpath[PATH_MAX], out[PATH_MAX], reply[256], cmd[PATH_MAX + 8];
	uint64_t flag, accum = 0, cur = 0;
	struct jedump *d;
	struct hits h;
	char *text;
	struct svc s;
	pid_t hp;
	int rc;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/heap.pb.gz", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	cr_assert_eq(svc_start(&s, bin, ORACLE_CONF, svc_args), 0, "cannot start %s", bin);
	cr_assert_eq(hb_sym_addr(s.pid, je_object, "je_prof_active_state", &flag), 0);

	char pid[16];
	snprintf(pid, sizeof(pid), "%d", s.pid);
	const char *argv[] = {
		hb_path("heapbpf"), "--pid", pid, "--duration", "0", "--raw", "-v", "-o", out, NULL
	};
	hp = hb_spawn(argv, errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp),
		  "heapbpf did not switch prof_active on (see %s)", errpath);
	hb_sleep_ms(1500);
	cr_assert_eq(svc_cmd(&s, "pause", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "paused");
	kill(hp, SIGINT);
	rc = hb_wait(hp, 30000);
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	snprintf(cmd, sizeof(cmd), "dump %s", dump);
	cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "dumped");
	cr_assert_eq(svc_stop(&s), 0);

	cr_assert_geq(hb_read_file(errpath, &text), 0);
	parse_hits(text, &h);
	free(text);
	cr_assert_eq(jedump_parse_file(dump, &d), 0, "cannot parse jemalloc's dump %s", dump);
	for (size_t i = 0; i < d->nstacks; i++) {
		accum += d->stacks[i].accumobjs;
		cur += d->stacks[i].curobjs;
	}
	jedump__free(d);

	/* a count of nothing proves nothing */
	cr_assert_gt(accum, 500, "only %" PRIu64 " samples: the workload did not run", accum);
	cr_assert_eq(h.alloc_drops + h.free_drops, 0, "events were dropped");
	cr_assert_eq(h.faults, 0, "read faults");
	/* exactly one uprobe hit on the allocation path per sampled allocation */
	cr_assert_eq(h.alloc, accum,
		     "%" PRIu64 " uprobe hits on the allocation path for %" PRIu64
		     " allocations jemalloc sampled",
		     h.alloc, accum);
	cr_assert_eq(h.alloc, h.samples, "%" PRIu64 " hits but heapbpf reports %" PRIu64 " samples",
		     h.alloc, h.samples);
	/* and exactly one on the free path per free of a sampled object (all freed while attached) */
	cr_assert_eq(h.free, accum - cur,
		     "%" PRIu64 " free-path hits for %" PRIu64 " sampled objects freed", h.free,
		     accum - cur);
}

TestSuite(trapcount, .fini = hb_tmpdir_cleanup, .timeout = 120);

Test(trapcount, static_one_hit_per_sample)
{
	trapcount(hb_path("examples/alloc-service-static"),
		  hb_path("examples/alloc-service-static"), "4");
}

Test(trapcount, shared_one_hit_per_sample)
{
	trapcount(hb_path("examples/alloc-service-shared"), hb_path("jemalloc/libjemalloc.so.2"),
		  "2");
}
