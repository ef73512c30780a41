// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The symbolizers' shared pool (user/symbols/symbolizer.c): an object parsed
 * once for every symbolizer of one build-id, held while one of them uses it
 * and freed with its last user, so a long-running agent holds only the
 * objects of the services it samples now.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "symbols/symbolizer.h"

/* A function of this test binary, not inlined: its name is looked up. */
__attribute__((noinline)) int sympool_marker(int x)
{
	return x * 3 + 1;
}

/* A return address inside sympool_marker, looked up by s; its name must come back. */
static void lookup_marker(struct symbolizer *s)
{
	struct sym_result r;

	memset(&r, 0, sizeof(r));
	cr_assert_eq(symbolizer__lookup(s, (uint64_t)(uintptr_t)sympool_marker + 2, true, &r), 0);
	cr_assert_geq(r.object, 0);
	cr_assert_gt(r.nlines, 0);
	cr_assert_not_null(r.lines[0].function);
	cr_assert_str_eq(r.lines[0].function, "sympool_marker");
}

/* Two symbolizers of this process sharing p. */
static void two_sharing(struct sym_pool *p, struct symbolizer **a, struct symbolizer **b)
{
	cr_assert_eq(symbolizer__new(getpid(), a), 0);
	cr_assert_eq(symbolizer__new(getpid(), b), 0);
	symbolizer__share(*a, p);
	symbolizer__share(*b, p);
}

Test(sympool, an_object_lives_while_a_symbolizer_holds_it)
{
	struct symbolizer *a, *b;
	struct sym_pool *p;

	cr_assert_eq(symbolizer_pool__new(&p), 0);
	two_sharing(p, &a, &b);
	cr_assert_eq(symbolizer_pool__size(p), 0, "nothing is parsed before a lookup");

	lookup_marker(a);
	cr_assert_eq(symbolizer_pool__size(p), 1);
	lookup_marker(b);
	cr_assert_eq(symbolizer_pool__size(p), 1,
		     "the second symbolizer shares the first one's object");

	symbolizer__release(a);
	cr_assert_eq(symbolizer_pool__size(p), 1, "b still holds it");
	lookup_marker(b);
	symbolizer__release(b);
	cr_assert_eq(symbolizer_pool__size(p), 0, "its last user let it go");

	/* parsed again on the next lookup, and freed with the symbolizer that holds it */
	lookup_marker(a);
	cr_assert_eq(symbolizer_pool__size(p), 1);
	symbolizer__free(b);
	cr_assert_eq(symbolizer_pool__size(p), 1);
	symbolizer__free(a);
	cr_assert_eq(symbolizer_pool__size(p), 0);
	symbolizer_pool__free(p);
}

/* A symbolizer freed without a release lets go of the pool's objects too. */
Test(sympool, freeing_a_symbolizer_lets_go)
{
	struct symbolizer *s;
	struct sym_pool *p;

	cr_assert_eq(symbolizer_pool__new(&p), 0);
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(symbolizer__new(getpid(), &s), 0);
		symbolizer__share(s, p);
		lookup_marker(s);
		cr_assert_eq(symbolizer_pool__size(p), 1, "round %d", round);
		symbolizer__free(s);
		cr_assert_eq(symbolizer_pool__size(p), 0, "round %d", round);
	}
	symbolizer_pool__free(p);
}

/*
 * A pool that keeps idle objects (a session of several targets, whose last
 * profiles come one after the other, each releasing its symbolizer): the
 * next symbolizer finds what the last one let go, parsed once.
 */
Test(sympool, a_pool_that_keeps_idle_objects_parses_once)
{
	struct symbolizer *a, *b;
	struct sym_pool *p;

	cr_assert_eq(symbolizer_pool__new(&p), 0);
	symbolizer_pool__keep_idle(p);
	two_sharing(p, &a, &b);
	lookup_marker(a);
	cr_assert_eq(symbolizer_pool__size(p), 1);
	symbolizer__release(a);
	cr_assert_eq(symbolizer_pool__size(p), 1, "kept, though no symbolizer holds it");
	lookup_marker(b);
	cr_assert_eq(symbolizer_pool__size(p), 1, "b shares the kept object");
	symbolizer__free(b);
	symbolizer__free(a);
	cr_assert_eq(symbolizer_pool__size(p), 1);
	/* freed with the pool (the sanitized build's leak check) */
	symbolizer_pool__free(p);
}
