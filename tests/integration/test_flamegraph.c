// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flame graph page as a browser shows it. A profile of the example
 * service is written with -f html, and its recording reported as pprof;
 * headless Chromium (Debian's chromium) loads the page with
 * tests/flamegraph/driver.js appended, which hovers, clicks, searches and
 * inverts through DOM events and lists what the DOM then shows. Every
 * width, share and total is checked against the pprof of the same run,
 * decoded with the protobuf-c code generated from pprof's profile.proto.
 * Pages of made-up profiles check escaping and thousands of stacks. A
 * heapbpf diff page of two profiles of a known change checks the colours of
 * what grew and what shrank, and the totals against the two pprofs.
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "profile/flamegraph.h"
#include "browser.h"
#include "harness.h"
#include "profile/pprof.h"

#define DRIVER "tests/flamegraph/driver.js"
/* relative widths as drawn against the pprof's shares: 1/64 px layout units on ~1200 px */
#define WIDTH_TOLERANCE 2e-4
/* the page prints shares as percentages with two decimals */
#define PCT_TOLERANCE 0.0051

TestSuite(flamegraph_page, .fini = hb_tmpdir_cleanup, .timeout = 240);

/* The text of the DOM as --dump-dom serializes it back to characters. */
static void unescape(char *s)
{
	static const struct {
		const char *ent;
		char c;
	} ents[] = { { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&amp;", '&' } };
	char *w = s;

	while (*s) {
		size_t i;

		for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
			if (strncmp(s, ents[i].ent, strlen(ents[i].ent)) == 0)
				break;
		}
		if (i < sizeof(ents) / sizeof(ents[0])) {
			*w++ = ents[i].c;
			s += strlen(ents[i].ent);
		} else {
			*w++ = *s++;
		}
	}
	*w = '\0';
}

/* Loads @html with the driver appended (#@fragment); returns the driver's lines (malloc'ed). */
static char *browse(const char *html, const char *fragment)
{
	static const char begin[] = "<pre id=\"hb-test\">HBTEST-BEGIN\n";
	static int n;
	char page[PATH_MAX], dom[PATH_MAX], url[2 * PATH_MAX], *text, *driver, *dump, *b, *e;
	FILE *f;

	cr_assert_gt(hb_read_file(html, &text), 0, "cannot read %s", html);
	cr_assert_gt(hb_read_file(DRIVER, &driver), 0, "cannot read %s", DRIVER);
	snprintf(page, sizeof(page), "%s/driven-%d.html", hb_tmpdir(), ++n);
	snprintf(dom, sizeof(dom), "%s/dom-%d.txt", hb_tmpdir(), n);
	f = fopen(page, "w");
	cr_assert_not_null(f);
	fprintf(f, "%s<script>\n%s</script>\n", text, driver);
	cr_assert_eq(fclose(f), 0);
	free(text);
	free(driver);
	snprintf(url, sizeof(url), "file://%s#%s", page, fragment);
	hb_chromium(url, "--dump-dom", dom);
	cr_assert_gt(hb_read_file(dom, &dump), 0);
	b = strstr(dump, begin);
	cr_assert_not_null(b, "the driver left no results: %s", dump);
	b += strlen(begin);
	e = strstr(b, "HBTEST-END");
	cr_assert_not_null(e);
	*e = '\0';
	unescape(b);
	b = strdup(b);
	free(dump);
	cr_assert_not_null(b);
	cr_assert_null(strstr(b, "error\t"), "the driver failed:\n%s", b);
	cr_assert(strstr(b, "done\t1\n"), "the driver did not finish:\n%s", b);
	return b;
}

/* The value of the line "KEY\tVALUE" (KEY may hold tabs itself), or NULL. */
static const char *lookup(const char *res, const char *key)
{
	size_t n = strlen(key);

	for (const char *l = res; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, key, n) == 0 && l[n] == '\t')
			return l + n + 1;
	}
	return NULL;
}

static double num(const char *res, const char *key)
{
	const char *v = lookup(res, key);

	cr_assert_not_null(v, "no \"%s\" in the driver's results:\n%s", key, res);
	return strtod(v, NULL);
}

