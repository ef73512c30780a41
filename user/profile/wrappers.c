// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "util/hashmap.h"
#include "profile/wrappers.h"

/*
 * The well-known allocator wrappers, matched like --wrapper patterns
 * against the raw and the demangled name. Each only hands the request on
 * to malloc (or a pool or slab over it): the site is whoever called it.
 */
static const char *const builtin[] = {
	/* Redis (zmalloc.c, sds.c) */
	"zmalloc",
	"zmalloc_usable",
	"zmalloc_no_tcache",
	"zcalloc",
	"zcalloc_usable",
	"zcalloc_num",
	"zrealloc",
	"zrealloc_usable",
	"ztry*alloc*",
	"zstrdup",
	"sdsnewlen",
	"_sdsnewlen",
	"sdstrynewlen",
	"sdsnew",
	"sdsempty",
	"sdsdup",
	"sdsMakeRoomFor",
	"_sdsMakeRoomFor",
	"sdsMakeRoomForNonGreedy",
	/* gnulib, git, and many others' x* */
	"xmalloc",
	"xcalloc",
	"xzalloc",
	"xrealloc",
	"xreallocarray",
	"xnmalloc",
	"x2nrealloc",
	"xstrdup",
	"xstrndup",
	"xmemdup",
	/* GLib */
	"g_malloc*",
	"g_try_malloc*",
	"g_realloc*",
	"g_try_realloc*",
	"g_slice_alloc*",
	"g_memdup*",
	"g_strdup",
	"g_strndup",
	"g_aligned_alloc*",
	/* nginx */
	"ngx_alloc",
	"ngx_calloc",
	"ngx_memalign",
	"ngx_palloc",
	"ngx_pnalloc",
	"ngx_pcalloc",
	"ngx_pmemalign",
	"ngx_palloc_small",
	"ngx_palloc_large",
	"ngx_palloc_block",
	/* OpenSSL */
	"CRYPTO_malloc",
	"CRYPTO_zalloc",
	"CRYPTO_realloc",
	"CRYPTO_clear_realloc",
	"CRYPTO_strdup",
	"CRYPTO_strndup",
	"CRYPTO_memdup",
	/* C++: operator new and new[] (any overload), raw and demangled; std::allocator */
	"_Znw*",
	"_Zna*",
	"operator new*",
	"std::__new_allocator<*>::allocate*",
	"__gnu_cxx::new_allocator<*>::allocate*",
	"std::allocator<*>::allocate*",
	"std::allocator_traits<*>::allocate*",
	/* Rust: the global allocator's shims, alloc::alloc, RawVec, GlobalAlloc impls */
	"__rust_alloc*",
	"__rust_realloc",
	"__rdl_alloc*",
	"__rdl_realloc",
	"__rg_alloc*",
	"__rg_realloc",
	"alloc::alloc::*",
	"<alloc::alloc::Global*",
	"alloc::raw_vec::*",
	"<alloc::raw_vec::*",
	"<* as core::alloc::global::GlobalAlloc>::*",
	"<* as core::alloc::Allocator>::allocate*",
	"<* as core::alloc::Allocator>::grow*",
};

bool wrappers_match(const char *pattern, const char *name)
{
	return name && (strcmp(pattern, name) == 0 || fnmatch(pattern, name, 0) == 0);
}

bool wrappers_builtin(const char *name)
{
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
		if (wrappers_match(builtin[i], name))
			return true;
	}
	return false;
}

/* One function of the profile: the outermost line of one or more locations. */
struct fn {
	const char *name, *sys; /* display (demangled) and raw name */
	bool named;		/* by rule 1: built-in or --wrapper */
	bool found;		/* by rule 2, from the samples */
	bool symbolized;	/* rule 2 applies */
	bool bad;		/* this pass: seen other than directly above the allocator */
	uint8_t ncallers;	/* this pass: distinct callers seen, up to WRAPPERS_MIN_CALLERS */
	uint32_t callers[WRAPPERS_MIN_CALLERS];
	size_t stamp;	      /* sample index + 1 it was last counted for */
	int64_t inuse, alloc; /* of the samples whose site was named past it */
};

struct pass {
	struct hb_profile *p;
	struct fn *fns;
	size_t nfns;
	uint32_t *fn_of; /* location -> function */
};

static bool is_wrapper(const struct fn *f)
{
	return f->named || f->found;
}

