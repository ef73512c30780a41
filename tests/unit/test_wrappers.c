// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sites named past allocator wrappers (user/profile/wrappers.c): the
 * built-in list, --wrapper patterns, the rule of a function that calls only
 * the allocator, stacks of nothing but wrappers, and what the summary, top,
 * the flame graph and the folded output make of it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/flamegraph.h"
#include "profile/folded.h"
#include "profile/summary.h"
#include "run/top.h"
#include "profile/wrappers.h"
#include "harness.h"

#define MAXF 12

/*
 * A stack of function names, leaf first (jemalloc's frames already
 * trimmed), and its in-use bytes. "disp=raw" names a location whose
 * demangled name is disp and raw (system) name raw.
 */
struct stk {
	const char *f[MAXF];
	int64_t inuse;
};

/* One location per distinct name, one line each; the samples' values: inuse, alloc twice it. */
static struct hb_profile *make(const struct stk *st, size_t n)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));

	p->locations = hb_xcalloc(n * MAXF, sizeof(*p->locations));
	p->samples = hb_xcalloc(n, sizeof(*p->samples));
	for (size_t i = 0; i < n; i++) {
		struct hb_sample *s = &p->samples[p->nsamples++];

		s->locs = hb_xcalloc(MAXF, sizeof(*s->locs));
		for (uint32_t j = 0; j < MAXF && st[i].f[j]; j++) {
			const char *name = st[i].f[j];
			size_t k;

			for (k = 0; k < p->nlocations; k++) {
				const struct hb_line *ln = &p->locations[k].lines[0];
				char both[256];

				snprintf(both, sizeof(both), "%s%s%s", ln->function,
					 ln->system_name != ln->function ? "=" : "",
					 ln->system_name != ln->function ? ln->system_name : "");
				if (strcmp(both, name) == 0)
					break;
			}
			if (k == p->nlocations) {
				struct hb_location *l = &p->locations[p->nlocations++];
				const char *eq = strchr(name, '=');

				l->address = 0x1000 * (k + 1);
				l->nlines = 1;
				l->lines = hb_xcalloc(1, sizeof(*l->lines));
				l->lines[0].function = eq ? strndup(name, eq - name)
							  : hb_xstrdup(name);
				l->lines[0].system_name = eq ? hb_xstrdup(eq + 1)
							     : l->lines[0].function;
				l->lines[0].file = hb_xstrdup("/src/x.c");
				l->lines[0].line = (int64_t)k + 1;
			}
			s->locs[s->nlocs++] = (uint32_t)k;
		}
		s->v[HB_INUSE_SPACE] = st[i].inuse;
		s->v[HB_INUSE_OBJECTS] = 1;
		s->v[HB_ALLOC_SPACE] = 2 * st[i].inuse;
		s->v[HB_ALLOC_OBJECTS] = 2;
	}
	return p;
}

static const char *site(const struct hb_profile *p, size_t i)
{
	return wrappers_site_name(p, &p->samples[i]);
}

static bool listed(const struct hb_profile *p, const char *name)
{
	for (size_t i = 0; i < p->nwrappers; i++) {
		if (strcmp(p->wrappers[i], name) == 0)
			return true;
	}
	return false;
}

TestSuite(wrappers);