/* How many lines are exactly @line. */
static int count_lines(const char *res, const char *line)
{
	size_t n = strlen(line);
	int c = 0;

	for (const char *l = res; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		c += strncmp(l, line, n) == 0 && l[n] == '\n';
	return c;
}

/* Lines that start with @prefix. */
static int count_prefixed(const char *res, const char *prefix)
{
	int c = 0;

	for (const char *l = res; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		c += strncmp(l, prefix, strlen(prefix)) == 0;
	return c;
}

/* "31,403,940,601" at @s as a number. */
static int64_t grouped_at(const char *s)
{
	int64_t v = 0;

	for (; (*s >= '0' && *s <= '9') || *s == ','; s++) {
		if (*s != ',')
			v = v * 10 + (*s - '0');
	}
	return v;
}

/* From a details line: exact bytes "(N bytes)", objects "N objects", share "P% of total". */
static void details_values(const char *text, int64_t *bytes, int64_t *objects, double *pct)
{
	const char *b = strstr(text, " bytes), "), *s = strstr(text, "% of total"), *p;

	cr_assert(b && s, "not a details line: %s", text);
	for (p = b; p > text && p[-1] != '('; p--)
		;
	*bytes = grouped_at(p);
	*objects = grouped_at(b + strlen(" bytes), "));
	for (p = s; p > text && p[-1] != ' '; p--)
		;
	*pct = strtod(p, NULL);
}

/* ---- the pprof of the same run ---- */

/* A function anywhere in the stack, a part of its name, the leaf, "LEAF;ITS CALLER". */
enum match { EXACT, SUBSTRING, LEAF, LEAF_CALLER };

static const char *fn_name(const Perftools__Profiles__Profile *p, uint64_t function_id)
{
	return p->string_table[p->function[function_id - 1]->name];
}

/* The sample's two innermost frames, "leaf;caller" (inlined lines are frames too). */
static void leaf_and_caller(const Perftools__Profiles__Profile *p,
			    const Perftools__Profiles__Sample *s, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t j = 0; j < s->n_location_id && n < 2; j++) {
		const Perftools__Profiles__Location *l = p->location[s->location_id[j] - 1];

		for (size_t k = 0; k < l->n_line && n < 2; k++, n++)
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", n ? ";" : "",
				 fn_name(p, l->line[k]->function_id));
	}
}

static bool sample_matches(const Perftools__Profiles__Profile *p,
			   const Perftools__Profiles__Sample *s, const char *name, enum match how)
{
	char pair[512];

	if (!name)
		return true;
	if (how == LEAF_CALLER) {
		leaf_and_caller(p, s, pair, sizeof(pair));
		return strcmp(pair, name) == 0;
	}
	for (size_t j = 0; j < s->n_location_id; j++) {
		const Perftools__Profiles__Location *l = p->location[s->location_id[j] - 1];

		/* lines are callee first: the leaf's first line is the function that allocated */
		for (size_t k = 0; k < l->n_line; k++) {
			const char *fn = fn_name(p, l->line[k]->function_id);

			if (how == LEAF)
				return strcmp(fn, name) == 0;
			if (how == EXACT ? strcmp(fn, name) == 0 : strcasestr(fn, name) != NULL)
				return true;
		}
	}
	return false;
}

/* Value @k summed over the samples whose stack has @name (NULL: all samples). */
static int64_t pprof_sum(const Perftools__Profiles__Profile *p, int k, const char *name,
			 enum match how)
{
	int64_t sum = 0;

	for (size_t i = 0; i < p->n_sample; i++) {
		cr_assert_eq(p->sample[i]->n_value, HB_NVALUES);
		if (sample_matches(p, p->sample[i], name, how))
			sum += p->sample[i]->value[k];
	}
	return sum;
}

static Perftools__Profiles__Profile *load_pprof(const char *path)
{
	Perftools__Profiles__Profile *p;
	char *buf;
	ssize_t len = hb_read_file(path, &buf);

	cr_assert_gt(len, 0, "cannot read %s", path);
	cr_assert_eq(pprof_decode((uint8_t *)buf, len, &p), 0, "pprof_decode of %s", path);
	free(buf);
	return p;
}

/*
 * Every "PREFIX\tNAME\tRATIO" line of the driver against the pprof: NAME's
 * share of @k within @base (a name's samples, or NULL for the total).
 * Returns how many were compared.
 */
static int check_widths(const char *res, const char *prefix, const Perftools__Profiles__Profile *p,
			int k, const char *base, enum match how)
{
	double whole = (double)pprof_sum(p, k, base, EXACT);
	size_t plen = strlen(prefix);
	int compared = 0;

	for (const char *l = res; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char name[256];
		double ratio, want;

		if (strncmp(l, prefix, plen) != 0 || l[plen] != '\t' ||
		    sscanf(l + plen + 1, "%255[^\t]\t%lf", name, &ratio) != 2 ||
		    strcmp(name, "all") == 0)
			continue;
		want = pprof_sum(p, k, name, how) / whole;
		cr_assert_gt(want, 0, "%s is drawn but not in the pprof", name);
		cr_assert(fabs(ratio - want) <= WIDTH_TOLERANCE,
			  "%s: %s is drawn %.6f wide, the pprof says %.6f", prefix, name, ratio,
			  want);
		compared++;
	}
	return compared;
}

