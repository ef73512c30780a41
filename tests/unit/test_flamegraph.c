// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flame graph page: the tree heapbpf merges (paths, sizes, order, lines,
 * inlined frames, processes), the title, the escaping of every string that
 * goes into the page, and -f html through the command line and the sink.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "profile/flamegraph.h"
#include "export/sink.h"
#include "export/snapshot.h"
#include "harness.h"

/* A location: its lines' functions callee first (no name: an unsymbolized address), lines. */
struct loc_spec {
	const char *fn[3];
	int64_t line[3];
};

struct sample_spec {
	uint32_t nlocs;
	uint32_t locs[4]; /* leaf first */
	int64_t v[HB_NVALUES];
	int64_t pid;
};

/* The profile and the tree of the running test, freed after it. */
static struct hb_profile *prof;
static struct flamegraph *fg;

static void teardown(void)
{
	flamegraph__free(fg);
	hb_profile__free(prof);
	fg = NULL;
	prof = NULL;
}

TestSuite(flamegraph, .fini = teardown);

/* Builds the test's profile (the previous one, and its tree, freed). */
static struct hb_profile *make(const struct loc_spec *ls, size_t nl, const struct sample_spec *ss,
			       size_t ns)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));

	teardown();
	prof = p;

	p->period = 524288;
	p->nlocations = nl;
	p->locations = hb_xcalloc(nl, sizeof(*p->locations));
	for (size_t i = 0; i < nl; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x401000 + 0x10 * i;
		while (l->nlines < 3 && ls[i].fn[l->nlines])
			l->nlines++;
		l->lines = hb_xcalloc(l->nlines, sizeof(*l->lines));
		for (uint32_t j = 0; j < l->nlines; j++) {
			l->lines[j].function = hb_xstrdup(ls[i].fn[j]);
			l->lines[j].file = hb_xstrdup("src/app.c");
			l->lines[j].line = ls[i].line[j];
		}
	}
	p->nsamples = ns;
	p->samples = hb_xcalloc(ns, sizeof(*p->samples));
	for (size_t i = 0; i < ns; i++) {
		struct hb_sample *s = &p->samples[i];

		s->nlocs = ss[i].nlocs;
		s->locs = hb_xcalloc(s->nlocs, sizeof(*s->locs));
		memcpy(s->locs, ss[i].locs, s->nlocs * sizeof(*s->locs));
		memcpy(s->v, ss[i].v, sizeof(s->v));
		s->pid = ss[i].pid;
	}
	return p;
}

/* The tree of the test's profile for @which (the previous one freed). */
static struct flamegraph *tree(enum hb_value which)
{
	flamegraph__free(fg);
	fg = NULL;
	cr_assert_eq(flamegraph__new(prof, which, &fg), 0);
	return fg;
}

/* The child of node @parent named @name (the first, in sibling order), or -1. */
static long child(const struct flamegraph *fg, size_t parent, const char *name)
{
	struct fg_node_info n;

	for (size_t i = 1; i < flamegraph__nnodes(fg); i++) {
		flamegraph__node(fg, i, &n);
		if (n.parent == parent && strcmp(n.name, name) == 0)
			return (long)i;
	}
	return -1;
}

/* The node at the end of a ';'-separated path of names from the root, asserting it exists. */
static struct fg_node_info at(const struct flamegraph *fg, const char *path)
{
	char *copy = hb_xstrdup(path), *save, *name;
	struct fg_node_info n;
	long i = 0;

	for (name = strtok_r(copy, ";", &save); name; name = strtok_r(NULL, ";", &save)) {
		i = child(fg, (size_t)i, name);
		cr_assert_geq(i, 0, "no frame %s on the path %s", name, path);
	}
	free(copy);
	flamegraph__node(fg, (size_t)i, &n);
	return n;
}