/* report.c's names for frames without a symbol: "[no stack]", "obj+0x1f0", "0x7f...", "??" */
static bool symbolized(const char *name)
{
	return name[0] && name[0] != '[' && strncmp(name, "0x", 2) != 0 && !strstr(name, "+0x") &&
	       strcmp(name, "??") != 0;
}

static bool named_one(const char *name, const char *const *patterns, size_t npatterns)
{
	if (wrappers_builtin(name))
		return true;
	for (size_t i = 0; i < npatterns; i++) {
		if (wrappers_match(patterns[i], name))
			return true;
	}
	return false;
}

/*
 * By its name, or a C symbol's name without what the compiler or linker
 * appended: GCC's clones (_sdsnewlen.constprop.0, .isra.0, .part.0,
 * .lto_priv.0, .cold) and symbol versions (@@GLIBC_2.2.5).
 */
static bool named_wrapper(const char *name, const char *const *patterns, size_t npatterns)
{
	size_t n = strcspn(name, ".@");
	char base[256];

	if (named_one(name, patterns, npatterns))
		return true;
	if (!n || !name[n] || n >= sizeof(base) || strpbrk(name, ":(< "))
		return false;
	memcpy(base, name, n);
	base[n] = '\0';
	return named_one(base, patterns, npatterns);
}

/* Every location's function, by its outermost line's display name. */
static int index_functions(struct pass *ps, const char *const *patterns, size_t npatterns)
{
	struct hb_profile *p = ps->p;
	struct hashmap by_name = { 0 };
	int err = 0;

	for (size_t i = 0; i < p->nlocations && !err; i++) {
		const struct hb_location *l = &p->locations[i];
		const struct hb_line *ln = l->nlines ? &l->lines[l->nlines - 1] : NULL;
		/* a frame without a function name is never a wrapper: "??" stands for it */
		const char *name = ln && ln->function ? ln->function : "??";
		uint64_t h = hashmap_hash_str(name);
		size_t it = 0;
		uint32_t f;
		bool seen = false;

		while (!seen && hashmap__next(&by_name, h, &it, &f))
			seen = ps->fns[f].name && strcmp(ps->fns[f].name, name) == 0;
		if (!seen) {
			f = (uint32_t)ps->nfns++;
			ps->fns[f] = (struct fn){
				.name = name,
				.sys = ln ? ln->system_name : NULL,
				.symbolized = ln && symbolized(name),
			};
			ps->fns[f].named = named_wrapper(name, patterns, npatterns) ||
					   (ps->fns[f].sys && ps->fns[f].sys != name &&
					    named_wrapper(ps->fns[f].sys, patterns, npatterns));
			err = hashmap__add(&by_name, h, f);
		}
		ps->fn_of[i] = f;
	}
	hashmap__clear(&by_name);
	return err;
}

/* The first frame of s outside the wrappers known so far; s->nlocs when all are. */
static uint32_t first_outside(const struct pass *ps, const struct hb_sample *s)
{
	uint32_t k = 0;

	while (k < s->nlocs && is_wrapper(&ps->fns[ps->fn_of[s->locs[k]]]))
		k++;
	return k;
}

static void note_caller(struct fn *f, uint32_t caller)
{
	for (uint8_t i = 0; i < f->ncallers; i++) {
		if (f->callers[i] == caller)
			return;
	}
	if (f->ncallers < WRAPPERS_MIN_CALLERS)
		f->callers[f->ncallers++] = caller;
}

/* One pass of rule 2 over every sample; true when it found a wrapper. */
static bool find_pass(struct pass *ps)
{
	bool changed = false;

	for (size_t i = 0; i < ps->nfns; i++) {
		ps->fns[i].bad = false;
		ps->fns[i].ncallers = 0;
	}
	for (size_t i = 0; i < ps->p->nsamples; i++) {
		const struct hb_sample *s = &ps->p->samples[i];
		uint32_t k = first_outside(ps, s);

		/* the first frame outside: called from the next one; any later one calls more */
		for (uint32_t j = k; j < s->nlocs; j++) {
			struct fn *f = &ps->fns[ps->fn_of[s->locs[j]]];

			if (j > k) {
				if (!is_wrapper(f))
					f->bad = true;
			} else if (k + 1 < s->nlocs) {
				note_caller(f, ps->fn_of[s->locs[k + 1]]);
			}
		}
	}
	for (size_t i = 0; i < ps->nfns; i++) {
		struct fn *f = &ps->fns[i];

		if (!is_wrapper(f) && f->symbolized && !f->bad &&
		    f->ncallers >= WRAPPERS_MIN_CALLERS) {
			f->found = true;
			changed = true;
		}
	}
	return changed;
}