static void check_match(const char *res, const Perftools__Profiles__Profile *p, int k,
			const char *q)
{
	const char *m = lookup(res, "match"), *open;
	double want = 100.0 * pprof_sum(p, k, q, SUBSTRING) / pprof_sum(p, k, NULL, EXACT);

	cr_assert_not_null(m, "%s", res);
	cr_assert_eq(strncmp(m, "Matched ", 8), 0, "%s", m);
	open = strrchr(m, '(');
	cr_assert_not_null(open);
	cr_assert(fabs(strtod(open + 1, NULL) - want) <= PCT_TOLERANCE,
		  "search \"%s\": the page says %s, the pprof %.3f%%", q, m, want);
	cr_assert(lookup(res, "unmatched") && lookup(res, "unmatched")[0] == '0',
		  "clearing the search leaves highlights");
}

static void check_hover(const char *res, const char *name, const Perftools__Profiles__Profile *p,
			bool inuse)
{
	int ks = inuse ? HB_INUSE_SPACE : HB_ALLOC_SPACE,
	    ko = inuse ? HB_INUSE_OBJECTS : HB_ALLOC_OBJECTS;
	char key[128];
	const char *text;
	int64_t bytes, objects;
	double pct;

	snprintf(key, sizeof(key), "hover\t%s", name);
	text = lookup(res, key);
	cr_assert_not_null(text, "no hover text for %s:\n%s", name, res);
	cr_assert_eq(strncmp(text, name, strlen(name)), 0, "%s", text);
	details_values(text, &bytes, &objects, &pct);
	if (strcmp(name, "all") != 0)
		cr_assert(strstr(text, "alloc-service.c:"), "no file:line: %s", text);
	/* the hovered frame's exact values are the pprof's, of the same kind */
	cr_assert_eq(bytes, pprof_sum(p, ks, strcmp(name, "all") ? name : NULL, EXACT), "%s", text);
	cr_assert_eq(objects, pprof_sum(p, ko, strcmp(name, "all") ? name : NULL, EXACT), "%s",
		     text);
	cr_assert_gt(pct, 0, "%s", text);
}

static void check_common(const char *res)
{
	cr_assert_eq(num(res, "overflow"), 0, "labels overflow their frames:\n%s", res);
	cr_assert_eq(num(res, "badlabels"), 0, "labels that are not their names:\n%s", res);
	cr_assert_eq(num(res, "pwned"), 0);
	cr_assert_eq(num(res, "scripts"), 3, "the data, the viewer, the driver");
	cr_assert_eq(count_lines(res, "view\tflame"), 1);
	cr_assert_eq(count_lines(res, "callers_view\tcallers\ttrue"), 1, "%s", res);
	cr_assert_eq(count_lines(res, "flame_again\tflame"), 1);
}

/* ---- the example service ---- */

static struct svc svc;
static char pid[16];

static void start(void)
{
	hb_require_bpf();
	hb_start_idle_service(&svc, "4", pid, sizeof(pid));
}

static void tmp_file(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", hb_tmpdir(), name);
}

static void report(const char *rec, const char *const *extra)
{
	const char *args[16] = { "report", rec, "-q" };
	char err[4096];
	size_t n = 3;

	while (*extra)
		args[n++] = *extra++;
	args[n] = NULL;
	cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 0, "report: %s", err);
}

static bool same_file(const char *a, const char *b)
{
	char *x, *y;
	ssize_t lx = hb_read_file(a, &x), ly = hb_read_file(b, &y);
	bool same = lx > 0 && lx == ly && memcmp(x, y, lx) == 0;

	free(x);
	free(y);
	return same;
}