/* The page of the test's profile for @which, as a string. */
static char *page(enum hb_value which)
{
	FILE *t = tmpfile();
	char *text;
	long len;

	cr_assert_not_null(t);
	cr_assert_eq(flamegraph_write(prof, which, t), 0);
	len = ftell(t);
	cr_assert_gt(len, 0);
	text = hb_xcalloc(len + 1, 1);
	rewind(t);
	cr_assert_eq(fread(text, 1, len, t), (size_t)len);
	fclose(t);
	return text;
}

/* Every one of @want (NULL-terminated) is in @html. */
static void assert_all_in(const char *html, const char *const *want)
{
	for (; *want; want++)
		cr_assert(strstr(html, *want), "no \"%s\" in the page:\n%s", *want, html);
}

static size_t occurrences(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *s = strstr(hay, needle); s; s = strstr(s + 1, needle))
		n++;
	return n;
}

/*
 * main -> handler (two addresses in one function) -> alloc_a, twice
 * main -> handler -> alloc_b
 * main -> alloc_b (another path to the same function)
 * main -> parse, with decode (inlined into parse) -> alloc_c (inlined into decode)
 */
static const struct loc_spec locs[] = {
	{ { "alloc_a" }, { 11 } }, /* 0 */
	{ { "handler" }, { 20 } }, /* 1 */
	{ { "handler" }, { 25 } }, /* 2: the same function, another line */
	{ { "main" }, { 5 } },	   /* 3 */
	{ { "alloc_b" }, { 31 } }, /* 4 */
	{ { "alloc_c", "decode", "parse" }, { 41, 42, 43 } }, /* 5: callee first */
};

static const struct sample_spec samples[] = {
	{ 3, { 0, 1, 3 }, { 1, 100, 1, 100 }, 0 }, { 3, { 0, 2, 3 }, { 2, 300, 1, 200 }, 0 },
	{ 3, { 4, 1, 3 }, { 4, 4000, 0, 0 }, 0 },  { 2, { 4, 3 }, { 1, 50, 1, 50 }, 0 },
	{ 2, { 5, 3 }, { 8, 800, 3, 24 }, 0 },
};

#define NLOCS	 (sizeof(locs) / sizeof(locs[0]))
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

Test(flamegraph, identical_paths_merge_into_one_tree)
{
	struct fg_node_info n;

	make(locs, NLOCS, samples, NSAMPLES);
	tree(HB_ALLOC_SPACE);
	/* all, main, handler, alloc_a, alloc_b (under handler), alloc_b, parse, decode, alloc_c */
	cr_assert_eq(flamegraph__nnodes(fg), 9);
	flamegraph__node(fg, 0, &n);
	cr_assert_str_eq(n.name, "all");
	cr_assert_eq(n.kind, FG_ROOT);
	cr_assert_eq(n.bytes, 100 + 300 + 4000 + 50 + 800);
	cr_assert_eq(n.objects, 1 + 2 + 4 + 1 + 8);
	/* both addresses in handler are one frame; alloc_a's two samples are one node */
	n = at(fg, "main;handler");
	cr_assert_eq(n.bytes, 4400);
	cr_assert_eq(n.depth, 2);
	n = at(fg, "main;handler;alloc_a");
	cr_assert_eq(n.bytes, 400);
	cr_assert_eq(n.objects, 3);
	/* the same function on two paths is two nodes */
	cr_assert_eq(at(fg, "main;handler;alloc_b").bytes, 4000);
	cr_assert_eq(at(fg, "main;alloc_b").bytes, 50);
	cr_assert_eq(at(fg, "main").bytes, 5250);
}

Test(flamegraph, nodes_are_in_pre_order_with_siblings_sorted)
{
	static const char *const order[] = { "all",	"main",	 "alloc_b", "handler", "alloc_a",
					     "alloc_b", "parse", "decode",  "alloc_c" };
	struct fg_node_info n;

	make(locs, NLOCS, samples, NSAMPLES);
	tree(HB_ALLOC_SPACE);
	for (size_t i = 0; i < flamegraph__nnodes(fg); i++) {
		flamegraph__node(fg, i, &n);
		cr_assert_str_eq(n.name, order[i], "node %zu", i);
		cr_assert_lt(n.parent, i ?: 1, "a parent comes before its children");
	}
}

