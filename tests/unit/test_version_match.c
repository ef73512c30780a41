// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every jemalloc in the wild: how a version string matches the layout table
 * (a release string exactly; Redis's X.Y.Z-0-g0 and dev builds'
 * X.Y.Z-N-g<hash> by their number), the version string found in a block of
 * bytes, the layout built from DWARF alone, and the self-check of the first
 * samples against synthetic events (docs/jemalloc.md).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "symbols/elfobj.h"
#include "jemalloc/layout.h"
#include "jemalloc/layout_dwarf.h"
#include "jedwarf.h"
#include "sampling/selfcheck.h"
#include "jemalloc/target.h"

#define R530 "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"
#define R521 "5.2.1-0-gea6b3e973b477b8061e0076bb257dbd7f3faa756"

/* ---- the version string against the table ------------------------------------ */

struct match_case {
	const char *version;
	enum jemalloc_match how;
	const char *layout; /* NULL: none */
};

Test(version_match, each_shape)
{
	static const struct match_case cases[] = {
		/* the release strings: exact, no confirmation needed */
		{ R530, JEMALLOC_MATCH_EXACT, "5.3.0" },
		{ R521, JEMALLOC_MATCH_EXACT, "5.2.1" },
		/* Redis's --with-version: the number only */
		{ "5.3.0-0-g0", JEMALLOC_MATCH_NUMBER, "5.3.0" },
		{ "5.2.1-0-g0", JEMALLOC_MATCH_NUMBER, "5.2.1" },
		{ "5.3.1-0-g0", JEMALLOC_MATCH_NUMBER, "5.3.1" },
		/* dev builds: commits after the tag, abbreviated or full commit id */
		{ "5.3.0-12-gdeadbee", JEMALLOC_MATCH_NUMBER, "5.3.0" },
		{ "5.3.0-0-g0123456789abcdef0123456789abcdef01234567", JEMALLOC_MATCH_NUMBER,
		  "5.3.0" },
		{ "5.3.0-1-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c", JEMALLOC_MATCH_NUMBER,
		  "5.3.0" },
		/* 5.3.1's release string (tested on its real build) */
		{ "5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce8", JEMALLOC_MATCH_EXACT,
		  "5.3.1" },
		/* another commit's whole id: only the number */
		{ "5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce9", JEMALLOC_MATCH_NUMBER,
		  "5.3.1" },
		/* numbers without an entry: only DWARF can tell their layout */
		{ "5.3.7-12-gdeadbee", JEMALLOC_MATCH_NONE, NULL },
		{ "5.4.0-0-g0000000000000000000000000000000000000000", JEMALLOC_MATCH_NONE, NULL },
		{ "15.3.0-0-g0", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.10-0-g0", JEMALLOC_MATCH_NONE, NULL },
		/* other shapes */
		{ "5.3.0", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0-0", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0-0-g", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0-0-gxyz", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0-0-g0 ", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0-0-gDEADBEE", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0--0-g0", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3-0-g0", JEMALLOC_MATCH_NONE, NULL },
		{ "5.3.0-0-g0123456789abcdef0123456789abcdef012345678", JEMALLOC_MATCH_NONE, NULL },
		{ "unknown", JEMALLOC_MATCH_NONE, NULL },
		{ "", JEMALLOC_MATCH_NONE, NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum jemalloc_match how = JEMALLOC_MATCH_EXACT;
		const struct jemalloc_layout *l = jemalloc_layout_match(cases[i].version, &how);

		cr_assert_eq(how, cases[i].how, "%s: matched %d, want %d", cases[i].version, how,
			     cases[i].how);
		if (!cases[i].layout) {
			cr_assert_null(l, "%s: matched %s", cases[i].version, l ? l->name : "");
			continue;
		}
		cr_assert_not_null(l, "%s", cases[i].version);
		cr_assert_str_eq(l->name, cases[i].layout, "%s", cases[i].version);
		cr_assert_eq(l, jemalloc_layout_by_name(cases[i].layout));
	}
}

Test(version_match, number)
{
	char num[16];

	cr_assert_eq(jemalloc_layout_version_number("5.3.0-0-g0", num, sizeof(num)), 0);
	cr_assert_str_eq(num, "5.3.0");
	cr_assert_eq(jemalloc_layout_version_number("10.21.300-1234-gabc", num, sizeof(num)), 0);
	cr_assert_str_eq(num, "10.21.300");
	/* a number longer than the buffer is refused, never cut */
	cr_assert_eq(jemalloc_layout_version_number("10.21.300-1234-gabc", num, 9), -EINVAL);
	cr_assert_eq(jemalloc_layout_version_number("5.3.0-0-g0x", num, sizeof(num)), -EINVAL);
}

/* ---- the version string inside an object's bytes ------------------------------ */

static const char *scan(const char *buf, size_t len, size_t *n)
{
	*n = 0;
	return elfobj_jemalloc_version_scan(buf, len, n);
}

Test(version_match, scan_new_shapes)
{
	static const char *const good[] = { "5.3.0-0-g0", "5.2.1-0-g0", "5.3.7-12-gdeadbee",
					    "5.3.0-3-g0123456789abcdef0123456789abcdef01234567" };
	const char *m;
	size_t n;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char buf[128];
		size_t len = (size_t)snprintf(buf, sizeof(buf), "x%c%s", '\0', good[i]) + 1;

		m = scan(buf, len, &n);
		cr_assert_eq(m, buf + 2, "%s", good[i]);
		cr_assert_eq(n, strlen(good[i]), "%s", good[i]);
	}
	/* an abbreviated id must end in its NUL: the end of the block could cut it */
	cr_assert_null(scan("5.3.0-0-g0", strlen("5.3.0-0-g0"), &n));
	cr_assert_null(scan("5.3.0-0-gdeadbeez", sizeof("5.3.0-0-gdeadbeez"), &n));
	cr_assert_null(scan("5.3.0-0-g", sizeof("5.3.0-0-g"), &n));
	cr_assert_null(scan("text-g0", sizeof("text-g0"), &n));
}

/* ---- a layout from DWARF alone ------------------------------------------------ */

/* What the DWARF of each shape describes (the facts of docs/jemalloc.md). */
static struct jemalloc_dwarf dwarf_521(void)
{
	return (struct jemalloc_dwarf){
		.tctx_gctx = 56,
		.gctx_bt = 72,
		.bt_vec = 0,
		.bt_len = 8,
		.info_time = -1,
		.info_tctx = -1,
		.info_size = -1,
		.alloc_ptr = 1,
		.alloc_size = -1,
		.alloc_usize = 2,
		.alloc_tctx = 3,
		.free_ptr = 1,
		.free_usize = 2,
		.free_info = -1,
		.free_tctx = 3,
		.have_alloc_fn = true,
		.have_free_fn = true,
		.have_nstime = true,
	};
}

static void from_dwarf_ok(const struct jemalloc_dwarf *d, const char *sym,
			  struct jemalloc_layout *out)
{
	char why[256] = "";

	cr_assert_eq(layout_dwarf_layout(d, sym, out, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(out->active_sym, sym);
	/* whatever it built agrees with the DWARF it came from */
	cr_assert_eq(layout_dwarf_check(out, d, why, sizeof(why)), 0, "%s", why);
}

Test(layout_from_dwarf, each_shape_equals_the_table)
{
	struct jemalloc_dwarf d = hb_dwarf_530();
	struct jemalloc_layout l, dbg;

	from_dwarf_ok(&d, "prof_active_state", &l);
	cr_assert_eq(memcmp(&l.bpf, &jemalloc_layout_by_name("5.3.0")->bpf, sizeof(l.bpf)), 0);
	cr_assert_not(l.late_active_bug);
	cr_assert_null(l.activity_fn);

	/* 5.3.1: the free hook gets the pointer back */
	d.free_ptr = 1;
	d.free_usize = 2;
	d.free_info = 3;
	from_dwarf_ok(&d, "prof_active_state", &l);
	cr_assert_eq(memcmp(&l.bpf, &jemalloc_layout_by_name("5.3.1")->bpf, sizeof(l.bpf)), 0);

	/* a debug build's DWARF already has the shifted prof_info_t */
	d = hb_dwarf_530();
	d.info_tctx = 16;
	d.info_size = 24;
	d.nstime_magic = true;
	from_dwarf_ok(&d, "prof_active_state", &l);
	jemalloc_layout_debug(jemalloc_layout_by_name("5.3.0"), &dbg);
	cr_assert_eq(memcmp(&l.bpf, &dbg.bpf, sizeof(l.bpf)), 0);

	/* 5.2.1: the tctx to the free hook, and the late-activation bug with it */
	d = dwarf_521();
	from_dwarf_ok(&d, "prof_active", &l);
	cr_assert_eq(memcmp(&l.bpf, &jemalloc_layout_by_name("5.2.1")->bpf, sizeof(l.bpf)), 0);
	cr_assert(l.late_active_bug);
	cr_assert_str_eq(l.activity_fn, "malloc_default");
}

Test(layout_from_dwarf, refuses_what_it_cannot_read)
{
	struct jemalloc_dwarf d;
	struct jemalloc_layout l;
	char why[256];

	d = hb_dwarf_530();
	d.have_free_fn = false;
	cr_assert_eq(layout_dwarf_layout(&d, "prof_active_state", &l, why, sizeof(why)), -EPROTO);
	cr_assert(strstr(why, "prof_free_sampled_object"), "%s", why);

	d = hb_dwarf_530();
	d.tctx_gctx = -1; /* types not described (-g1) */
	cr_assert_eq(layout_dwarf_layout(&d, "prof_active_state", &l, why, sizeof(why)), -EPROTO);
	cr_assert(strstr(why, "prof_tctx_t.gctx"), "%s", why);

	d = hb_dwarf_530();
	d.info_size = -1;
	cr_assert_eq(layout_dwarf_layout(&d, "prof_active_state", &l, why, sizeof(why)), -EPROTO);
	cr_assert(strstr(why, "prof_info_t"), "%s", why);

	d = hb_dwarf_530();
	d.alloc_tctx = 7; /* on the stack: not a register the probe reads */
	cr_assert_eq(layout_dwarf_layout(&d, "prof_active_state", &l, why, sizeof(why)), -EPROTO);

	d = dwarf_521();
	d.free_tctx = -1;
	cr_assert_eq(layout_dwarf_layout(&d, "prof_active", &l, why, sizeof(why)), -EPROTO);
}

/* ---- the self-check of the first samples ---------------------------------------- */

#define CODE	0x400000ULL /* r-xp */
#define DATA	0x600000ULL /* rw-p: objects and tctxs */
#define NOWHERE 0x900000ULL

struct fake {
	struct proc_map v[2];
	struct proc_maps maps;
	struct jemalloc_layout layout;
	struct jemalloc_target t;
	struct selfcheck *sc;
};

static void fake_init(struct fake *f, const char *layout, pid_t pid)
{
	memset(f, 0, sizeof(*f));
	f->v[0] = (struct proc_map){ .start = CODE, .end = CODE + 0x100000, .perms = "r-xp" };
	f->v[1] = (struct proc_map){ .start = DATA, .end = DATA + 0x100000, .perms = "rw-p" };
	f->maps = (struct proc_maps){ .pid = pid, .v = f->v, .n = 2 };
	f->layout = *jemalloc_layout_by_name(layout);
	f->t.pid = pid;
	f->t.maps = &f->maps;
	f->t.layout = &f->layout;
	f->t.path = (char *)"/srv/app";
	snprintf(f->t.version, sizeof(f->t.version), "%s-0-g0", layout);
	/* attached at 1 s of jemalloc's clock */
	cr_assert_eq(selfcheck__new(&f->t, 1000000000ULL, &f->sc), 0);
}

static struct heapbpf_alloc_event alloc_ev(uint64_t i)
{
	struct heapbpf_alloc_event e = {
		.type = HEAPBPF_EV_ALLOC,
		.nframes = 3,
		.bt_len = 3,
		.ptr = DATA + 0x1000 + i * 0x100,
		.size = 100,
		.usize = 112,
		.tctx = DATA + 0x80000 + (i % 4) * 0x40,
		.frames = { CODE + 0x10, CODE + 0x200, CODE + 0x3000 },
	};

	return e;
}

static struct heapbpf_free_event free_ev(uint64_t i)
{
	struct heapbpf_free_event e = {
		.type = HEAPBPF_EV_FREE,
		.usize = 112,
		.tctx = DATA + 0x80000 + (i % 4) * 0x40,
		.alloc_time_ns = 2000000000ULL,
		.alloc_size = 100,
	};

	return e;
}

static int feed_alloc(struct fake *f, const struct heapbpf_alloc_event *e)
{
	return selfcheck__event(f->sc, e, HEAPBPF_ALLOC_EVENT_SIZE(e->nframes));
}

static int feed_free(struct fake *f, const struct heapbpf_free_event *e)
{
	return selfcheck__event(f->sc, e, sizeof(*e));
}

Test(selfcheck, fitting_samples_confirm_once)
{
	struct fake f;
	int ones = 0;

	fake_init(&f, "5.3.0", 0);
	for (uint64_t i = 0; i < SELFCHECK_ALLOCS; i++) {
		struct heapbpf_alloc_event a = alloc_ev(i);

		ones += feed_alloc(&f, &a) == 1;
	}
	cr_assert_not(selfcheck__confirmed(f.sc), "confirmed before any free");
	for (uint64_t i = 0; i < SELFCHECK_FREES + 3; i++) {
		struct heapbpf_free_event e = free_ev(i);
		int rc = feed_free(&f, &e);

		cr_assert_geq(rc, 0);
		ones += rc == 1;
	}
	cr_assert_eq(ones, 1, "confirmation said %d times", ones);
	cr_assert(selfcheck__confirmed(f.sc));
	cr_assert_null(selfcheck__why(f.sc));
	selfcheck__free(f.sc);
}

/* Each way a wrong layout shows in the first samples, and the words that say so. */
Test(selfcheck, each_misfit_refused)
{
	static const struct {
		const char *what;
		int field;
		uint64_t value;
	} allocs[] = {
		{ "faulted", 0, HEAPBPF_F_READ_FAULT },
		{ "0 frames long", 1, 0 },
		{ "lies in no executable mapping", 2, DATA + 8 },
		{ "lies in no executable mapping", 2, NOWHERE },
		{ "pointer 0x900000 lies in no writable mapping", 3, NOWHERE },
		{ "pointer 0x400100 lies in no writable mapping", 3, CODE + 0x100 },
		{ "tctx 0x1 lies in no writable mapping", 4, 1 },
		{ "usable size reads 0", 5, 0 },
	};

	for (size_t k = 0; k < sizeof(allocs) / sizeof(allocs[0]); k++) {
		struct heapbpf_alloc_event a = alloc_ev(0);
		struct fake f;
		const char *why;

		fake_init(&f, "5.3.0", 0);
		switch (allocs[k].field) {
		case 0:
			a.flags = (__u32)allocs[k].value;
			break;
		case 1:
			a.bt_len = a.nframes = (__u32)allocs[k].value;
			break;
		case 2:
			a.frames[1] = allocs[k].value;
			break;
		case 3:
			a.ptr = allocs[k].value;
			break;
		case 4:
			a.tctx = allocs[k].value;
			break;
		default:
			a.usize = allocs[k].value;
			break;
		}
		cr_assert_eq(feed_alloc(&f, &a), -EPROTO, "case %zu", k);
		why = selfcheck__why(f.sc);
		cr_assert_not_null(why);
		cr_assert(strstr(why, allocs[k].what), "case %zu: %s", k, why);
		cr_assert(strstr(why, "jemalloc 5.3.0-0-g0 in pid 0 (/srv/app) does not fit "
				      "heapbpf's 5.3.0 layout"),
			  "%s", why);
		cr_assert_null(strchr(why, '\n'));
		/* refused for good: later events, fitting or not, too */
		a = alloc_ev(1);
		cr_assert_eq(feed_alloc(&f, &a), -EPROTO);
		selfcheck__free(f.sc);
	}
}

Test(selfcheck, backtrace_longer_than_jemalloc_keeps)
{
	struct heapbpf_alloc_event a = alloc_ev(0);
	struct fake f;

	fake_init(&f, "5.3.0", 0);
	a.bt_len = 4096; /* a misread prof_bt_t.len: BPF clamped the frames */
	a.nframes = HEAPBPF_MAX_FRAMES;
	for (int i = 0; i < HEAPBPF_MAX_FRAMES; i++)
		a.frames[i] = CODE + 0x10;
	cr_assert_eq(feed_alloc(&f, &a), -EPROTO);
	cr_assert(strstr(selfcheck__why(f.sc), "4096 frames long"));
	selfcheck__free(f.sc);
}

/* 5.3.1's prof_bt_max: 300 frames, of which BPF kept the innermost 128, fit; absurd ones not */
Test(selfcheck, backtrace_above_128_fits_531_prof_bt_max)
{
	struct heapbpf_alloc_event a = alloc_ev(0);
	struct fake f;

	fake_init(&f, "5.3.1", 0);
	a.bt_len = 300;
	a.nframes = HEAPBPF_MAX_FRAMES;
	a.flags |= HEAPBPF_F_TRUNCATED;
	for (int i = 0; i < HEAPBPF_MAX_FRAMES; i++)
		a.frames[i] = CODE + 0x10;
	cr_assert_eq(feed_alloc(&f, &a), 0, "%s", selfcheck__why(f.sc));
	/* fewer frames than the length says would be a misread */
	a.nframes = 100;
	cr_assert_eq(feed_alloc(&f, &a), -EPROTO);
	cr_assert(strstr(selfcheck__why(f.sc), "300 frames long"));
	selfcheck__free(f.sc);

	fake_init(&f, "5.3.1", 0);
	a.bt_len = 1U << 21;
	a.nframes = HEAPBPF_MAX_FRAMES;
	cr_assert_eq(feed_alloc(&f, &a), -EPROTO);
	selfcheck__free(f.sc);
}

Test(selfcheck, free_side_against_allocation_side)
{
	struct heapbpf_alloc_event a = alloc_ev(0);
	struct heapbpf_free_event e;
	struct fake f;

	/* 5.3.0: a free's tctx no allocation showed, timed after attach */
	fake_init(&f, "5.3.0", 0);
	cr_assert_eq(feed_alloc(&f, &a), 0);
	e = free_ev(1);
	cr_assert_eq(feed_free(&f, &e), -EPROTO);
	cr_assert(strstr(selfcheck__why(f.sc), "belongs to no sampled allocation"));
	selfcheck__free(f.sc);

	/* the same, timed before attach: an object sampled earlier, not a misfit */
	fake_init(&f, "5.3.0", 0);
	e = free_ev(1);
	e.alloc_time_ns = 500000000ULL;
	cr_assert_eq(feed_free(&f, &e), 0);
	/* a requested size beyond the usable one: a misread prof_info_t */
	e = free_ev(0);
	e.alloc_size = 4096;
	cr_assert_eq(feed_free(&f, &e), -EPROTO);
	cr_assert(strstr(selfcheck__why(f.sc), "requested size of 4096"));
	selfcheck__free(f.sc);

	/* 5.3.1: by pointer; the same object freed with another usable size */
	fake_init(&f, "5.3.1", 0);
	cr_assert_eq(feed_alloc(&f, &a), 0);
	e = free_ev(0);
	e.ptr = a.ptr;
	cr_assert_eq(feed_free(&f, &e), 0);
	e.usize = 224;
	e.alloc_size = 200;
	cr_assert_eq(feed_free(&f, &e), -EPROTO);
	cr_assert(strstr(selfcheck__why(f.sc), "another usable size or tctx"));
	selfcheck__free(f.sc);

	/* 5.3.1's layout on 5.3.0's hook: the "pointer" is the usable size */
	fake_init(&f, "5.3.1", 0);
	e = free_ev(0);
	e.ptr = 112;
	cr_assert_eq(feed_free(&f, &e), -EPROTO);
	cr_assert(strstr(selfcheck__why(f.sc), "pointer 0x70 lies in no writable mapping"));
	selfcheck__free(f.sc);
}

Test(selfcheck, other_processes_and_records_ignored)
{
	struct heapbpf_alloc_event a = alloc_ev(0);
	struct heapbpf_proc_event p = { .type = HEAPBPF_EV_FORK, .pid = 4242, .child = 4243 };
	struct fake f;

	fake_init(&f, "5.3.0", 4242);
	a.pid = 4243; /* a followed child: not what the check looks at */
	a.flags = HEAPBPF_F_READ_FAULT;
	cr_assert_eq(feed_alloc(&f, &a), 0);
	cr_assert_eq(selfcheck__event(f.sc, &p, sizeof(p)), 0);
	cr_assert_eq(selfcheck__event(f.sc, &p, 3), 0);
	/* a record shorter than its frames is the collector's to count as malformed */
	a.pid = 4242;
	a.nframes = 100;
	cr_assert_eq(selfcheck__event(f.sc, &a, HEAPBPF_ALLOC_EVENT_SIZE(3)), 0);
	cr_assert_null(selfcheck__why(f.sc));
	selfcheck__free(f.sc);
}