/* The default page: in-use bytes. Totals, widths, hover, zoom, search, callers. */
static void check_inuse_page(const char *html, const Perftools__Profiles__Profile *p)
{
	char *res = browse(html, "zoom=large_buffers&search=churn");
	double total = (double)pprof_sum(p, HB_INUSE_SPACE, NULL, EXACT), px = num(res, "root_px");
	char want[64];

	check_common(res);
	/* the title: process, pid, jemalloc, window, totals */
	snprintf(want, sizeof(want), "alloc-service-s \xc2\xb7 pid %s \xc2\xb7 in use %.1f MiB",
		 pid, total / 1048576);
	cr_assert_eq(strncmp(lookup(res, "title"), want, strlen(want)), 0, "title: %s",
		     lookup(res, "title"));
	cr_assert(strstr(lookup(res, "sub"), "jemalloc 5.3.0-0-g"), "%s", lookup(res, "sub"));
	cr_assert(strstr(lookup(res, "sub"), "alloc-service-static \xc2\xb7 window 2"));
	cr_assert(strstr(lookup(res, "sub"), " UTC, "));
	/* the totals are the pprof's, to the byte and the object */
	check_hover(res, "all", p, true);
	/* every frame drawn has the pprof's share of the total as its width */
	cr_assert_geq(check_widths(res, "w", p, HB_INUSE_SPACE, NULL, EXACT), 6, "%s", res);
	cr_assert(lookup(res, "w\tlarge_buffers") && lookup(res, "w\tchurn_small") &&
			  lookup(res, "w\trun_one") && lookup(res, "w\tworker_main"),
		  "%s", res);
	/* and every function wide enough to be drawn is */
	for (const char *const *s =
		     (const char *const[]){ "churn_small", "large_buffers", "make_session",
					    "parse_request", "leak_slowly", NULL };
	     *s; s++) {
		char key[64];

		snprintf(key, sizeof(key), "w\t%s", *s);
		if (pprof_sum(p, HB_INUSE_SPACE, *s, EXACT) / total * px >= 1)
			cr_assert_not_null(lookup(res, key), "%s is not drawn:\n%s", *s, res);
	}
	check_hover(res, "large_buffers", p, true);
	/* a click zooms: large_buffers fills the width, churn_small is gone, the path stays */
	cr_assert_eq(num(res, "zoom_changed"), 1);
	cr_assert(fabs(num(res, "zoom_target_ratio") - 1) < 1e-3, "%s", res);
	cr_assert_null(lookup(res, "zw\tchurn_small"), "%s", res);
	cr_assert_eq(count_lines(res, "context\trun_one"), 1, "%s", res);
	cr_assert_eq(count_lines(res, "context\tworker_main"), 1);
	cr_assert_eq(num(res, "reset_restores"), 1);
	/* search: highlights churn_small only, and says its share */
	check_match(res, p, HB_INUSE_SPACE, "churn");
	cr_assert_eq(count_lines(res, "matched\tchurn_small"), 1, "%s", res);
	cr_assert_eq(count_prefixed(res, "matched\t"), 1, "%s", res);
	/* callers: the first level is what allocated, as wide as its leaf share */
	cr_assert_geq(check_widths(res, "cw", p, HB_INUSE_SPACE, NULL, LEAF), 2, "%s", res);
	cr_assert_geq(check_widths(res, "cw2", p, HB_INUSE_SPACE, NULL, LEAF_CALLER), 2, "%s", res);
	free(res);
}

/* Objects allocated: every site shows, inlined frames, zoom proportions, nested search. */
static void check_objects_page(const char *html, const Perftools__Profiles__Profile *p)
{
	static const char *const sites[] = { "churn_small", "large_buffers", "make_session",
					     "parse_request", "leak_slowly" };
	char *res = browse(html, "zoom=make_session&search=session&under=1");
	char line[128];

	check_common(res);
	check_hover(res, "all", p, false);
	cr_assert_geq(check_widths(res, "w", p, HB_ALLOC_OBJECTS, NULL, EXACT), 10, "%s", res);
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		/* leak_slowly stops at its cap and is rare: it may not have been sampled */
		if (strcmp(sites[i], "leak_slowly") != 0)
			cr_assert_gt(pprof_sum(p, HB_ALLOC_OBJECTS, sites[i], EXACT), 0,
				     "the example's %s was not sampled", sites[i]);
		else if (!pprof_sum(p, HB_ALLOC_OBJECTS, sites[i], EXACT))
			continue;
		snprintf(line, sizeof(line), "under\t%s\trun_one", sites[i]);
		cr_assert_eq(count_lines(res, line), 1, "no %s on run_one:\n%s", sites[i], res);
	}
	cr_assert_eq(count_lines(res, "under\trun_one\tworker_main"), 1, "%s", res);
	cr_assert_eq(count_lines(res, "under\tsession_add_item\tmake_session"), 1);
	/* parse_request <- decode_header <- alloc_buffer: one function, the two inlined marked */
	cr_assert_eq(count_lines(res, "under\tdecode_header\tparse_request"), 1, "%s", res);
	cr_assert_eq(count_lines(res, "under\talloc_buffer\tdecode_header"), 1);
	cr_assert_eq(count_lines(res, "inlined\tdecode_header\titalic"), 1, "%s", res);
	cr_assert_eq(count_lines(res, "inlined\talloc_buffer\titalic"), 1);
	cr_assert_eq(count_prefixed(res, "inlined\t"), 2);
	/* zoomed into make_session, session_add_item keeps its share of it */
	cr_assert_eq(num(res, "zoom_changed"), 1);
	cr_assert_geq(check_widths(res, "zw", p, HB_ALLOC_OBJECTS, "make_session", EXACT), 2, "%s",
		      res);
	/* "session" matches a frame and its child: counted once */
	check_match(res, p, HB_ALLOC_OBJECTS, "session");
	cr_assert_eq(count_lines(res, "matched\tmake_session"), 1, "%s", res);
	cr_assert_eq(count_lines(res, "matched\tsession_add_item"), 1);
	cr_assert_eq(count_prefixed(res, "matched\t"), 2);
	cr_assert_geq(check_widths(res, "cw", p, HB_ALLOC_OBJECTS, NULL, LEAF), 5, "%s", res);
	cr_assert_not_null(lookup(res, "cw\talloc_buffer"), "the inlined leaf allocates:\n%s", res);
	/* and above each, its callers */
	cr_assert_geq(check_widths(res, "cw2", p, HB_ALLOC_OBJECTS, NULL, LEAF_CALLER), 5, "%s",
		      res);
	cr_assert_not_null(lookup(res, "cw2\talloc_buffer;decode_header"), "%s", res);
	cr_assert_not_null(lookup(res, "cw2\tsession_add_item;make_session"), "%s", res);
	free(res);
}