Test(flamegraph, the_sample_type_chooses_the_samples_and_the_sizes)
{
	struct fg_node_info n;

	make(locs, NLOCS, samples, NSAMPLES);
	tree(HB_INUSE_SPACE);
	/* nothing of handler -> alloc_b is in use: that path is not in the tree */
	cr_assert_lt(child(fg, (size_t)child(fg, (size_t)child(fg, 0, "main"), "handler"),
			   "alloc_b"),
		     0);
	flamegraph__node(fg, 0, &n);
	cr_assert_eq(n.bytes, 100 + 200 + 50 + 24, "in-use bytes");
	cr_assert_eq(n.objects, 1 + 1 + 1 + 3, "in-use objects");
	/* sized by objects: the same kind (allocated) gives bytes and objects */
	tree(HB_ALLOC_OBJECTS);
	n = at(fg, "main;handler;alloc_b");
	cr_assert_eq(n.objects, 4);
	cr_assert_eq(n.bytes, 4000);
}

Test(flamegraph, inlined_frames_are_marked_and_keep_their_lines)
{
	struct fg_node_info n;
	char *html;

	make(locs, NLOCS, samples, NSAMPLES);
	tree(HB_ALLOC_SPACE);
	/* the outermost line is the real frame, the others were inlined into it */
	n = at(fg, "main;parse");
	cr_assert_not(n.inlined);
	cr_assert_eq(n.line, 43);
	n = at(fg, "main;parse;decode");
	cr_assert(n.inlined);
	cr_assert_eq(n.line, 42);
	n = at(fg, "main;parse;decode;alloc_c");
	cr_assert(n.inlined);
	cr_assert_str_eq(n.file, "src/app.c");
	cr_assert_eq(n.line, 41);
	/* in the page: flag 1 on exactly those two frames */
	html = page(HB_ALLOC_SPACE);
	assert_all_in(html, (const char *const[]){ "[\"decode\",\"src/app.c\",1]",
						   "[\"alloc_c\",\"src/app.c\",1]",
						   "[\"parse\",\"src/app.c\",0]", NULL });
	cr_assert_eq(occurrences(html, "\",1]"), 2);
	free(html);
}

Test(flamegraph, a_merged_frame_shows_its_heaviest_line)
{
	make(locs, NLOCS, samples, NSAMPLES);
	/* handler:20 carried 100 + 4000 bytes, handler:25 300 */
	cr_assert_eq(at(tree(HB_ALLOC_SPACE), "main;handler").line, 20);
	/* in use: handler:20 100 bytes, handler:25 200 */
	cr_assert_eq(at(tree(HB_INUSE_SPACE), "main;handler").line, 25);
}

Test(flamegraph, sample_order_does_not_change_the_page)
{
	struct sample_spec rev[NSAMPLES];
	char *a, *b;

	for (size_t i = 0; i < NSAMPLES; i++)
		rev[i] = samples[NSAMPLES - 1 - i];
	make(locs, NLOCS, samples, NSAMPLES);
	a = page(HB_INUSE_SPACE);
	make(locs, NLOCS, rev, NSAMPLES);
	b = page(HB_INUSE_SPACE);
	cr_assert_str_eq(a, b);
	free(a);
	free(b);
}