Test(wrappers, builtin_list)
{
	static const char *const yes[] = {
		"zmalloc",
		"zmalloc_usable",
		"zcalloc",
		"zrealloc_usable",
		"ztrymalloc_usable_internal",
		"sdsnewlen",
		"_sdsnewlen",
		"xmalloc",
		"xcalloc",
		"g_malloc",
		"g_malloc0_n",
		"g_slice_alloc0",
		"ngx_alloc",
		"ngx_palloc",
		"ngx_pcalloc",
		"CRYPTO_malloc",
		"_Znwm",
		"_Znam",
		"_ZnwmRKSt9nothrow_t",
		"operator new(unsigned long)",
		"operator new[](unsigned long)",
		"operator new(unsigned long, std::align_val_t)",
		"std::__new_allocator<char>::allocate(unsigned long, void const*)",
		"__rust_alloc",
		"__rust_alloc_zeroed",
		"__rust_realloc",
		"__rdl_alloc",
		"alloc::alloc::alloc",
		"alloc::alloc::exchange_malloc",
		"alloc::alloc::Global::alloc_impl",
		"<alloc::alloc::Global as core::alloc::Allocator>::allocate",
		"alloc::raw_vec::RawVec<T,A>::allocate_in",
		"alloc::raw_vec::finish_grow",
		"<alloc::raw_vec::RawVec<u8>>::grow_one",
		"<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::alloc",
	};
	static const char *const no[] = {
		"createStringObject",
		"dictAddRaw",
		"quicklistCreate",
		"main",
		"zmalloc_helper_x",
		"my_xmalloc",
		"xmallocx",
		"operator delete(void*)",
		"sdscatlen",
		"alloc_buffer",
		"myapp::alloc::thing",
		"ngx_http_init",
		"",
	};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect(wrappers_builtin(yes[i]), "%s should be a built-in wrapper", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect(!wrappers_builtin(no[i]), "%s should not be a built-in wrapper", no[i]);
	cr_expect(!wrappers_builtin(NULL));
}

Test(wrappers, patterns_exact_or_glob)
{
	cr_expect(wrappers_match("pool_get", "pool_get"));
	cr_expect(!wrappers_match("pool_get", "pool_get2"));
	cr_expect(!wrappers_match("pool", "pool_get"), "a name is not a prefix");
	cr_expect(wrappers_match("app_*_alloc", "app_buf_alloc"));
	cr_expect(!wrappers_match("app_*_alloc", "app_buf_alloc_n"));
	cr_expect(wrappers_match("my?alloc", "my_alloc"));
	cr_expect(wrappers_match("Arena::*", "Arena::Allocate(unsigned long)"));
	/* an exact name with brackets, which as a glob would be a character class */
	cr_expect(wrappers_match("operator new[](unsigned long)", "operator new[](unsigned long)"));
	cr_expect(!wrappers_match("x", NULL));
}

/* Redis: zmalloc and friends are built in; the sites are their callers. */
Test(wrappers, redis_sites_named_past_zmalloc)
{
	static const struct stk st[] = {
		{ { "zmalloc", "createStringObject", "setCommand", "call" }, 4000 },
		{ { "zmalloc_usable", "_sdsnewlen", "sdsnewlen", "createStringObject",
		    "setCommand" },
		  3000 },
		{ { "zmalloc", "dictAddRaw", "dbAdd", "setCommand" }, 2000 },
		{ { "zmalloc", "quicklistCreate", "createQuicklistObject", "pushGenericCommand" },
		  1000 },
	};
	struct hb_profile *p = make(st, 4);
	struct hb_site top[5];
	size_t n;

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_expect_str_eq(site(p, 0), "createStringObject");
	cr_expect_eq(p->samples[0].site, 1);
	cr_expect_str_eq(site(p, 1), "createStringObject");
	cr_expect_eq(p->samples[1].site, 3);
	cr_expect_str_eq(site(p, 2), "dictAddRaw");
	cr_expect_str_eq(site(p, 3), "quicklistCreate");
	/* every frame kept */
	cr_expect_eq(p->samples[1].nlocs, 5);
	/* the wrappers named past, most in use first */
	cr_assert_eq(p->nwrappers, 4);
	cr_expect_str_eq(p->wrappers[0], "zmalloc");
	cr_expect(listed(p, "zmalloc_usable") && listed(p, "_sdsnewlen") && listed(p, "sdsnewlen"));
	n = summary_top_sites(p, top, 5);
	cr_assert_eq(n, 3);
	cr_expect_str_eq(top[0].function, "createStringObject");
	cr_expect_eq(top[0].v[HB_INUSE_SPACE], 7000);
	cr_expect_str_eq(top[1].function, "dictAddRaw");
	cr_expect_str_eq(top[2].function, "quicklistCreate");
	hb_profile__free(p);
}

/* C++ and Rust: the raw name or the demangled one. */
Test(wrappers, cxx_and_rust_raw_or_demangled)
{
	static const struct stk st[] = {
		{ { "_Znwm", "Cache::insert", "main" }, 100 },
		{ { "operator new[](unsigned long)=_Znam", "Buffer::Buffer", "main" }, 90 },
		{ { "__rust_alloc", "alloc::raw_vec::finish_grow",
		    "<alloc::raw_vec::RawVec<u8>>::grow_one", "myapp::parse", "main" },
		  80 },
		{ { "weird=_ZN5alloc5alloc5alloc17h0123456789abcdefE", "myapp::load", "main" },
		  70 },
		/* GCC's clones and symbol versions of a C wrapper */
		{ { "_sdsnewlen.constprop.0", "dbAdd.lto_priv.0", "main" }, 60 },
		{ { "zmalloc.part.0", "xmalloc@@APP_1.0", "lpNew.isra.0", "main" }, 50 },
	};
	struct hb_profile *p = make(st, 6);

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_expect_str_eq(site(p, 0), "Cache::insert");
	cr_expect_str_eq(site(p, 1), "Buffer::Buffer");
	cr_expect_str_eq(site(p, 2), "myapp::parse");
	/* a legacy Rust name is matched by its demangled form, not its raw one */
	cr_expect_str_eq(site(p, 3), "weird");
	cr_expect_str_eq(site(p, 4), "dbAdd.lto_priv.0");
	cr_expect_str_eq(site(p, 5), "lpNew.isra.0");
	hb_profile__free(p);
}

/*
 * Rule 2: a function that, in every stack it is in, calls only the
 * allocator, and is called from two functions or more.
 */
Test(wrappers, only_callee_is_the_allocator)
{
	static const struct stk st[] = {
		/* my_alloc: leaf only, two callers: a wrapper */
		{ { "my_alloc", "parse_header", "main" }, 500 },
		{ { "my_alloc", "parse_body", "main" }, 400 },
		/* solo_alloc: leaf only, but one caller: a site of its own */
		{ { "solo_alloc", "worker", "main" }, 300 },
		{ { "solo_alloc", "worker", "main" }, 1 },
		/* both: leaf here, calls helper (a site of its own) there: not a wrapper */
		{ { "both", "a1", "main" }, 200 },
		{ { "both", "a2", "main" }, 200 },
		{ { "helper", "both", "a3", "main" }, 200 },
		/* an unsymbolized leaf is never a wrapper by the samples */
		{ { "lib.so+0x1234", "c1", "main" }, 100 },
		{ { "lib.so+0x1234", "c2", "main" }, 100 },
		/* recursion: rec appears twice in a stack */
		{ { "rec", "rec", "d1", "main" }, 50 },
		{ { "rec", "d2", "main" }, 50 },
	};
	struct hb_profile *p = make(st, sizeof(st) / sizeof(st[0]));

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_expect_str_eq(site(p, 0), "parse_header");
	cr_expect_str_eq(site(p, 1), "parse_body");
	cr_expect_str_eq(site(p, 2), "solo_alloc");
	cr_expect_str_eq(site(p, 4), "both");
	cr_expect_str_eq(site(p, 6), "helper");
	cr_expect_str_eq(site(p, 7), "lib.so+0x1234");
	cr_expect_str_eq(site(p, 9), "rec");
	cr_expect_str_eq(site(p, 10), "rec");
	cr_expect(listed(p, "my_alloc"));
	cr_expect(!listed(p, "solo_alloc") && !listed(p, "both") && !listed(p, "rec"));
	hb_profile__free(p);
}

/* A function whose only callee is a wrapper found from the samples is one too. */
Test(wrappers, only_callee_rule_until_nothing_changes)
{
	static const struct stk st[] = {
		{ { "my_alloc", "str_new", "f1", "main" }, 10 },
		{ { "my_alloc", "str_new", "f2", "main" }, 10 },
		{ { "my_alloc", "vec_new", "f3", "main" }, 10 },
		{ { "zmalloc", "obj_new", "g1" }, 10 },
		{ { "zmalloc", "obj_new", "g2" }, 10 },
	};
	struct hb_profile *p = make(st, 5);

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	/* my_alloc: callers str_new and vec_new; then str_new: callers f1 and f2 */
	cr_expect_str_eq(site(p, 0), "f1");
	cr_expect_str_eq(site(p, 1), "f2");
	/* vec_new has one caller: a site */
	cr_expect_str_eq(site(p, 2), "vec_new");
	/* above a built-in wrapper, obj_new with two callers */
	cr_expect_str_eq(site(p, 3), "g1");
	cr_expect(listed(p, "my_alloc") && listed(p, "str_new") && listed(p, "obj_new"));
	hb_profile__free(p);
}

/* --wrapper: exact names and globs, on the display or the raw name. */
Test(wrappers, user_patterns)
{
	static const struct stk st[] = {
		{ { "app_buf_alloc", "handler", "main" }, 10 },
		{ { "pool_get", "other", "main" }, 10 },
		{ { "Arena::Allocate(unsigned long)=_ZN5Arena8AllocateEm", "Db::put", "main" },
		  10 },
	};
	static const char *const pats[] = { "app_*_alloc", "pool_get", "_ZN5Arena*" };
	struct hb_profile *p = make(st, 3);

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_expect_str_eq(site(p, 0), "app_buf_alloc",
			 "one caller each: no wrapper without --wrapper");
	cr_expect_eq(p->nwrappers, 0);
	cr_assert_eq(wrappers_apply(p, pats, 3), 0);
	cr_expect_str_eq(site(p, 0), "handler");
	cr_expect_str_eq(site(p, 1), "other");
	cr_expect_str_eq(site(p, 2), "Db::put");
	cr_expect_eq(p->nwrappers, 3);
	hb_profile__free(p);
}

/* A stack of nothing but wrappers: its outermost frame, nearest to whoever called them. */
Test(wrappers, all_wrappers_fall_back_to_the_outermost)
{
	static const struct stk st[] = {
		{ { "zmalloc", "xmalloc", "g_malloc" }, 10 },
		{ { "zmalloc" }, 10 },
		{ { "zmalloc", "createStringObject" }, 10 },
		{ { NULL }, 10 },
	};
	struct hb_profile *p = make(st, 4);

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_expect_eq(p->samples[0].site, 2);
	cr_expect_str_eq(site(p, 0), "g_malloc");
	cr_expect_eq(p->samples[1].site, 0);
	cr_expect_str_eq(site(p, 1), "zmalloc");
	cr_expect_str_eq(site(p, 2), "createStringObject");
	cr_expect_eq(p->samples[3].site, 0);
	cr_expect_str_eq(site(p, 3), "?");
	cr_expect_eq(hb_profile_check_samples(p), 0);
	/* named past: zmalloc and xmalloc, not the frames that name sites */
	cr_expect(listed(p, "zmalloc") && listed(p, "xmalloc") && !listed(p, "g_malloc"));
	hb_profile__free(p);
}

static char *capture(void (*fn)(FILE *, struct hb_profile *), struct hb_profile *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	fn(f, p);
	fclose(f);
	return buf;
}

static void print_summary(FILE *f, struct hb_profile *p)
{
	struct collector_stats st = { 0 };
	struct heapbpf_counters bc = { 0 };

	summary_print(f, p, &st, &bc, NULL, "");
}

static void print_folded(FILE *f, struct hb_profile *p)
{
	cr_assert_eq(folded_write(p, HB_INUSE_SPACE, f), 0);
}

static void print_html(FILE *f, struct hb_profile *p)
{
	cr_assert_eq(flamegraph_write(p, HB_INUSE_SPACE, f), 0);
}

static const struct stk redis[] = {
	{ { "zmalloc", "createStringObject", "main" }, 4000 },
	{ { "zmalloc_usable", "dictAddRaw", "main" }, 2000 },
};

/* The summary names the sites past the wrappers and says which it skipped, in one line. */
Test(wrappers, summary_says_what_it_skipped)
{
	struct hb_profile *p = make(redis, 2);
	char *out;

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	out = capture(print_summary, p);
	cr_expect_not_null(strstr(out, "createStringObject\n"), "%s", out);
	cr_expect_not_null(strstr(out, "dictAddRaw\n"), "%s", out);
	cr_expect_null(strstr(out, "allocated  zmalloc"), "%s", out);
	cr_expect_not_null(strstr(out, "heapbpf: sites named past allocator wrappers: zmalloc, "
				       "zmalloc_usable (--wrapper adds more)\n"),
			   "%s", out);
	free(out);
	hb_profile__free(p);

	/* nothing named past: no such line */
	p = make((const struct stk[]){ { { "large_buffers", "main" }, 10 } }, 1);
	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	out = capture(print_summary, p);
	cr_expect_null(strstr(out, "wrappers"), "%s", out);
	free(out);
	hb_profile__free(p);
}

Test(wrappers, text_names_at_most_a_few)
{
	static const struct stk st[] = {
		{ { "w1", "w2", "w3", "w4", "w5", "c" }, 10 },
	};
	static const char *const pats[] = { "w?" };
	struct hb_profile *p = make(st, 1);
	char text[512];

	cr_assert_eq(wrappers_apply(p, pats, 1), 0);
	cr_assert_eq(wrappers_text(text, sizeof(text), p), 0);
	cr_expect_str_eq(text, "sites named past allocator wrappers: w1, w2, w3, w4, w5 "
			       "(--wrapper adds more)");
	hb_profile__free(p);
	p = make((const struct stk[]){ { { "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9",
					   "wa", "c" },
					 10 } },
		 1);
	cr_assert_eq(wrappers_apply(p, pats, 1), 0);
	cr_assert_eq(wrappers_text(text, sizeof(text), p), 0);
	cr_expect_str_eq(text, "sites named past allocator wrappers: w1, w2, w3, w4, w5, w6, w7, "
			       "w8 and 2 more (--wrapper adds more)");
	hb_profile__free(p);
	p = make((const struct stk[]){ { { "a", "b" }, 10 } }, 1);
	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_expect_eq(wrappers_text(text, sizeof(text), p), -ENOENT);
	hb_profile__free(p);
}

/* Folded output (and pprof, from the same samples) keeps every frame. */
Test(wrappers, folded_keeps_every_frame)
{
	struct hb_profile *p = make(redis, 2);
	char *out;

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	out = capture(print_folded, p);
	cr_expect_not_null(strstr(out, "main;createStringObject;zmalloc 4000"), "%s", out);
	cr_expect_not_null(strstr(out, "main;dictAddRaw;zmalloc_usable 2000"), "%s", out);
	free(out);
	hb_profile__free(p);
}

/* The flame graph's tips are the sites, and the page says which wrappers it left out. */
Test(wrappers, flame_graph_tips_are_sites)
{
	struct hb_profile *p = make(redis, 2);
	struct flamegraph *fg;
	struct fg_node_info ni;
	char *out;

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_assert_eq(flamegraph__new(p, HB_INUSE_SPACE, &fg), 0);
	/* all, main, createStringObject, dictAddRaw */
	cr_expect_eq(flamegraph__nnodes(fg), 4);
	for (size_t i = 0; i < flamegraph__nnodes(fg); i++) {
		flamegraph__node(fg, i, &ni);
		cr_expect(strncmp(ni.name, "zmalloc", 7) != 0, "node %zu is %s", i, ni.name);
	}
	flamegraph__free(fg);
	out = capture(print_html, p);
	cr_expect_not_null(strstr(out, "Sites named past allocator wrappers, their frames left out "
				       "here (pprof and folded output keep them): zmalloc, "
				       "zmalloc_usable"));
	free(out);
	hb_profile__free(p);
}

/* heapbpf top's rows by site: the caller past the wrapper, its own line. */
Test(wrappers, top_rows_by_site)
{
	struct hb_profile *p = make(redis, 2);
	struct top_snap snap;

	cr_assert_eq(wrappers_apply(p, NULL, 0), 0);
	cr_assert_eq(topview_snap_build(p, 1, &snap), 0);
	cr_assert_eq(snap.nsites, 2);
	cr_expect(strcmp(snap.sites[0].function, "createStringObject") == 0 ||
		  strcmp(snap.sites[1].function, "createStringObject") == 0);
	cr_expect(strcmp(snap.sites[0].function, "dictAddRaw") == 0 ||
		  strcmp(snap.sites[1].function, "dictAddRaw") == 0);
	topview_snap_free(&snap);
	hb_profile__free(p);
}