Test(flamegraph_page, example_service_in_chromium)
{
	char live[PATH_MAX], rep[PATH_MAX], obj[PATH_MAX], pb[PATH_MAX], rec[PATH_MAX], err[8192];
	const char *args[] = { "--pid", pid,  "-d",	  "5", "-f", "html",
			       "-o",	live, "--record", rec, NULL };
	Perftools__Profiles__Profile *p;

	start();
	tmp_file(live, "live.html");
	tmp_file(rep, "report.html");
	tmp_file(obj, "objects.html");
	tmp_file(pb, "report.pb.gz");
	tmp_file(rec, "run.hbr");
	cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 0, "stderr: %s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	/* the same page from heapbpf report, and the pprof of the same run */
	report(rec, (const char *const[]){ "-f", "html", "-o", rep, NULL });
	cr_assert(same_file(live, rep), "heapbpf report wrote another page than the live run");
	report(rec, (const char *const[]){ "-o", pb, NULL });
	report(rec, (const char *const[]){ "-f", "html", "-t", "alloc_objects", "-o", obj, NULL });
	p = load_pprof(pb);
	check_inuse_page(live, p);
	check_objects_page(obj, p);
	hb_screenshot(live, "flamegraph-test.png");
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* The root node's values as the page's data has them. */
static void page_totals(const char *path, int64_t *bytes, int64_t *objects)
{
	char *text;
	const char *n;

	cr_assert_gt(hb_read_file(path, &text), 0);
	n = strstr(text, "\"nodes\":[\n");
	cr_assert_not_null(n);
	cr_assert_eq(
		sscanf(n + strlen("\"nodes\":[\n"), "0,0,%" SCNd64 ",%" SCNd64, bytes, objects), 2);
	free(text);
}

Test(flamegraph_page, snapshot_mode_writes_the_page_beside_the_pprof)
{
	char dir[PATH_MAX], err[8192], pb[PATH_MAX * 2] = "", html[PATH_MAX * 2] = "";
	const char *args[] = { "--pid", pid,  "-d",   "2",  "--output-dir", dir, "-f",
			       "pprof", "-f", "html", "-t", "alloc_space",  NULL };
	Perftools__Profiles__Profile *p;
	struct dirent *e;
	int64_t bytes, objects;
	DIR *d;

	start();
	tmp_file(dir, "snapshots");
	cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 0, "stderr: %s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	d = opendir(dir);
	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (l > 6 && strcmp(e->d_name + l - 6, ".pb.gz") == 0)
			snprintf(pb, sizeof(pb), "%s/%s", dir, e->d_name);
		else if (l > 5 && strcmp(e->d_name + l - 5, ".html") == 0)
			snprintf(html, sizeof(html), "%s/%s", dir, e->d_name);
	}
	closedir(d);
	cr_assert(pb[0] && html[0], "snapshot files missing in %s", dir);
	/* one snapshot: the same name but for the extension */
	cr_assert_eq(strncmp(pb, html, strlen(pb) - strlen("pb.gz")), 0, "%s vs %s", pb, html);
	p = load_pprof(pb);
	page_totals(html, &bytes, &objects);
	cr_assert_eq(bytes, pprof_sum(p, HB_ALLOC_SPACE, NULL, EXACT));
	cr_assert_eq(objects, pprof_sum(p, HB_ALLOC_OBJECTS, NULL, EXACT));
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* ---- heapbpf diff ---- */

/* One profile of the service while it runs @cmd (workers paused): SIGINT once it answered. */
static void profile_during(uint64_t flag, const char *cmd, const char *want, const char *out)
{
	char errpath[PATH_MAX], reply[64], *text = NULL;
	pid_t hp;
	int rc;

	snprintf(errpath, sizeof(errpath), "%s.err", out);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-q", "-o",
					out, NULL },
		      errpath);
	cr_assert(hb_wait_byte(svc.pid, flag, 1, 20000, hp), "heapbpf did not start");
	cr_assert_eq(svc_cmd(&svc, cmd, reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, want);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 30000);
	hb_read_file(errpath, &text);
	cr_assert_eq(rc, 0, "heapbpf during %s: %s", cmd, text ? text : "");
	free(text);
}