Test(flamegraph, processes_are_roots_of_their_own)
{
	static const struct sample_spec forked[] = {
		{ 2, { 0, 3 }, { 1, 100, 1, 100 }, 4242 },
		{ 2, { 0, 3 }, { 1, 70, 1, 70 }, 4243 },
		{ 2, { 0, 3 }, { 1, 30, 1, 30 }, 4243 },
	};
	struct fg_node_info n;
	char *html;

	make(locs, NLOCS, forked, 3);
	tree(HB_INUSE_SPACE);
	/* all, pid 4242, main, alloc_a, pid 4243, main, alloc_a: never merged across processes */
	cr_assert_eq(flamegraph__nnodes(fg), 7);
	n = at(fg, "pid 4242");
	cr_assert_eq(n.kind, FG_PROCESS);
	cr_assert_eq(n.depth, 1);
	cr_assert_eq(n.bytes, 100);
	cr_assert_eq(at(fg, "pid 4243;main;alloc_a").bytes, 100);
	cr_assert_eq(at(fg, "pid 4243;main;alloc_a").objects, 2);
	html = page(HB_INUSE_SPACE);
	cr_assert(strstr(html, "[\"pid 4243\",null,2]"), "process frames carry flag 2");
	free(html);
}

Test(flamegraph, unsymbolized_and_empty_stacks)
{
	static const struct loc_spec bare[] = { { { NULL }, { 0 } }, { { "main" }, { 0 } } };
	static const struct sample_spec ss[] = {
		{ 2, { 0, 1 }, { 1, 64, 1, 64 }, 0 },
		{ 0, { 0 }, { 1, 32, 1, 32 }, 0 },
	};
	struct fg_node_info n;

	make(bare, 2, ss, 2);
	n = at(tree(HB_INUSE_SPACE), "main;0x401000");
	cr_assert_eq(n.bytes, 64);
	cr_assert_null(n.file);
	cr_assert_eq(n.line, 0);
	cr_assert_eq(at(fg, "[unknown]").bytes, 32);
}

Test(flamegraph, an_empty_profile_is_a_page_with_only_the_root)
{
	struct fg_node_info n;
	char *html;

	make(NULL, 0, NULL, 0);
	cr_assert_eq(flamegraph__nnodes(tree(HB_INUSE_SPACE)), 1);
	flamegraph__node(fg, 0, &n);
	cr_assert_eq(n.bytes, 0);
	cr_assert_eq(n.objects, 0);
	html = page(HB_INUSE_SPACE);
	assert_all_in(html, (const char *const[]){ "\"nodes\":[\n0,0,0,0,0]",
						   "in use 0 B in 0 objects", "</html>\n", NULL });
	free(html);
}

Test(flamegraph, bad_arguments)
{
	static const struct sample_spec dangling[] = { { 1, { 7 }, { 1, 1, 1, 1 }, 0 } };
	struct flamegraph *bad = (struct flamegraph *)1;

	make(locs, NLOCS, dangling, 1);
	cr_assert_eq(flamegraph__new(prof, HB_INUSE_SPACE, &bad), -EINVAL);
	cr_assert_null(bad);
	prof->samples[0].locs[0] = 0;
	cr_assert_eq(flamegraph__new(prof, HB_NVALUES, &bad), -EINVAL);
}

