// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every jemalloc a user runs: the example service against jemalloc builds
 * made from Debian's sources by scripts/build-jemalloc-fixtures.sh
 * (tests/fixtures/fixtures.mk): 5.3.0 and 5.2.1, default and tikv's _rjem_
 * names, static and shared, a stand-in for a Rust release binary, a debug
 * build, a --disable-prof build and a version heapbpf does not know; and
 * 5.3.1 from Debian unstable's source package (tests/fixtures/fixtures-531.mk):
 * static, shared, _rjem_, Rust-shaped, debug with and without DWARF.
 *
 *   nobt_*        a process whose own prof_backtrace hook takes no backtraces
 *   bt_max_531_*  5.3.1's prof_bt_max above 128: cut to 128 frames, counted, said
 *   forks_531_*   --follow-forks on 5.3.1, exact against the child's own dump
 *   lifetimes_531_*  5.3.1's frees matched to their objects by pointer
 *
 *   oracle_*      heapbpf's counts equal jemalloc's own prof.dump, per stack
 *   dwarf_*       what the builds' DWARF says, against the layout table
 *   target_*      discovery: prefixes, environment variable, layout, debug build
 *   *_refused, late_activation_*   the clear errors
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "jedump.h"
#include "jemalloc/layout.h"
#include "jemalloc/layout_dwarf.h"
#include "oracle.h"
#include "profile/pprof.h"
#include "jemalloc/target.h"

TestSuite(versions, .fini = hb_tmpdir_cleanup, .timeout = 120);

#define FX(rel) hb_fixture(rel)

/* The flag's symbol in each naming */
#define FLAG_530  "je_prof_active_state"
#define FLAG_RJEM "_rjem_je_prof_active_state"
#define FLAG_521  "je_prof_active"

static void oracle(const char *bin, const char *je_object, const char *flag_sym,
		   const char *conf_env, const char *conf, const char *layout)
{
	hb_fixture_check(bin);
	hb_fixture_check(je_object);
	hb_oracle_run(&(struct hb_oracle){
		.bin = bin,
		.je_object = je_object,
		.flag_sym = flag_sym,
		.conf_env = conf_env,
		.conf = conf,
		.threads = "4",
		.layout = layout,
	});
}

/* ---- heapbpf against jemalloc's own dump, per fixture ------------------------ */

Test(versions, oracle_530_static)
{
	oracle(FX("bin/je530-static"), FX("bin/je530-static"), FLAG_530, NULL, NULL, NULL);
}

Test(versions, oracle_530_shared)
{
	oracle(FX("bin/je530-shared"), FX("je530/lib/libjemalloc.so.2"), FLAG_530, NULL, NULL,
	       NULL);
}

Test(versions, oracle_rjem530_static)
{
	oracle(FX("bin/rjem530-static"), FX("bin/rjem530-static"), FLAG_RJEM, "_RJEM_MALLOC_CONF",
	       NULL, NULL);
}

Test(versions, oracle_rjem530_shared)
{
	oracle(FX("bin/rjem530-shared"), FX("rjem530/lib/libjemalloc.so.2"), FLAG_RJEM,
	       "_RJEM_MALLOC_CONF", NULL, NULL);
}

/* static, _rjem_ names, malloc/mallocx + sdallocx like tikv-jemallocator, no DWARF */
Test(versions, oracle_rust_release_binary)
{
	oracle(FX("bin/rjem530-rust"), FX("bin/rjem530-rust"), FLAG_RJEM, "_RJEM_MALLOC_CONF", NULL,
	       NULL);
}

/* 5.2.1 with the late-activation fix: heapbpf switches sampling on as usual */
Test(versions, oracle_521_fixed_static)
{
	oracle(FX("bin/je521fix-static"), FX("bin/je521fix-static"), FLAG_521, NULL,
	       HB_ORACLE_CONF_521, NULL);
}

Test(versions, oracle_521_fixed_shared)
{
	oracle(FX("bin/je521fix-shared"), FX("je521fix/lib/libjemalloc.so.2"), FLAG_521, NULL,
	       HB_ORACLE_CONF_521, NULL);
}

/*
 * --enable-debug: prof_info_t.alloc_tctx is at 16, not 8. With the wrong
 * offset no free would match its allocation and in-use would differ.
 */
Test(versions, oracle_530_debug_build)
{
	oracle(FX("bin/debug530-static"), FX("bin/debug530-static"), FLAG_530, NULL, NULL, NULL);
}

/* the same build without DWARF: recognized by its compile-time defaults */
Test(versions, oracle_530_debug_build_without_dwarf)
{
	oracle(FX("bin/debug530-static-nodwarf"), FX("bin/debug530-static-nodwarf"), FLAG_530, NULL,
	       NULL, NULL);
}

/* 5.3.1, built from Debian unstable's source package: frees matched by pointer */
Test(versions, oracle_531_static)
{
	oracle(FX("bin/je531-static"), FX("bin/je531-static"), FLAG_530, NULL, NULL, NULL);
}

Test(versions, oracle_531_shared)
{
	oracle(FX("bin/je531-shared"), FX("je531/lib/libjemalloc.so.2"), FLAG_530, NULL, NULL,
	       NULL);
}

Test(versions, oracle_rjem531_static)
{
	oracle(FX("bin/rjem531-static"), FX("bin/rjem531-static"), FLAG_RJEM, "_RJEM_MALLOC_CONF",
	       NULL, NULL);
}

Test(versions, oracle_rjem531_shared)
{
	oracle(FX("bin/rjem531-shared"), FX("rjem531/lib/libjemalloc.so.2"), FLAG_RJEM,
	       "_RJEM_MALLOC_CONF", NULL, NULL);
}

Test(versions, oracle_rust531_release_binary)
{
	oracle(FX("bin/rjem531-rust"), FX("bin/rjem531-rust"), FLAG_RJEM, "_RJEM_MALLOC_CONF", NULL,
	       NULL);
}