/* "rgb(R, G, B)" of the driver's "bg\tNAME" line. */
static void colour_of(const char *res, const char *name, int rgb[3])
{
	char key[128];
	const char *v;

	snprintf(key, sizeof(key), "bg\t%s", name);
	v = lookup(res, key);
	cr_assert_not_null(v, "%s is not drawn:\n%s", name, res);
	cr_assert_eq(sscanf(v, "rgb(%d, %d, %d)", &rgb[0], &rgb[1], &rgb[2]), 3, "%s: %s", name, v);
}

/* The byte sizes the page writes (summary_bytes(), profile/summary.c). */
static void human(int64_t b, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB" };
	double v = (double)b / 1024;
	int u = 0;

	if (b < 1024) {
		snprintf(buf, len, "%" PRId64 " B", b);
		return;
	}
	for (; v >= 1024 && u < 2; u++)
		v /= 1024;
	snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* In the sub line, the exact bytes of one side: "base PATH: in use 1.0 MiB (N bytes)". */
static int64_t side_bytes(const char *sub, const char *side, const char *path)
{
	char head[PATH_MAX + 32];
	const char *p;

	snprintf(head, sizeof(head), "%s %s: in use ", side, path);
	p = strstr(sub, head);
	cr_assert_not_null(p, "no \"%s\" in: %s", head, sub);
	p = strchr(p + strlen(head), '(');
	cr_assert_not_null(p, "%s", sub);
	return grouped_at(p + 1);
}

/*
 * Before: the service hoards 64 MiB (hoard_buffers); after: it holds 64 MiB
 * (held_buffers), each while one profile is taken, the workers paused. The
 * diff's page draws held_buffers red (only in NEW), hoard_buffers blue (only
 * in BASE), both visible, and its header has the two pprofs' totals.
 */
Test(flamegraph_page, diff_page_draws_growth_red_and_shrinkage_blue)
{
	char before[PATH_MAX], after[PATH_MAX], html[PATH_MAX], bad[PATH_MAX], err[8192];
	char reply[64], want[256], b[32], n[32], *res;
	const char *sub, *v;
	Perftools__Profiles__Profile *pb, *pa;
	int64_t base, new;
	uint64_t flag;
	int red[3], blue[3];

	start();
	cr_assert_eq(hb_sym_addr(svc.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert_eq(svc_cmd(&svc, "pause", reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "paused");
	tmp_file(before, "before.pb.gz");
	tmp_file(after, "after.pb.gz");
	tmp_file(html, "change.html");
	tmp_file(bad, "change.pb.gz");
	profile_during(flag, "hoard 64", "hoarded 1024", before);
	profile_during(flag, "hold 64", "held 64", after);
	cr_assert_eq(svc_stop(&svc), 0);

	/* a -f that disagrees with -o's name is refused before either file is read */
	cr_assert_eq(hb_run((const char *[]){ "diff", "no-such-base", "no-such-new", "-f", "html",
					      "-o", bad, NULL },
			    err, sizeof(err), 30000),
		     2, "%s", err);
	cr_assert(strstr(err, "is named for pprof but the format is html"), "%s", err);
	cr_assert_neq(access(bad, F_OK), 0);
	cr_assert_eq(hb_run((const char *[]){ "diff", before, after, "-f", "html", "-o", html, "-q",
					      NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);

	pb = load_pprof(before);
	pa = load_pprof(after);
	base = pprof_sum(pb, HB_INUSE_SPACE, NULL, EXACT);
	new = pprof_sum(pa, HB_INUSE_SPACE, NULL, EXACT);
	/* the known change, as the two profiles have it */
	cr_assert_gt(pprof_sum(pb, HB_INUSE_SPACE, "hoard_buffers", EXACT), 0);
	cr_assert_eq(pprof_sum(pa, HB_INUSE_SPACE, "hoard_buffers", EXACT), 0);
	cr_assert_eq(pprof_sum(pb, HB_INUSE_SPACE, "held_buffers", EXACT), 0);
	cr_assert_gt(pprof_sum(pa, HB_INUSE_SPACE, "held_buffers", EXACT), 0);

	res = browse(html, "search=buffers");
	check_common(res);
	/* the header: both totals, the files, the change */
	human(base, b, sizeof(b));
	human(new, n, sizeof(n));
	snprintf(want, sizeof(want), "in use %s \xe2\x86\x92 %s", b, n);
	cr_assert_eq(strncmp(lookup(res, "title"), want, strlen(want)), 0, "title: %s, not %s",
		     lookup(res, "title"), want);
	cr_assert_eq(lookup(res, "title")[strlen(want)], ' ', "%s", lookup(res, "title"));
	cr_assert(strstr(lookup(res, "doctitle"), want), "%s", lookup(res, "doctitle"));
	sub = lookup(res, "sub");
	cr_assert_eq(side_bytes(sub, "base", before), base, "%s", sub);
	cr_assert_eq(side_bytes(sub, "new", after), new, "%s", sub);
	cr_assert(strstr(lookup(res, "legend"), "grew") && strstr(lookup(res, "legend"), "shrank"));
	/* what grew is red, what shrank blue, both drawn */
	colour_of(res, "held_buffers", red);
	colour_of(res, "hoard_buffers", blue);
	cr_assert(red[0] > red[1] + 100 && red[0] > red[2] + 100, "held_buffers is rgb(%d, %d, %d)",
		  red[0], red[1], red[2]);
	cr_assert(blue[2] > blue[0] + 100 && blue[2] > blue[1] + 60,
		  "hoard_buffers is rgb(%d, %d, %d)", blue[0], blue[1], blue[2]);
	/* the details: base, new, change */
	v = lookup(res, "dhover\theld_buffers");
	cr_assert(v && strstr(v, "base 0 B (0 bytes), new ") && strstr(v, "): +"), "%s", v);
	v = lookup(res, "dhover\thoard_buffers");
	cr_assert(v && strstr(v, ", new 0 B (0 bytes): -") && strstr(v, ", -100.0%"), "%s", v);
	v = lookup(res, "match");
	cr_assert(v && strncmp(v, "Matched base ", 13) == 0, "%s", v);
	free(res);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	perftools__profiles__profile__free_unpacked(pa, NULL);
}

/* ---- made-up profiles ---- */

/* A profile of @nstacks samples over @nlocs one-line locations named by @name_of. */
static struct hb_profile *made_up(size_t nlocs, const char *(*name_of)(size_t, char *),
				  size_t nstacks, uint32_t (*stack_of)(size_t, size_t, uint32_t *),
				  int64_t (*value_of)(size_t))
{
	struct hb_profile *p = calloc(1, sizeof(*p));
	char buf[256];

	cr_assert_not_null(p);
	p->period = 524288;
	p->nlocations = nlocs;
	p->locations = calloc(nlocs, sizeof(*p->locations));
	p->nsamples = nstacks;
	p->samples = calloc(nstacks, sizeof(*p->samples));
	cr_assert(p->locations && p->samples);
	for (size_t i = 0; i < nlocs; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x400000 + i;
		l->nlines = 1;
		l->lines = calloc(1, sizeof(*l->lines));
		cr_assert_not_null(l->lines);
		l->lines[0].function = strdup(name_of(i, buf));
		l->lines[0].file = strdup("made-up.c");
		l->lines[0].line = (int64_t)i + 1;
		cr_assert(l->lines[0].function && l->lines[0].file);
	}
	for (size_t i = 0; i < nstacks; i++) {
		struct hb_sample *s = &p->samples[i];

		s->locs = calloc(64, sizeof(*s->locs));
		cr_assert_not_null(s->locs);
		s->nlocs = stack_of(i, nlocs, s->locs);
		s->v[HB_INUSE_SPACE] = s->v[HB_ALLOC_SPACE] = value_of(i);
		s->v[HB_INUSE_OBJECTS] = s->v[HB_ALLOC_OBJECTS] = 1;
	}
	return p;
}

static void write_page(const struct hb_profile *p, const char *path)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	cr_assert_eq(flamegraph_write(p, HB_INUSE_SPACE, f), 0);
	cr_assert_eq(fclose(f), 0);
}

static const char *const hostile[] = {
	"</script><script>window.pwned=1</script>",
	"<img src=x onerror=\"window.pwned=2\">",
	"a & b \"quoted\" 'single' <!-- not a comment -->",
	"operator<<(std::ostream&, Foo<Bar> const&)",
	"main",
};

static const char *hostile_name(size_t i, char *buf)
{
	(void)buf;
	return hostile[i];
}

/* main -> each of the others, one sample each */
static uint32_t hostile_stack(size_t i, size_t nlocs, uint32_t *locs)
{
	locs[0] = (uint32_t)i;
	locs[1] = (uint32_t)nlocs - 1;
	return 2;
}

static int64_t hostile_value(size_t i)
{
	return 1000 * ((int64_t)i + 1);
}

Test(flamegraph_page, names_with_markup_stay_text)
{
	struct hb_profile *p = made_up(5, hostile_name, 4, hostile_stack, hostile_value);
	char html[PATH_MAX], *res;

	cr_assert_eq(hb_profile_add_comment(p, "heapbpf 1.0: pid 99 (<i>x&y</i>), jemalloc 5.3.0 "
					       "in /srv/</title><b>bold</b>"),
		     0);
	tmp_file(html, "hostile.html");
	write_page(p, html);
	res = browse(html, "search=script");
	check_common(res);
	/* every name is on a frame as it was, and no markup came of it */
	cr_assert_eq(count_prefixed(res, "name_drawn\t1\t"), 6, "%s", res);
	cr_assert_eq(count_prefixed(res, "name_drawn\t"), 6);
	cr_assert_eq(count_lines(res, "matched\t</script><script>window.pwned=1</script>"), 1, "%s",
		     res);
	cr_assert_eq(count_lines(res, "doctitle\theapbpf: <i>x&y</i> (pid 99), in use 9.8 KiB in 4 "
				      "objects"),
		     1, "%s", res);
	cr_assert(
		strstr(lookup(res, "sub"), "jemalloc 5.3.0 in /srv/</title><b>bold</b> \xc2\xb7"));
	free(res);
	hb_profile__free(p);
}

/* ---- thousands of stacks ---- */

#define BIG_FUNCS  400
#define BIG_STACKS 6000

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static const char *big_name(size_t i, char *buf)
{
	if (i == 0)
		return "main";
	if (i <= 10)
		snprintf(buf, 64, "handler_%zu", i - 1);
	else
		snprintf(buf, 64, "ns::component_%03zu::operation_with_a_long_name", i);
	return buf;
}

/*
 * main -> handler_k (600 stacks each) -> 6..29 functions: the function at
 * each level is picked by a hash of the stack's number with fewer of its
 * bits the nearer the root, so stacks share prefixes and part at every level.
 */
static uint32_t big_stack(size_t i, size_t nlocs, uint32_t *locs)
{
	uint32_t depth = 6 + mix(i) % 24, n = depth + 2;

	locs[n - 1] = 0;
	locs[n - 2] = 1 + (i / 600) % 10;
	for (uint32_t lvl = 0; lvl < depth; lvl++) {
		size_t group = i >> (lvl < 12 ? 12 - lvl : 0);

		locs[n - 3 - lvl] = 11 + mix(group * 131 + lvl) % (nlocs - 11);
	}
	return n;
}

static int64_t big_value(size_t i)
{
	/* a heavy tail, as heaps have: most stacks small, a few large */
	return (int64_t)(1 + mix(i) % 4096) * (mix(i + 1) % 50 == 0 ? 4096 : 1);
}

Test(flamegraph_page, thousands_of_stacks_stay_responsive)
{
	struct hb_profile *p = made_up(BIG_FUNCS, big_name, BIG_STACKS, big_stack, big_value);
	struct flamegraph *fg;
	char html[PATH_MAX], *res;
	double nodes, frames;

	cr_assert_eq(flamegraph__new(p, HB_INUSE_SPACE, &fg), 0);
	cr_assert_gt(flamegraph__nnodes(fg), 30000, "a tree of %zu nodes", flamegraph__nnodes(fg));
	flamegraph__free(fg);
	tmp_file(html, "big.html");
	write_page(p, html);
	res = browse(html, "zoom=handler_3&search=component_04");
	check_common(res);
	nodes = num(res, "nodes");
	frames = num(res, "frames");
	/* frames narrower than half a pixel are not drawn: far fewer boxes than nodes */
	cr_assert_gt(frames, 100);
	cr_assert_lt(frames, nodes / 4, "%.0f frames drawn of %.0f nodes", frames, nodes);
	cr_assert_eq(num(res, "zoom_changed"), 1);
	cr_assert_eq(num(res, "reset_restores"), 1);
	/* generous bounds for a loaded two-core machine; each took well under 100 ms here */
	cr_log_info("flame graph of %.0f nodes, %.0f drawn: load %.0f ms, zoom %.1f ms, search "
		    "%.1f ms, invert %.1f ms",
		    nodes, frames, num(res, "ms\tload"), num(res, "ms\tzoom"),
		    num(res, "ms\tsearch"), num(res, "ms\tinvert"));
	cr_assert_lt(num(res, "ms\tload"), 15000);
	cr_assert_lt(num(res, "ms\tzoom"), 2000);
	cr_assert_lt(num(res, "ms\treset"), 2000);
	cr_assert_lt(num(res, "ms\tsearch"), 2000);
	cr_assert_lt(num(res, "ms\tinvert"), 3000);
	free(res);
	hb_profile__free(p);
}