Test(flamegraph, the_title_names_process_jemalloc_window_and_totals)
{
	static const struct sample_spec big[] = {
		{ 2, { 0, 3 }, { 1500, 3u << 30, 1234567, 1572864 }, 0 },
	};
	char *html;

	make(locs, NLOCS, big, 1);
	prof->time_nanos = 1735787045LL * 1000000000; /* 2025-01-02 03:04:05 UTC */
	prof->duration_nanos = 5200000000LL;
	cr_assert_eq(hb_profile_add_comment(prof,
					    "heapbpf 9.8.7: pid 4242 (redis-server), "
					    "jemalloc 5.3.0-0-g54eaed1d in /usr/bin/redis-server"),
		     0);
	cr_assert_eq(hb_profile_add_comment(prof, "heapbpf: 12 samples, 3 frees of them"), 0);
	cr_assert_eq(hb_profile_add_comment(prof, "heapbpf: WARNING: 2 samples were dropped"), 0);
	html = page(HB_INUSE_SPACE);
	assert_all_in(
		html,
		(const char *const[]){
			"<title>heapbpf: redis-server (pid 4242), in use 1.5 MiB in 1,234,567 "
			"objects</title>",
			">redis-server &middot; pid 4242 &middot; in use 1.5 MiB in 1,234,567 "
			"objects</h1>",
			"jemalloc 5.3.0-0-g54eaed1d in /usr/bin/redis-server",
			"window 2025-01-02 03:04:05 UTC, 5.2 s",
			"unbiased estimates, sampling every 512.0 KiB on average",
			"frames sized by inuse_space", "heapbpf 9.8.7</p>",
			/* the other comments are notes */
			"<li>heapbpf: 12 samples, 3 frees of them</li>",
			/* and a warning stands out */
			"<li class=\"warn\">heapbpf: WARNING: 2 samples were dropped</li>", NULL });
	cr_assert_eq(occurrences(html, "<li"), 2);
	free(html);
	html = page(HB_ALLOC_OBJECTS);
	assert_all_in(html, (const char *const[]){
				    "allocated 3.0 GiB in 1,500 objects</h1>",
				    "\"type\":\"alloc_objects\",\"kind\":\"allocated\",\"size\":1",
				    NULL });
	cr_assert_null(strstr(html, "since sampling started"), "one window needs no scope");
	free(html);
	/* a later window's page: its allocations its own, in use since sampling started */
	prof->inuse_since_nanos = 1735786985LL * 1000000000; /* a minute earlier */
	html = page(HB_INUSE_SPACE);
	assert_all_in(html, (const char *const[]){
				    "window 2025-01-02 03:04:05 UTC, 5.2 s",
				    "alloc_* in the window, inuse_* since sampling started at "
				    "2025-01-02T03:03:05.000Z",
				    NULL });
	free(html);
}

Test(flamegraph, page_is_self_contained)
{
	char *html;

	make(locs, NLOCS, samples, NSAMPLES);
	html = page(HB_INUSE_SPACE);
	cr_assert_eq(strncmp(html, "<!DOCTYPE html>\n", 16), 0);
	/* a policy that forbids any request; the viewer and its style inside */
	assert_all_in(html, (const char *const[]){ "default-src 'none'", "function callersTree()",
						   ".f.i {", NULL });
	/* and nothing to fetch */
	for (const char *const *s =
		     (const char *const[]){ "src=", "href=", "http://", "https://", NULL };
	     *s; s++)
		cr_assert_null(strstr(html, *s), "%s in the page", *s);
	cr_assert_eq(occurrences(html, "<script"), 2, "the data and the viewer");
	free(html);
}

Test(flamegraph, every_string_is_escaped)
{
	/* function names may hold anything, and so may a process name or a path */
	static const struct loc_spec evil[] = {
		{ { "</script><script>alert(1)</script>" }, { 1 } },
		{ { "operator<< <std::string&>(\"q\", 'c') \\ & <!--" }, { 2 } },
		{ { "bad\xff utf8 \xe2\x80\xa8 sep \xc3\xa9t\xc3\xa9" }, { 3 } },
	};
	static const struct sample_spec ss[] = { { 3, { 0, 1, 2 }, { 1, 10, 1, 10 }, 0 } };
	char *html;

	make(evil, 3, ss, 1);
	cr_assert_eq(hb_profile_add_comment(prof, "heapbpf 1: pid 7 (<b>x&y</b>), jemalloc 5.3.0 "
						  "in /tmp/\"it's\"</script>"),
		     0);
	html = page(HB_INUSE_SPACE);
	/* only the page's own two script elements open and close */
	cr_assert_eq(occurrences(html, "<script"), 2);
	cr_assert_eq(occurrences(html, "</script>"), 2);
	cr_assert_null(strstr(html, "<!--"));
	cr_assert_null(strstr(html, "<b>"));
	assert_all_in(
		html,
		(const char *const[]){
			/* in the data, as JSON with markup characters as \u escapes */
			"[\"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"
			"\",\"src/app.c\",0]",
			"\"operator\\u003c\\u003c \\u003cstd::string\\u0026\\u003e(\\\"q\\\", "
			"\\u0027c\\u0027) \\\\ \\u0026 \\u003c!--\"",
			/* a byte that is not UTF-8 becomes U+FFFD; a separator an escape */
			"\"bad\\ufffd utf8 \\u2028 sep \xc3\xa9t\xc3\xa9\"",
			/* in the title, as HTML */
			"&lt;b&gt;x&amp;y&lt;/b&gt; &middot; pid 7",
			"/tmp/&quot;it&#39;s&quot;&lt;/script&gt;", NULL });
	free(html);
}