Test(versions, oracle_531_debug_build)
{
	oracle(FX("bin/debug531-static"), FX("bin/debug531-static"), FLAG_530, NULL, NULL, NULL);
}

Test(versions, oracle_531_debug_build_without_dwarf)
{
	oracle(FX("bin/debug531-static-nodwarf"), FX("bin/debug531-static-nodwarf"), FLAG_530, NULL,
	       NULL, NULL);
}

/* an unknown version works once the user forces the layout that matches it */
Test(versions, oracle_unknown_version_forced_layout)
{
	oracle(FX("bin/unknown-static"), FX("bin/unknown-static"), FLAG_530, NULL, NULL, "5.3.0");
}

/* ---- DWARF of the builds against the table ------------------------------------ */

static void dwarf_of(const char *path, struct jemalloc_dwarf *d)
{
	int rc;

	hb_fixture_check(path);
	rc = layout_dwarf_read(path, d);
	cr_assert_eq(rc, 0, "layout_dwarf_read(%s): %s", path, strerror(-rc));
}

static void assert_check(const char *layout, bool debug, const struct jemalloc_dwarf *d, int want,
			 const char *want_why)
{
	const struct jemalloc_layout *l = jemalloc_layout_by_name(layout);
	struct jemalloc_layout dl;
	char why[256] = "";
	int rc;

	cr_assert_not_null(l);
	if (debug) {
		jemalloc_layout_debug(l, &dl);
		l = &dl;
	}
	rc = layout_dwarf_check(l, d, why, sizeof(why));
	cr_assert_eq(rc, want, "check against %s%s: %d (%s)", layout, debug ? " debug" : "", rc,
		     why);
	if (want_why)
		cr_assert(strstr(why, want_why), "expected \"%s\" in: %s", want_why, why);
}

Test(versions, dwarf_530)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("bin/je530-static"), &d);
	cr_assert_eq(d.tctx_gctx, 96);
	cr_assert_eq(d.gctx_bt, 104);
	cr_assert_eq(d.bt_vec, 0);
	cr_assert_eq(d.bt_len, 8);
	cr_assert_eq(d.info_time, 0);
	cr_assert_eq(d.info_tctx, 8);
	cr_assert_eq(d.info_size, 16);
	cr_assert(d.have_nstime && !d.nstime_magic);
	/* prof_malloc_sample_object(tsd, ptr, size, usize, tctx) */
	cr_assert(d.have_alloc_fn);
	cr_assert_eq(d.alloc_ptr, 1);
	cr_assert_eq(d.alloc_size, 2);
	cr_assert_eq(d.alloc_usize, 3);
	cr_assert_eq(d.alloc_tctx, 4);
	/* prof_free_sampled_object(tsd, usize, prof_info) */
	cr_assert(d.have_free_fn);
	cr_assert_eq(d.free_ptr, -1);
	cr_assert_eq(d.free_usize, 1);
	cr_assert_eq(d.free_info, 2);
	cr_assert_eq(d.free_tctx, -1);
	assert_check("5.3.0", false, &d, 0, NULL);
	/* the wrong tables are caught */
	assert_check("5.2.1", false, &d, -EPROTO,
		     "prof_tctx_t.gctx is at 96 in its debug info, the 5.2.1 layout says 56");
	assert_check("5.3.1", false, &d, -EPROTO, "parameter ptr of prof_free_sampled_object");
	assert_check("5.3.0", true, &d, -EPROTO, "prof_info_t.alloc_tctx is at 8");
}

Test(versions, dwarf_530_shared_library_and_rjem)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("je530/lib/libjemalloc.so.2"), &d);
	assert_check("5.3.0", false, &d, 0, NULL);
	dwarf_of(FX("rjem530/lib/libjemalloc.so.2"), &d);
	assert_check("5.3.0", false, &d, 0, NULL);
}

/*
 * jemalloc's layout read from a dwz'd debug file of libjemalloc: the types
 * of src/prof.c that moved to the multifile are read through it and equal
 * what the whole file says; with a FIFO as the multifile nothing blocks and
 * the layout is not complete.
 */
Test(versions, dwarf_530_through_a_dwz_multifile)
{
	char dir[PATH_MAX], lib[PATH_MAX], common[PATH_MAX + 16], a[PATH_MAX + 16];
	struct jemalloc_dwarf whole, dwz;

	snprintf(dir, sizeof(dir), "%s", hb_tmp("jedwz"));
	snprintf(common, sizeof(common), "%s/common.debug", dir);
	snprintf(a, sizeof(a), "%s/a.debug", dir);
	cr_assert_not_null(realpath(FX("je530/lib/libjemalloc.so.2"), lib));
	hb_sh("mkdir '%s' && cd '%s' && objcopy --only-keep-debug '%s' a.debug && "
	      "objcopy --only-keep-debug '%s' b.debug && dwz -m common.debug -M '%s' a.debug b.debug",
	      dir, dir, lib, lib, common);
	/* prof.c's compile unit refers into the multifile */
	hb_sh("readelf -S '%s' | grep -q gnu_debugaltlink", a);

	cr_assert_eq(layout_dwarf_read(lib, &whole), 0);
	cr_assert_eq(layout_dwarf_read(a, &dwz), 0);
	cr_assert(whole.have_alloc_fn && whole.tctx_gctx >= 0 && whole.bt_vec >= 0);
	cr_assert_eq(dwz.tctx_gctx, whole.tctx_gctx);
	cr_assert_eq(dwz.gctx_bt, whole.gctx_bt);
	cr_assert_eq(dwz.bt_vec, whole.bt_vec);
	cr_assert_eq(dwz.bt_len, whole.bt_len);
	cr_assert_eq(dwz.info_tctx, whole.info_tctx);
	cr_assert_eq(dwz.alloc_tctx, whole.alloc_tctx);

	hb_sh("mv '%s' '%s.away' && mkfifo '%s'", common, common, common);
	layout_dwarf_read(a, &dwz);
	cr_assert(dwz.tctx_gctx < 0 || dwz.bt_vec < 0,
		  "the layout was complete without the multifile: the test proves nothing");
}

