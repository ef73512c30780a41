// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/diff.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "export/sink.h"
#include "profile/diff.h"
#include "profile/summary.h"
#include "profile/wrappers.h"
#include "cli/cli.h"
#include "run/run.h"
#include "util/errmsg.h"
#include "util/version.h"

/* heapbpf diff --help */
const char diff_help[] =
	"Usage: heapbpf diff BASE NEW [options]\n"
	"\n"
	"heapbpf diff BASE NEW: what changed between two profiles (pprof files, heapbpf's or\n"
	"any with Go's heap sample types, or recordings), stacks matched by function and file\n"
	"so that a rebuilt binary still matches. Prints the largest changes of -t (default\n"
	"inuse_space) and writes the differential profile: pprof in pprof's -diff_base form\n"
	"(the base negated, labelled pprof::base), folded as \"stack BASE NEW\" for\n"
	"differential flame graphs, or html: a differential flame graph page, each frame as\n"
	"wide as the larger of its base and new -t value, red where it grew, blue where it\n"
	"shrank, base, new and change on hover (default heap-TIME-diff.pb.gz).\n"
	"Each change is shown leaf first, from its site named past allocator wrappers.\n"
	"  -o, -f pprof|folded|html, -t, --binary-path, --debug-dir, --wrapper,\n"
	"  --file-mode, --allow-shared-dir, -q     as heapbpf --help says\n"
	"  heapbpf diff before.pb.gz after.pb.gz -t alloc_space -f folded -o change.folded\n"
	"  heapbpf diff before.pb.gz after.pb.gz -o change.html\n"
	"\n" HB_EXIT_STATUS_HELP;

/* ---- heapbpf diff BASE NEW ---- */

/*
 * "site <- caller <- ...": leaf first from the site past allocator
 * wrappers, each frame by its outermost line (the function the code is
 * in), cut at the root end with "<- ..." when it does not fit in len.
 */
static void stack_text(const struct diff *d, const struct diff_stack *st, char *buf, size_t len)
{
	static const char more[] = " <- ...";
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t i = st->site; i < st->nlocs; i++) {
		const struct hb_location *l = &d->p->locations[st->locs[i]];
		const char *f = l->nlines ? l->lines[l->nlines - 1].function : "??";
		int k = snprintf(buf + n, len - n, "%s%s", i > st->site ? " <- " : "",
				 f ? f : "??");

		if (k < 0 || n + (size_t)k + sizeof(more) > len) {
			if (n + sizeof(more) <= len)
				memcpy(buf + n, more, sizeof(more));
			else
				buf[n] = '\0';
			return;
		}
		n += (size_t)k;
	}
}

static void value_text(char *buf, size_t len, enum hb_value which, int64_t v)
{
	char b[24];

	if (which == HB_ALLOC_SPACE || which == HB_INUSE_SPACE) {
		summary_bytes(b, sizeof(b), (double)llabs(v));
		snprintf(buf, len, "%s%s", v < 0 ? "-" : "+", b);
	} else {
		snprintf(buf, len, "%+" PRId64, v);
	}
}

/* The top changes on stderr, largest first, with their sign. */
static void print_top(const struct diff *d, enum hb_value which, const char *base, const char *new)
{
	size_t idx[10], n = diff_top(d, which, idx, 10);
	char total[32], v[32], stack[512], clean[HB_CLEAN_SIZE(512)];
	char new_name[HB_CLEAN_SIZE(PATH_MAX)], base_name[HB_CLEAN_SIZE(PATH_MAX)];

	value_text(total, sizeof(total), which, d->new_total[which] - d->base_total[which]);
	hb_note("%s minus %s, %s: %s in total; the largest changes:",
		hb_clean(new_name, sizeof(new_name), new),
		hb_clean(base_name, sizeof(base_name), base), hb_value_names[which], total);
	for (size_t i = 0; i < n; i++) {
		const struct diff_stack *st = &d->stacks[idx[i]];

		value_text(v, sizeof(v), which, st->new[which] - st->base[which]);
		stack_text(d, st, stack, sizeof(stack));
		hb_note_more("  %12s  %s", v, hb_clean(clean, sizeof(clean), stack));
	}
	if (!n)
		hb_note_more("  (no stack changed)");
	if (!wrappers_text(stack, sizeof(stack), d->p))
		hb_note("%s", stack);
}

/* The files compared, for the flame graph page's header. */
static int name_sides(struct hb_profile *p, const char *base, const char *new)
{
	p->diff_files[0] = strdup(base);
	p->diff_files[1] = strdup(new);
	return p->diff_files[0] && p->diff_files[1] ? 0 : -ENOMEM;
}

/*
 * heapbpf diff BASE NEW: two profiles compared. -t is the type its summary
 * ranks the changes by (and the one folded and html carry), whatever the
 * format: never refused.
 */
int diff_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	int rc;

	if (n < 2)
		return cli_bad("diff needs two profiles: BASE and NEW");
	c->diff_paths[0] = operands[0];
	c->diff_paths[1] = operands[1];
	if (g->pid || g->duration || c->run.record || c->run.layout || c->run.reset ||
	    c->run.follow_forks || c->run.children || c->from || c->to >= 0 || c->run.raw)
		return cli_bad(
			"diff compares two profiles: --pid, --duration, --record, "
			"--follow-forks, --children, --jemalloc-layout, --from, --to and --raw "
			"do not apply");
	rc = checks_resolve_format(c);
	if (rc)
		return rc;
	return checks_no_operand(n - 2, operands + 2) ?: checks_refuse_live_heap(c) ?: checks_refuse_top_keys(g)
		       ?: checks_at_peak(c) ?: checks_refuse_fleet_options(c)
		       ?: checks_combinations(c, false, g->duration);
}

int diff_command(const struct cli *o, struct run *r, char *err, size_t errlen)
{
	(void)r;
	struct hb_profile *base = NULL, *new = NULL;
	struct diff *d = NULL;
	struct sink s = {
		.kind = SINK_FILE,
		.format = o->run.format,
		.sample_type = o->run.sample_type,
		.path = o->run.output,
	};
	char outbuf[64];
	int rc;

	if (!s.path) {
		sink_default_name(outbuf, sizeof(outbuf), "diff", o->run.format);
		s.path = outbuf;
	}

	rc = diff_load(o->diff_paths[0], o->binary_dirs, &base, err, errlen);
	rc = rc ?: diff_load(o->diff_paths[1], o->binary_dirs, &new, err, errlen);
	rc = rc ?: diff__new(base, new, &d);
	/* named as the live run names them, the note on the page and in the text */
	rc = rc ?: diff_wrappers(d, (const char *const *)o->run.wrappers, o->run.nwrappers);
	rc = rc
		     ?: hb_profile_add_comment(d->p, "heapbpf %s: diff, %s minus %s",
					       HEAPBPF_VERSION, o->diff_paths[1], o->diff_paths[0]);
	rc = rc ?: name_sides(d->p, o->diff_paths[0], o->diff_paths[1]);
	if (rc && !err[0])
		hb_fail(err, errlen, rc, "cannot compare the profiles: %s", strerror(-rc));
	if (!rc)
		print_top(d, o->run.sample_type, o->diff_paths[0], o->diff_paths[1]);
	if (!rc) {
		rc = sink_write(d->p, &s, err, errlen);
		if (!rc && strcmp(s.path, "-") != 0) {
			char path[HB_CLEAN_SIZE(PATH_MAX)];

			hb_note("wrote %s", hb_clean(path, sizeof(path), s.path));
		}
	}
	diff__free(d);
	hb_profile__free(base);
	hb_profile__free(new);
	return rc;
}