/* ---- -f html through the command line, the sink and snapshot names ---- */

static int parse_args(struct cli *c, const char *const *args)
{
	char *argv[16];
	int argc = 0;

	for (argv[argc++] = "heapbpf"; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	return hb_cli_parse(argc, argv, c);
}

Test(flamegraph, cli_takes_html_with_a_sample_type)
{
	struct cli c;

	cr_assert_eq(parse_args(&c, (const char *const[]){ "-p", "3", "-f", "html", NULL }), 0);
	cr_assert_eq(c.run.format, FMT_HTML);
	cr_assert_eq(c.run.sample_type, HB_INUSE_SPACE);
	cr_assert_eq(parse_args(&c, (const char *const[]){ "report", "r.hbr", "-f", "html", "-t",
							   "alloc_objects", NULL }),
		     0);
	cr_assert_eq(c.mode, MODE_REPORT);
	cr_assert_eq(c.run.format, FMT_HTML);
	cr_assert_eq(c.run.sample_type, HB_ALLOC_OBJECTS);
	cr_assert_eq(parse_args(&c, (const char *const[]){ "-p", "3", "--output-dir", "/tmp/s",
							   "-f", "pprof", "-f", "html", "-t",
							   "alloc_space", NULL }),
		     0);
	cr_assert_eq(c.run.formats, 1u << FMT_PPROF | 1u << FMT_HTML);
	cr_assert_eq(c.run.sample_type, HB_ALLOC_SPACE);
}

Test(flamegraph, sink_writes_the_page)
{
	struct sink s = { .kind = SINK_FILE, .format = FMT_HTML, .sample_type = HB_ALLOC_OBJECTS };
	uint8_t *buf;
	size_t len;
	char *html;

	make(locs, NLOCS, samples, NSAMPLES);
	html = page(HB_ALLOC_OBJECTS);
	cr_assert_eq(sink_encode(prof, &s, &buf, &len), 0);
	cr_assert_eq(len, strlen(html));
	cr_assert_eq(memcmp(buf, html, len), 0, "the sink writes what flamegraph_write does");
	free(buf);
	free(html);
	/* never compressed: a page to open */
	s.zstd = true;
	cr_assert_eq(sink_encode(prof, &s, &buf, &len), 0);
	cr_assert_eq(strncmp((char *)buf, "<!DOCTYPE html>", 15), 0);
	free(buf);
	cr_assert_str_eq(sink_extension(FMT_HTML, false), "html");
	cr_assert_str_eq(sink_extension(FMT_HTML, true), "html");
}

Test(flamegraph, snapshots_keep_html_files)
{
	char name[256], stamp[SNAPSHOT_STAMP_LEN + 1];

	cr_assert_eq(snapshot_name(name, sizeof(name), "20250102T030405Z", 42, "app", "html"), 0);
	cr_assert_str_eq(name, "heap-20250102T030405Z-42-app.html");
	cr_assert(snapshot_parse_name(name, stamp), "retention counts the page in its snapshot");
	cr_assert_str_eq(stamp, "20250102T030405Z");
}
