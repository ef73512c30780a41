// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf against jemalloc's own accounting (tests/lib/oracle.h), on the
 * example linked with Debian's jemalloc 5.3.0: statically, and against a
 * shared libjemalloc built from Debian's PIC archive.
 */
#include <criterion/criterion.h>

#include "harness.h"
#include "oracle.h"

static void oracle(const char *bin, const char *je_object, const char *threads)
{
	hb_oracle_run(&(struct hb_oracle){
		.bin = bin,
		.je_object = je_object,
		.flag_sym = "je_prof_active_state",
		.threads = threads,
	});
}

TestSuite(oracle, .fini = hb_tmpdir_cleanup, .timeout = 120);

Test(oracle, static_single_thread)
{
	oracle(hb_path("examples/alloc-service-static"), hb_path("examples/alloc-service-static"),
	       "1");
}

Test(oracle, static_multi_thread)
{
	oracle(hb_path("examples/alloc-service-static"), hb_path("examples/alloc-service-static"),
	       "4");
}

Test(oracle, shared_single_thread)
{
	oracle(hb_path("examples/alloc-service-shared"), hb_path("jemalloc/libjemalloc.so.2"), "1");
}

Test(oracle, shared_multi_thread)
{
	oracle(hb_path("examples/alloc-service-shared"), hb_path("jemalloc/libjemalloc.so.2"), "4");
}