Test(versions, dwarf_521)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("bin/je521fix-static"), &d);
	cr_assert_eq(d.tctx_gctx, 56);
	cr_assert_eq(d.gctx_bt, 72);
	cr_assert_eq(d.bt_vec, 0);
	cr_assert_eq(d.bt_len, 8);
	cr_assert_eq(d.info_tctx, -1, "5.2.1 has no prof_info_t");
	cr_assert(d.have_nstime && !d.nstime_magic);
	/* prof_malloc_sample_object(tsdn, ptr, usize, tctx) */
	cr_assert_eq(d.alloc_ptr, 1);
	cr_assert_eq(d.alloc_size, -1);
	cr_assert_eq(d.alloc_usize, 2);
	cr_assert_eq(d.alloc_tctx, 3);
	/* prof_free_sampled_object(tsd, ptr, usize, tctx) */
	cr_assert_eq(d.free_ptr, 1);
	cr_assert_eq(d.free_usize, 2);
	cr_assert_eq(d.free_info, -1);
	cr_assert_eq(d.free_tctx, 3);
	assert_check("5.2.1", false, &d, 0, NULL);
	assert_check("5.3.0", false, &d, -EPROTO, "the 5.3.0 layout says 96");
}

Test(versions, dwarf_530_debug_build)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("bin/debug530-static"), &d);
	cr_assert(d.have_nstime && d.nstime_magic, "nstime_t of a debug build has a magic");
	cr_assert_eq(d.info_time, 0);
	cr_assert_eq(d.info_tctx, 16);
	cr_assert_eq(d.info_size, 24);
	cr_assert_eq(d.tctx_gctx, 96);
	cr_assert_eq(d.gctx_bt, 104);
	assert_check("5.3.0", true, &d, 0, NULL);
	assert_check("5.3.0", false, &d, -EPROTO,
		     "prof_info_t.alloc_tctx is at 16 in its debug info, the 5.3.0 layout says 8");
}

/* 5.3.1's real build: the structs heapbpf reads are 5.3.0's, the free hook gets ptr */
Test(versions, dwarf_531)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("bin/je531-static"), &d);
	cr_assert_eq(d.tctx_gctx, 96);
	cr_assert_eq(d.gctx_bt, 104);
	cr_assert_eq(d.bt_vec, 0);
	cr_assert_eq(d.bt_len, 8);
	cr_assert_eq(d.info_time, 0);
	cr_assert_eq(d.info_tctx, 8);
	cr_assert_eq(d.info_size, 16);
	cr_assert(d.have_nstime && !d.nstime_magic);
	cr_assert(d.have_alloc_fn);
	cr_assert_eq(d.alloc_ptr, 1);
	cr_assert_eq(d.alloc_size, 2);
	cr_assert_eq(d.alloc_usize, 3);
	cr_assert_eq(d.alloc_tctx, 4);
	/* prof_free_sampled_object(tsd, ptr, usize, prof_info) */
	cr_assert(d.have_free_fn);
	cr_assert_eq(d.free_ptr, 1);
	cr_assert_eq(d.free_usize, 2);
	cr_assert_eq(d.free_info, 3);
	cr_assert_eq(d.free_tctx, -1);
	assert_check("5.3.1", false, &d, 0, NULL);
	assert_check("5.3.0", false, &d, -EPROTO, "prof_free_sampled_object");
	assert_check("5.3.1", true, &d, -EPROTO, "prof_info_t.alloc_tctx is at 8");
}

Test(versions, dwarf_531_shared_library_and_rjem)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("je531/lib/libjemalloc.so.2"), &d);
	assert_check("5.3.1", false, &d, 0, NULL);
	dwarf_of(FX("rjem531/lib/libjemalloc.so.2"), &d);
	assert_check("5.3.1", false, &d, 0, NULL);
	dwarf_of(FX("bin/rjem531-static"), &d);
	assert_check("5.3.1", false, &d, 0, NULL);
}

Test(versions, dwarf_531_debug_build)
{
	struct jemalloc_dwarf d;

	dwarf_of(FX("bin/debug531-static"), &d);
	cr_assert(d.have_nstime && d.nstime_magic, "nstime_t of a debug build has a magic");
	cr_assert_eq(d.info_tctx, 16);
	cr_assert_eq(d.info_size, 24);
	assert_check("5.3.1", true, &d, 0, NULL);
	assert_check("5.3.1", false, &d, -EPROTO,
		     "prof_info_t.alloc_tctx is at 16 in its debug info, the 5.3.1 layout says 8");
}

Test(versions, dwarf_absent)
{
	struct jemalloc_dwarf d;

	/* a release binary stripped of debug info, a build without -g */
	hb_fixture_check(FX("bin/rjem530-rust"));
	cr_assert_eq(layout_dwarf_read(FX("bin/rjem530-rust"), &d), -ENOENT);
	hb_fixture_check(FX("bin/unknown-static"));
	cr_assert_eq(layout_dwarf_read(FX("bin/unknown-static"), &d), -ENOENT);
	hb_fixture_check(FX("bin/je521-static"));
	cr_assert_eq(layout_dwarf_read(FX("bin/je521-static"), &d), -ENOENT);
	hb_fixture_check(FX("bin/rjem531-rust"));
	cr_assert_eq(layout_dwarf_read(FX("bin/rjem531-rust"), &d), -ENOENT);
	hb_fixture_check(FX("bin/debug531-static-nodwarf"));
	cr_assert_eq(layout_dwarf_read(FX("bin/debug531-static-nodwarf"), &d), -ENOENT);
}