static int cmp_skipped(const void *a, const void *b)
{
	const struct fn *x = *(const struct fn *const *)a, *y = *(const struct fn *const *)b;

	if (x->inuse != y->inuse)
		return x->inuse > y->inuse ? -1 : 1;
	if (x->alloc != y->alloc)
		return x->alloc > y->alloc ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* p->wrappers: every function some site was named past, most in use first. */
static int list_skipped(struct pass *ps, const uint32_t *site)
{
	struct hb_profile *p = ps->p;
	struct fn **v;
	size_t n = 0;
	char **names;

	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];

		for (uint32_t j = 0; j < site[i]; j++) {
			struct fn *f = &ps->fns[ps->fn_of[s->locs[j]]];

			if (f->stamp == i + 1)
				continue;
			f->stamp = i + 1;
			f->inuse += s->v[HB_INUSE_SPACE];
			f->alloc += s->v[HB_ALLOC_SPACE];
		}
	}
	v = calloc(ps->nfns ? ps->nfns : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < ps->nfns; i++) {
		if (ps->fns[i].stamp)
			v[n++] = &ps->fns[i];
	}
	qsort(v, n, sizeof(*v), cmp_skipped);
	names = calloc(n ? n : 1, sizeof(*names));
	for (size_t i = 0; names && i < n; i++) {
		names[i] = strdup(v[i]->name);
		if (!names[i]) {
			while (i--)
				free(names[i]);
			free(names);
			names = NULL;
		}
	}
	free(v);
	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < p->nwrappers; i++)
		free(p->wrappers[i]);
	free(p->wrappers);
	p->wrappers = n ? names : NULL;
	p->nwrappers = n;
	if (!n)
		free(names);
	return 0;
}

int wrappers_apply(struct hb_profile *p, const char *const *patterns, size_t npatterns)
{
	struct pass ps = { .p = p };
	uint32_t *site = calloc(p->nsamples ? p->nsamples : 1, sizeof(*site));
	int err;

	ps.fns = calloc(p->nlocations ? p->nlocations : 1, sizeof(*ps.fns));
	ps.fn_of = calloc(p->nlocations ? p->nlocations : 1, sizeof(*ps.fn_of));
	err = !site || !ps.fns || !ps.fn_of ? -ENOMEM : 0;
	err = err ?: index_functions(&ps, patterns, npatterns);
	/* each pass that changes something adds a function: at most one pass per function */
	while (!err && find_pass(&ps))
		;
	for (size_t i = 0; !err && i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];
		uint32_t k = first_outside(&ps, s);

		/* nothing but wrappers: the outermost, nearest to whoever called them */
		site[i] = k < s->nlocs ? k : s->nlocs ? s->nlocs - 1 : 0;
	}
	err = err ?: list_skipped(&ps, site);
	for (size_t i = 0; !err && i < p->nsamples; i++)
		p->samples[i].site = site[i];
	free(site);
	free(ps.fns);
	free(ps.fn_of);
	return err;
}

const struct hb_line *wrappers_site_line(const struct hb_profile *p, const struct hb_sample *s)
{
	const struct hb_location *l;
	uint32_t k = s->site < s->nlocs ? s->site : 0;

	if (!s->nlocs || s->locs[k] >= p->nlocations)
		return NULL;
	l = &p->locations[s->locs[k]];
	return l->nlines ? &l->lines[l->nlines - 1] : NULL;
}

const char *wrappers_site_name(const struct hb_profile *p, const struct hb_sample *s)
{
	const struct hb_line *ln = wrappers_site_line(p, s);

	return ln ? ln->function : "?";
}

int wrappers_text(char *buf, size_t len, const struct hb_profile *p)
{
	char name[HB_CLEAN_SIZE(256)];
	size_t used;

	if (!p->nwrappers)
		return -ENOENT;
	used = (size_t)snprintf(buf, len, "sites named past allocator wrappers: ");
	for (size_t i = 0; i < p->nwrappers && i < WRAPPERS_TEXT_NAMES && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
					 hb_clean(name, sizeof(name), p->wrappers[i]));
	if (p->nwrappers > WRAPPERS_TEXT_NAMES && used < len)
		used += (size_t)snprintf(buf + used, len - used, " and %zu more",
					 p->nwrappers - WRAPPERS_TEXT_NAMES);
	if (used < len)
		snprintf(buf + used, len - used, " (--wrapper adds more)");
	return 0;
}
