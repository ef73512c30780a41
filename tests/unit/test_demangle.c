// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Demangling: libiberty on known names, then end to end on a fixture library
 * whose functions carry a C++ and two Rust (legacy and v0) mangled symbol
 * names: the profile shows the readable name and keeps the raw one as pprof's
 * system_name.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "collect/collector.h"
#include "symbols/demangle.h"
#include "profile/report.h"
#include "symbols/symbolizer.h"
#include "jemalloc/target.h"

#define CPP_NAME    "_ZN7storage5Cache6insertEPKcm"
#define RUST_LEGACY "_ZN4core3fmt5write17h0123456789abcdefE"
#define RUST_V0	    "_RNvCs15kBYyAo9fc_7mycrate4main"

static void check(const char *mangled, const char *want)
{
	char *d = demangle_name(mangled);

	if (!want) {
		cr_assert_null(d, "%s demangled to %s", mangled, d);
		return;
	}
	cr_assert_not_null(d, "%s not demangled", mangled);
	cr_assert_str_eq(d, want);
	free(d);
}

Test(demangle, known_names)
{
	check("_Z3fooi", "foo(int)");
	check(CPP_NAME, "storage::Cache::insert(char const*, unsigned long)");
	check("_ZNSt6vectorIiSaIiEE9push_backERKi",
	      "std::vector<int, std::allocator<int> >::push_back(int const&)");
	check(RUST_LEGACY, "core::fmt::write");
	check(RUST_V0, "mycrate::main");
	/* C names and jemalloc's stay as they are */
	check("main", NULL);
	check("je_malloc_default", NULL);
	check("_start", NULL);
	check("", NULL);
	check(NULL, NULL);
}

static char dir[] = "/tmp/heapbpf-demangle.XXXXXX";

Test(demangle, fixture_through_symbolizer_and_report)
{
	static const char src[] =
		"__attribute__((noinline)) int cpp(int x) __asm__(\"" CPP_NAME "\");\n"
		"__attribute__((noinline)) int cpp(int x) { return x * 3 + 1; }\n"
		"__attribute__((noinline)) int rl(int x) __asm__(\"" RUST_LEGACY "\");\n"
		"__attribute__((noinline)) int rl(int x) { return x * 5 + 2; }\n"
		"__attribute__((noinline)) int rv(int x) __asm__(\"" RUST_V0 "\");\n"
		"__attribute__((noinline)) int rv(int x) { return x * 7 + 3; }\n"
		"void *fx_cpp(void) { return (void *)cpp; }\n"
		"void *fx_rl(void) { return (void *)rl; }\n"
		"void *fx_rv(void) { return (void *)rv; }\n";
	const char *want[3][2] = {
		{ "storage::Cache::insert(char const*, unsigned long)", CPP_NAME },
		{ "core::fmt::write", RUST_LEGACY },
		{ "mycrate::main", RUST_V0 },
	};
	char path[PATH_MAX], cmd[3 * PATH_MAX];
	struct jemalloc_target t = { .path = "/nonexistent", .ns_prefix = "je_" };
	struct report_opts ro = { .raw = true };
	struct symbolizer *sym;
	struct collector *c;
	struct hb_profile *p;
	uint64_t frames[3];
	void *h;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fx.c", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(src, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "gcc -O2 -g -shared -fPIC -o %s/libfx.so %s", dir, path);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/libfx.so", dir);
	h = dlopen(path, RTLD_NOW);
	cr_assert_not_null(h, "%s", dlerror());
	/* return addresses just past each function's entry: the lookup subtracts one */
	frames[0] = (uint64_t)((void *(*)(void))dlsym(h, "fx_cpp"))() + 1;
	frames[1] = (uint64_t)((void *(*)(void))dlsym(h, "fx_rl"))() + 1;
	frames[2] = (uint64_t)((void *(*)(void))dlsym(h, "fx_rv"))() + 1;

	cr_assert_eq(symbolizer__new(getpid(), &sym), 0);
	cr_assert_eq(collector__new(1 << 19, &c), 0);
	cr_assert_eq(collector__add_totals(c, frames, 3, 1, 64, 1, 64), 0);
	cr_assert_eq(report__build(c, sym, &t, &ro, &p), 0);
	cr_assert_eq(p->nsamples, 1);
	cr_assert_eq(p->samples[0].nlocs, 3);
	for (int i = 0; i < 3; i++) {
		const struct hb_location *l = &p->locations[p->samples[0].locs[i]];

		cr_assert_eq(l->nlines, 1);
		cr_assert_str_eq(l->lines[0].function, want[i][0]);
		cr_assert_str_eq(l->lines[0].system_name, want[i][1]);
		/* built with -g: the fixture's source line is known too */
		cr_assert_not_null(l->lines[0].file);
		cr_assert(strstr(l->lines[0].file, "fx.c"), "%s", l->lines[0].file);
		cr_assert_gt(l->lines[0].line, 0);
	}
	hb_profile__free(p);
	collector__free(c);
	symbolizer__free(sym);
	dlclose(h);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}