/* ---- discovery ---------------------------------------------------------------- */

struct want {
	const char *ns, *pub, *env, *layout;
	bool debug, dwarf;
};

static void target_is(const char *bin, const char *conf_env, const struct want *w)
{
	char conf[128], err[1024];
	const char *env[] = { conf, NULL };
	struct jemalloc_target *t;
	struct svc s;

	hb_require_bpf(); /* reads another process's memory: root */
	hb_fixture_check(bin);
	snprintf(conf, sizeof(conf), "%s=prof:true,prof_active:false", conf_env);
	cr_assert_eq(svc_start_env(&s, bin, NULL, env, (const char *[]){ "--threads", "1", NULL }),
		     0);
	cr_assert_eq(jemalloc_target__find(s.pid, NULL, &t, err, sizeof(err)), 0, "%s: %s", bin,
		     err);
	cr_assert_str_eq(t->ns_prefix, w->ns, "%s", bin);
	cr_assert_str_eq(t->pub_prefix, w->pub, "%s", bin);
	cr_assert_str_eq(t->conf_env, w->env, "%s", bin);
	cr_assert_str_eq(t->layout->name, w->layout, "%s", bin);
	cr_assert_eq(t->debug_build, w->debug, "%s", bin);
	cr_assert_eq(t->dwarf_checked, w->dwarf, "%s", bin);
	cr_assert(t->opt_prof);
	cr_assert_eq(t->lg_prof_sample, 19);
	jemalloc_target__free(t);
	cr_assert_eq(svc_stop(&s), 0);
}

Test(versions, target_default_prefix)
{
	target_is(FX("bin/je530-static"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.0", false, true });
	target_is(FX("bin/je530-shared"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.0", false, true });
}

Test(versions, target_rjem_prefix)
{
	target_is(FX("bin/rjem530-static"), "_RJEM_MALLOC_CONF",
		  &(struct want){ "_rjem_je_", "_rjem_", "_RJEM_MALLOC_CONF", "5.3.0", false,
				  true });
	target_is(FX("bin/rjem530-shared"), "_RJEM_MALLOC_CONF",
		  &(struct want){ "_rjem_je_", "_rjem_", "_RJEM_MALLOC_CONF", "5.3.0", false,
				  true });
	target_is(FX("bin/rjem530-rust"), "_RJEM_MALLOC_CONF",
		  &(struct want){ "_rjem_je_", "_rjem_", "_RJEM_MALLOC_CONF", "5.3.0", false,
				  false });
}

Test(versions, target_custom_prefixes)
{
	/* --with-jemalloc-prefix=myapp_ --with-private-namespace=myapp_ */
	target_is(FX("bin/custom530-static"), "MYAPP_MALLOC_CONF",
		  &(struct want){ "myapp_je_", "myapp_", "MYAPP_MALLOC_CONF", "5.3.0", false,
				  false });
	/* --with-jemalloc-prefix=je_: the public API shares the private namespace's prefix */
	target_is(FX("bin/jepub530-static"), "JE_MALLOC_CONF",
		  &(struct want){ "je_", "je_", "JE_MALLOC_CONF", "5.3.0", false, false });
}

Test(versions, target_521_and_debug)
{
	target_is(FX("bin/je521fix-static"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.2.1", false, true });
	target_is(FX("bin/debug530-static"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.0", true, true });
	target_is(FX("bin/debug530-static-nodwarf"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.0", true, false });
}

/* 5.3.1's release string: its entry, checked against DWARF where there is some */
Test(versions, target_531)
{
	target_is(FX("bin/je531-static"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.1", false, true });
	target_is(FX("bin/je531-shared"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.1", false, true });
	target_is(FX("bin/rjem531-static"), "_RJEM_MALLOC_CONF",
		  &(struct want){ "_rjem_je_", "_rjem_", "_RJEM_MALLOC_CONF", "5.3.1", false,
				  true });
	target_is(FX("bin/rjem531-rust"), "_RJEM_MALLOC_CONF",
		  &(struct want){ "_rjem_je_", "_rjem_", "_RJEM_MALLOC_CONF", "5.3.1", false,
				  false });
	target_is(FX("bin/debug531-static"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.1", true, true });
	target_is(FX("bin/debug531-static-nodwarf"), "MALLOC_CONF",
		  &(struct want){ "je_", "", "MALLOC_CONF", "5.3.1", true, false });
}

/* ---- the clear errors ----------------------------------------------------------- */

struct refusal {
	const char *bin;
	const char *env; /* "NAME=value" or NULL */
	const char *layout;
	const char *flag_sym; /* checked untouched, or NULL */
};

/* heapbpf refuses: exit 1, one line with every string of want, no output, flag untouched. */
static void refused(const struct refusal *r, const char *const *want)
{
	char out[PATH_MAX], pid[16], err[4096];
	const char *env[] = { r->env, NULL };
	const char *args[] = {
		"--pid",   pid, "-d", "2", "-o", out, r->layout ? "--jemalloc-layout" : NULL,
		r->layout, NULL
	};
	struct stat st;
	struct svc s;
	uint64_t flag;
	uint8_t b;

	hb_require_bpf();
	hb_fixture_check(r->bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, r->bin, NULL, r->env ? env : NULL,
				   (const char *[]){ "--threads", "2", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 1, "stderr: %s", err);
	cr_assert(strncmp(err, "heapbpf: ", 9) == 0 && strchr(err, '\n') == err + strlen(err) - 1,
		  "not one heapbpf line: %s", err);
	for (; *want; want++)
		cr_assert(strstr(err, *want), "expected \"%s\" in: %s", *want, err);
	cr_assert_neq(stat(out, &st), 0, "%s was written", out);
	if (r->flag_sym) {
		cr_assert_eq(hb_sym_addr(s.pid, r->bin, r->flag_sym, &flag), 0);
		cr_assert_eq(hb_peek(s.pid, flag, &b, 1), 0);
		cr_assert_eq(b, 0, "prof_active was touched");
	}
	cr_assert_eq(svc_stop(&s), 0);
}

Test(versions, disable_prof_build_refused)
{
	refused(&(struct refusal){ FX("bin/noprof530-static"),
				   "MALLOC_CONF=prof:true,prof_active:false", NULL, NULL },
		(const char *[]){ "was built without profiling support",
				  "rebuild it with --enable-prof", NULL });
}

Test(versions, unknown_version_refused)
{
	refused(&(struct refusal){ FX("bin/unknown-static"),
				   "MALLOC_CONF=prof:true,prof_active:false", NULL, FLAG_530 },
		(const char *[]){
			"jemalloc 5.4.0-0-g0000000000000000000000000000000000000000 in pid",
			"is not a version heapbpf knows (5.2.1, 5.3.0, 5.3.1)", "--jemalloc-layout",
			NULL });
}

Test(versions, forced_layout_contradicting_dwarf_refused)
{
	refused(&(struct refusal){ FX("bin/je530-static"),
				   "MALLOC_CONF=prof:true,prof_active:false", "5.2.1", FLAG_530 },
		(const char *[]){ "does not match heapbpf's 5.2.1 layout",
				  "prof_tctx_t.gctx is at 96 in its debug info, the 5.2.1 layout "
				  "says 56",
				  NULL });
	refused(&(struct refusal){ FX("bin/je521fix-static"),
				   "MALLOC_CONF=prof:true,prof_active:false", "5.3.0", FLAG_521 },
		(const char *[]){ "does not match heapbpf's 5.3.0 layout", NULL });
}

/* without prof:true, the message names the variable this build reads */
Test(versions, without_prof_names_the_right_variable)
{
	refused(&(struct refusal){ FX("bin/rjem530-static"), NULL, NULL, NULL },
		(const char *[]){ "restart it with _RJEM_MALLOC_CONF=prof:true,prof_active:false",
				  NULL });
	refused(&(struct refusal){ FX("bin/rjem530-rust"), NULL, NULL, NULL },
		(const char *[]){ "restart it with _RJEM_MALLOC_CONF=prof:true,prof_active:false",
				  NULL });
	/* MALLOC_CONF is not what a _rjem_ build reads */
	refused(&(struct refusal){ FX("bin/rjem530-static"),
				   "MALLOC_CONF=prof:true,prof_active:false", NULL, NULL },
		(const char *[]){ "restart it with _RJEM_MALLOC_CONF=", NULL });
	refused(&(struct refusal){ FX("bin/je521fix-shared"), NULL, NULL, NULL },
		(const char *[]){ "restart it with MALLOC_CONF=prof:true,prof_active:false",
				  NULL });
	refused(&(struct refusal){ FX("bin/custom530-static"), NULL, NULL, NULL },
		(const char *[]){ "restart it with MYAPP_MALLOC_CONF=prof:true,prof_active:false",
				  NULL });
}

/*
 * 5.2.1 as released, started with prof_active off: heapbpf switches it on,
 * sees the slow path allocate but no sample, and says why and what to do.
 * jemalloc's own dump confirms that it sampled nothing meanwhile.
 */
Test(versions, late_activation_521_detected)
{
	char out[PATH_MAX], dump[PATH_MAX], cmd[PATH_MAX + 8], reply[256], pid[16], err[4096];
	const char *env[] = { "MALLOC_CONF=" HB_ORACLE_CONF_521, NULL };
	const char *args[] = { "--pid", pid, "-d", "30", "-o", out, NULL };
	const char *bin = FX("bin/je521-static");
	uint64_t accum = 0, flag;
	struct jedump *d;
	struct stat st;
	struct svc s;
	uint8_t b;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, bin, NULL, env,
				   (const char *[]){ "--threads", "4", "--rate", "0", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	/* well before the 30 s are up */
	cr_assert_eq(hb_run(args, err, sizeof(err), 20000), 1, "stderr: %s", err);
	cr_assert(strstr(err, "took no sample"), "%s", err);
	cr_assert(strstr(err, "jemalloc 5.2.1 never samples again in a thread that allocated while "
			      "prof_active was off"),
		  "%s", err);
	cr_assert(strstr(err, "start the service with MALLOC_CONF=prof:true,prof_active:true"),
		  "%s", err);
	cr_assert_neq(stat(out, &st), 0, "%s was written", out);
	cr_assert_eq(hb_sym_addr(s.pid, bin, FLAG_521, &flag), 0);
	cr_assert_eq(hb_peek(s.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 0, "prof_active was not restored");

	/* jemalloc agrees: nothing sampled, ever (prof_accum keeps every sample) */
	cr_assert_eq(svc_cmd(&s, "pause", reply, sizeof(reply), 10000), 0);
	snprintf(cmd, sizeof(cmd), "dump %s", dump);
	cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "dumped");
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	for (size_t i = 0; i < d->nstacks; i++)
		accum += d->stacks[i].accumobjs;
	jedump__free(d);
	cr_assert_eq(accum, 0, "jemalloc sampled %" PRIu64 " objects: the bug did not happen",
		     accum);
	cr_assert_eq(svc_stop(&s), 0);
}

/*
 * Two 5.2.1 targets in one session, one started sampling (heapbpf leaves it
 * on) and one hit by the bug: the check is each target's own. The second is
 * said in the bug's words and left out (exit 1: one target could not be
 * profiled), its flag back off; the first's profile is written.
 */
Test(versions, late_activation_521_one_target_of_two)
{
	char dir[PATH_MAX], list[64], err[16384], want[64];
	const char *on[] = { "MALLOC_CONF=prof:true,prof_active:true", NULL };
	const char *off[] = { "MALLOC_CONF=" HB_ORACLE_CONF_521, NULL };
	const char *args[] = { "--pid", list, "-d", "4", "--output-dir", dir, NULL };
	const char *svc_args[] = { "--threads", "4", "--rate", "0", NULL };
	const char *bin = FX("bin/je521-static");
	struct svc a, b;
	uint64_t flag[2];
	bool wrote[2] = { false, false };
	struct dirent *de;
	uint8_t v;
	DIR *d;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(dir, sizeof(dir), "%s/snap", hb_tmpdir());
	cr_assert_eq(svc_start_env(&a, bin, NULL, on, svc_args), 0);
	cr_assert_eq(svc_start_env(&b, bin, NULL, off, svc_args), 0);
	snprintf(list, sizeof(list), "%d,%d", a.pid, b.pid);
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 1, "stderr: %s", err);
	snprintf(want, sizeof(want), "in pid %d allocated", b.pid);
	cr_assert(strstr(err, want) && strstr(err, "took no sample") &&
			  strstr(err, "jemalloc 5.2.1 never samples again"),
		  "%s", err);
	snprintf(want, sizeof(want), "in pid %d allocated", a.pid);
	cr_assert_null(strstr(err, want), "%s", err);
	d = opendir(dir);
	cr_assert_not_null(d, "no %s: %s", dir, err);
	while ((de = readdir(d))) {
		for (int i = 0; i < 2; i++) {
			snprintf(want, sizeof(want), "-%d-", i ? b.pid : a.pid);
			wrote[i] |= strstr(de->d_name, want) != NULL;
		}
	}
	closedir(d);
	cr_assert(wrote[0], "no profile of pid %d: %s", a.pid, err);
	cr_assert_not(wrote[1], "a profile of pid %d, which sampled nothing", b.pid);
	/* the first left on, as it was found; the second back off */
	cr_assert_eq(hb_sym_addr(a.pid, bin, FLAG_521, &flag[0]), 0);
	cr_assert_eq(hb_sym_addr(b.pid, bin, FLAG_521, &flag[1]), 0);
	cr_assert_eq(hb_peek(a.pid, flag[0], &v, 1), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(hb_peek(b.pid, flag[1], &v, 1), 0);
	cr_assert_eq(v, 0, "prof_active was left on in pid %d", b.pid);
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
}

/* What the message advises works: started active, 5.2.1 as released samples. */
Test(versions, late_activation_521_started_active_samples)
{
	char out[PATH_MAX], pid[16], err[4096];
	const char *env[] = { "MALLOC_CONF=prof:true,prof_active:true", NULL };
	const char *args[] = { "--pid", pid, "-d", "3", "-o", out, NULL };
	const char *bin = FX("bin/je521-static");
	struct stat st;
	struct svc s;
	uint64_t flag;
	uint8_t b;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, bin, NULL, env,
				   (const char *[]){ "--threads", "4", "--rate", "0", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 0, "stderr: %s", err);
	cr_assert_eq(stat(out, &st), 0);
	cr_assert_gt(st.st_size, 100);
	/* left on, as it was found */
	cr_assert_eq(hb_sym_addr(s.pid, bin, FLAG_521, &flag), 0);
	cr_assert_eq(hb_peek(s.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 1);
	cr_assert_eq(svc_stop(&s), 0);
}

/* ---- processes whose jemalloc takes no backtraces ---------------------------------- */

/* The last line of text (heapbpf's refusal follows its attach line). */
static const char *last_line(const char *text)
{
	const char *end = text + strlen(text), *line;

	cr_assert(end > text && end[-1] == '\n', "no whole line in: %s", text);
	line = end - 1;
	while (line > text && line[-1] != '\n')
		line--;
	return line;
}

static uint8_t flag_in(pid_t pid, const char *bin, const char *flag_sym)
{
	uint64_t addr;
	uint8_t b = 0xff;

	cr_assert_eq(hb_sym_addr(pid, bin, flag_sym, &addr), 0);
	cr_assert_eq(hb_peek(pid, addr, &b, 1), 0);
	return b;
}

/*
 * The process installs a prof_backtrace hook that takes no backtrace
 * (experimental.hooks.prof_backtrace, as a bridge that takes its stacks itself
 * does) and switches prof.active on itself. heapbpf stops after the first
 * samples with one sentence saying so, writes nothing, and leaves the flag on,
 * as the process set it; --live-heap refuses its tables of empty stacks too.
 */
static void no_backtraces(const char *bin, bool self_active)
{
	char out[PATH_MAX], pid[16], err[4096], reply[128], *p;
	const char *env[] = { "MALLOC_CONF=prof:true,prof_active:false,lg_prof_sample:14", NULL };
	const char *args[] = { "--pid", pid, "-d", "60", "-o", out, NULL };
	const char *live[] = { "--live-heap", "--pid", pid, "-o", out, NULL };
	const char *line;
	struct stat st;
	struct svc s;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, bin, NULL, env,
				   (const char *[]){ "--threads", "2", "--rate", "0", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(svc_cmd(&s, self_active ? "nobt" : "nobt 0", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, self_active ? "nobt active 1" : "nobt active 0");
	cr_assert_eq(flag_in(s.pid, bin, FLAG_530), self_active);

	/* long before its 60 s: the first samples settle it */
	cr_assert_eq(hb_run(args, err, sizeof(err), 45000), 1, "stderr: %s", err);
	line = last_line(err);
	cr_assert(strncmp(line, "heapbpf: ", 9) == 0, "not a heapbpf line: %s", err);
	cr_assert(strstr(line, "its jemalloc takes no backtraces"), "%s", err);
	cr_assert(strstr(line, "sampled allocations came with empty stacks"), "%s", err);
	cr_assert(strstr(line, "prof_backtrace hook of its own"), "%s", err);
	cr_assert(strstr(line, self_active ? "left prof.active on, as the process had switched "
					     "it on itself"
					   : "switched prof.active back off"),
		  "%s", err);
	/* one sentence, said once */
	p = strstr(err, "takes no backtraces");
	cr_assert_null(strstr(p + 1, "takes no backtraces"), "%s", err);
	cr_assert_null(strstr(err, "does not fit"), "%s", err);
	cr_assert_neq(stat(out, &st), 0, "%s was written", out);
	if (!self_active) {
		/* heapbpf switched it on: back off, as it found it */
		cr_assert_eq(flag_in(s.pid, bin, FLAG_530), 0, "prof.active left on");
		cr_assert_eq(svc_stop(&s), 0);
		return;
	}
	cr_assert_eq(flag_in(s.pid, bin, FLAG_530), 1, "the process's own prof.active changed");

	cr_assert_eq(hb_run(live, err, sizeof(err), 30000), 1, "stderr: %s", err);
	cr_assert(strstr(err, "its jemalloc takes no backtraces") &&
			  strstr(err, "its tables hold sampled objects under empty stacks only"),
		  "%s", err);
	cr_assert_neq(stat(out, &st), 0, "%s was written", out);
	cr_assert_eq(flag_in(s.pid, bin, FLAG_530), 1);
	cr_assert_eq(svc_stop(&s), 0);
}

Test(versions, nobt_531_hook_said_flag_left_on)
{
	no_backtraces(FX("bin/je531-static"), true);
}

/* 5.3.0 has experimental.hooks.prof_backtrace too */
Test(versions, nobt_530_hook_said_flag_left_on)
{
	no_backtraces(FX("bin/je530-static"), true);
}

/* the hook alone, prof.active off: heapbpf switched it on, and back off once it saw */
Test(versions, nobt_531_hook_said_flag_switched_back_off)
{
	no_backtraces(FX("bin/je531-static"), false);
}

/* ---- 5.3.1's prof_bt_max above 128 ------------------------------------------------- */

/*
 * prof_bt_max:300 and a 300-frame recursion: jemalloc keeps 300 frames,
 * heapbpf the innermost 128 of them; every such sample is counted and said,
 * and its counts equal jemalloc's dump for those 128 frames; --live-heap says
 * the same of the stack in the tables.
 */
Test(versions, bt_max_531_deeper_than_128_cut_counted_and_said)
{
	char out[PATH_MAX], live_out[PATH_MAX], dump[PATH_MAX], errpath[PATH_MAX], pid[16];
	char reply[128], cmd[PATH_MAX + 8], err[8192], want[160], *text;
	const char *env[] = { "MALLOC_CONF=" HB_ORACLE_CONF ",lg_prof_sample:14,prof_bt_max:300",
			      NULL };
	const char *bin = FX("bin/je531-static");
	const char *live[] = { "--live-heap", "--pid", pid, "--raw", "-o", live_out, NULL };
	uint64_t deep = 0, flag;
	size_t longest = 0;
	struct jedump *d;
	struct svc s;
	int64_t n;
	pid_t hp;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(live_out, sizeof(live_out), "%s/live.pb.gz", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, bin, NULL, env, (const char *[]){ "--threads", "0", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_sym_addr(s.pid, bin, FLAG_530, &flag), 0);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "--raw", "-o",
					out, NULL },
		      errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp), "heapbpf did not start");
	cr_assert_eq(svc_cmd(&s, "deep 300 4", reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "deep 64");
	kill(hp, SIGINT);
	cr_assert_eq(hb_wait(hp, 30000), 0);
	cr_assert_eq(flag_in(s.pid, bin, FLAG_530), 0);
	snprintf(cmd, sizeof(cmd), "dump %s", dump);
	cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "dumped");

	/* jemalloc took the whole 300 frames */
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	for (size_t i = 0; i < d->nstacks; i++) {
		if (d->stacks[i].nframes > longest)
			longest = d->stacks[i].nframes;
		if (d->stacks[i].nframes > HEAPBPF_MAX_FRAMES)
			deep += d->stacks[i].accumobjs;
	}
	jedump__free(d);
	cr_assert_eq(longest, 300, "jemalloc's longest backtrace: %zu frames", longest);
	cr_assert_gt(deep, 0);

	/* said, with the count of such samples */
	cr_assert_gt(hb_read_file(errpath, &text), 0);
	snprintf(want, sizeof(want), "WARNING: %" PRIu64 " of the ", deep);
	cr_assert(strstr(text, want), "expected \"%s\" in: %s", want, text);
	cr_assert(strstr(text, "samples had backtraces deeper than heapbpf's 128 frames "
			       "(jemalloc's prof_bt_max is above 128): each keeps its innermost "
			       "128 frames"),
		  "%s", text);
	free(text);
	/* and exact against the dump, cut the same way */
	n = hb_oracle_compare_pid(out, s.pid, dump, "deep_buffers");
	cr_assert_eq(n, (int64_t)deep, "%" PRId64 " samples compared, %" PRIu64 " deep", n, deep);

	/* the tables hold the 300-frame backtrace: read, cut and said, not refused */
	cr_assert_eq(hb_run(live, err, sizeof(err), 30000), 0, "stderr: %s", err);
	cr_assert(strstr(err, "stacks were deeper than heapbpf's 128 frames"), "%s", err);
	n = hb_oracle_compare_all(live_out, s.pid, dump, "deep_buffers");
	cr_assert_eq(n, (int64_t)deep, "%" PRId64 " samples compared, %" PRIu64 " deep", n, deep);
	cr_assert_eq(svc_stop(&s), 0);
}

/* ---- --follow-forks on 5.3.1 -------------------------------------------------------- */

/* A forked worker followed from before it allocates: exact against its own dump. */
Test(versions, forks_531_followed_child_exact)
{
	char out[PATH_MAX], errpath[PATH_MAX], dump[PATH_MAX], cmd[PATH_MAX + 16], pid[16];
	char reply[128], line[96];
	const char *env[] = { "MALLOC_CONF=" HB_ORACLE_CONF, NULL };
	const char *bin = FX("bin/je531-static");
	uint64_t flag;
	struct svc s;
	pid_t hp, kid = 0;
	int64_t n;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, bin, NULL, env, (const char *[]){ "--threads", "1", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_sym_addr(s.pid, bin, FLAG_530, &flag), 0);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "--raw",
					"--follow-forks", "-o", out, NULL },
		      errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp), "heapbpf did not start");
	snprintf(cmd, sizeof(cmd), "forkw 60 %s", hb_tmpdir());
	cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &kid), 1, "%s", reply);
	snprintf(line, sizeof(line), "following pid %d (forked from %d)", kid, s.pid);
	cr_assert(hb_wait_text(errpath, line, 20000, hp), "heapbpf does not follow pid %d", kid);
	kill(kid, SIGUSR1);
	hb_sleep_ms(2000);
	kill(kid, SIGUSR2);
	snprintf(dump, sizeof(dump), "%s/child-%d.heap.done", hb_tmpdir(), kid);
	for (int t = 0; t < 400 && access(dump, F_OK); t++)
		hb_sleep_ms(50);
	cr_assert_eq(access(dump, F_OK), 0, "the worker wrote no dump");
	kill(hp, SIGINT);
	cr_assert_eq(hb_wait(hp, 30000), 0);
	/* the child's flag, which heapbpf switched on in its parent, is back off */
	cr_assert_eq(flag_in(kid, bin, FLAG_530), 0);
	snprintf(dump, sizeof(dump), "%s/child-%d.heap", hb_tmpdir(), kid);
	n = hb_oracle_compare_pid(out, kid, dump, "forked_child");
	cr_assert_gt(n, 50, "only %" PRId64 " samples compared", n);
	kill(kid, SIGKILL);
	cr_assert_eq(svc_stop(&s), 0);
}

/* ---- lifetimes on 5.3.1: frees matched by pointer ------------------------------------ */

/* A numeric label of the sample whose leaf function is fn; -1 when it has none. */
static int64_t site_label(const Perftools__Profiles__Profile *p, const char *fn, const char *key)
{
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		const Perftools__Profiles__Location *l;

		if (!s->n_location_id)
			continue;
		l = p->location[s->location_id[0] - 1];
		if (strcmp(p->string_table[p->function[l->line[l->n_line - 1]->function_id - 1]
						   ->name],
			   fn))
			continue;
		for (size_t k = 0; k < s->n_label; k++) {
			if (!strcmp(p->string_table[s->label[k]->key], key))
				return s->label[k]->num;
		}
	}
	return -1;
}

/*
 * 5.3.1's free hook passes the pointer back: each sampled object of a burst
 * held 300 ms is matched to its free by pointer. Every object jemalloc
 * sampled there (its own dump) is freed in heapbpf's --leaks profile, and
 * none lived less than the 300 ms the example held it.
 */
Test(versions, lifetimes_531_matched_by_pointer)
{
	char out[PATH_MAX], dump[PATH_MAX], errpath[PATH_MAX], cmd[PATH_MAX + 8], pid[16];
	char reply[128], *buf;
	const char *env[] = { "MALLOC_CONF=" HB_ORACLE_CONF ",lg_prof_sample:14", NULL };
	const char *bin = FX("bin/je531-static");
	Perftools__Profiles__Profile *p;
	uint64_t flag, sampled = 0, live = 0;
	struct jedump *d;
	struct svc s;
	ssize_t n;
	pid_t hp;

	hb_require_bpf();
	hb_fixture_check(bin);
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	cr_assert_eq(svc_start_env(&s, bin, NULL, env, (const char *[]){ "--threads", "0", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_sym_addr(s.pid, bin, FLAG_530, &flag), 0);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "--leaks",
					"-o", out, NULL },
		      errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp), "heapbpf did not start");
	cr_assert_eq(svc_cmd(&s, "burst 8 300", reply, sizeof(reply), 30000), 0);
	cr_assert_str_eq(reply, "burst 8");
	kill(hp, SIGINT);
	cr_assert_eq(hb_wait(hp, 30000), 0);
	snprintf(cmd, sizeof(cmd), "dump %s", dump);
	cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "dumped");
	cr_assert_eq(svc_stop(&s), 0);

	/* what jemalloc sampled of the burst: the stacks that hold burst_buffers's 64 KiB */
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	for (size_t i = 0; i < d->nstacks; i++) {
		if (d->stacks[i].accumobjs &&
		    d->stacks[i].accumbytes / d->stacks[i].accumobjs == 64 << 10) {
			sampled += d->stacks[i].accumobjs;
			live += d->stacks[i].curobjs;
		}
	}
	jedump__free(d);
	cr_assert_gt(sampled, 50, "jemalloc sampled %" PRIu64 " of the burst's 128", sampled);
	cr_assert_eq(live, 0);

	n = hb_read_file(out, &buf);
	cr_assert_gt(n, 0);
	cr_assert_eq(pprof_decode((uint8_t *)buf, n, &p), 0);
	free(buf);
	cr_assert_eq(site_label(p, "burst_buffers", "freed"), (int64_t)sampled);
	/* the shortest possible lifetime is the hold; the median is read from a 1/16 bucket */
	cr_assert_geq(site_label(p, "burst_buffers", "lifetime_max"), 300000000);
	cr_assert_geq(site_label(p, "burst_buffers", "lifetime_p50"), 300000000 - 300000000 / 16);
	perftools__profiles__profile__free_unpacked(p, NULL);
}
