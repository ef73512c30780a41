// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Folded stack writer. Each location's frames are rendered to text once; a
 * sample's stack is the join of its pieces (its pid, then its locations'
 * texts, root first), which the sort compares without building it (the same
 * location at the same depth is skipped whole), so merging identical stacks
 * is a single pass over adjacent entries, the output does not depend on
 * sample order, and no stack's whole text is ever held in memory.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profile/folded.h"
#include "util/hashmap.h"

/* One location's frames as text; rank and prefix: of the first location with the same text. */
struct loc_text {
	char *text;
	size_t len;
	uint32_t rank; /* its place among the distinct texts, in strcmp() order */
	bool prefix;   /* a proper prefix of another text */
};

struct folded {
	const struct hb_profile *p;
	enum hb_value which;
	/*
	 * parallel to p->locations, then the texts of the pid roots (pids[],
	 * ascending) and "[unknown]": every piece a stack can have
	 */
	struct loc_text *locs;
	int64_t *pids;
	size_t npids, ntexts;
	bool any_prefix; /* some piece's text is a proper prefix of another's */
	uint32_t *tid;	 /* ... each one's first location with the same text */
	char *line;	 /* one line of output */
	size_t cap;
};

/* Copies @name into @dst (when not NULL) made safe for the format; returns its length. */
static size_t put_frame(char *dst, const char *name)
{
	size_t n = strlen(name);

	/* an empty frame would read as two separators */
	if (!n) {
		name = "[unknown]";
		n = strlen(name);
	}
	if (!dst)
		return n;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		/* ';' separates frames, and the line ends at a newline */
		if (c == ';')
			c = ':';
		else if (c == '\n' || c == '\t' || c == '\r')
			c = ' ';
		dst[i] = c;
	}
	return n;
}

/*
 * Appends ";name" (just "name" at the start) to the @len bytes of @dst (when
 * not NULL); an inlined frame gets the "_[i]" suffix flame graph tools know.
 */
static size_t append_frame(char *dst, size_t len, const char *name, bool inlined)
{
	static const char mark[] = "_[i]";

	if (len) {
		if (dst)
			dst[len] = ';';
		len++;
	}
	len += put_frame(dst ? dst + len : NULL, name);
	if (inlined) {
		if (dst)
			memcpy(dst + len, mark, sizeof(mark) - 1);
		len += sizeof(mark) - 1;
	}
	return len;
}

/* The frames of one location, outermost first, into @dst (when not NULL); returns the length. */
static size_t render_location(const struct hb_location *l, char *dst)
{
	char addr[2 + 16 + 1];
	size_t len = 0;

	if (!l->nlines) {
		/* unsymbolized: the address at least tells frames apart */
		snprintf(addr, sizeof(addr), "0x%" PRIx64, l->address);
		len = append_frame(dst, len, addr, false);
	}
	/* lines are callee first; all but the outermost are inlined into it */
	for (uint32_t j = l->nlines; j-- > 0;)
		len = append_frame(dst, len, l->lines[j].function, j + 1 < l->nlines);
	return len;
}

static int cmp_text(const void *a, const void *b, void *arg)
{
	const struct loc_text *lt = arg;

	return strcmp(lt[*(const uint32_t *)a].text, lt[*(const uint32_t *)b].text);
}

/*
 * The distinct texts' order (rank) and which are a proper prefix of
 * another (all texts that start with one sort right after it): where two
 * stacks first differ by texts that are no other's prefix, their ranks
 * order them.
 */
static int rank_texts(struct folded *fd)
{
	size_t n = 0;
	uint32_t *order = malloc((fd->ntexts ? fd->ntexts : 1) * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < fd->ntexts; i++) {
		if (fd->tid[i] == i)
			order[n++] = (uint32_t)i;
	}
	qsort_r(order, n, sizeof(*order), cmp_text, fd->locs);
	for (size_t r = 0, rank = 0, next; r < n; r = next, rank++) {
		const struct loc_text *t = &fd->locs[order[r]];
		bool prefix;

		/* the same text (a pid root named like a function): the same rank */
		for (next = r + 1; next < n && strcmp(fd->locs[order[next]].text, t->text) == 0;)
			next++;
		prefix = next < n && strncmp(fd->locs[order[next]].text, t->text, t->len) == 0;
		fd->any_prefix |= prefix;
		for (size_t k = r; k < next; k++) {
			fd->locs[order[k]].rank = (uint32_t)rank;
			fd->locs[order[k]].prefix = prefix;
		}
	}
	free(order);
	return 0;
}

/*
 * Every location's text, and which locations print the same: different
 * return addresses in one function (call sites) render identically, and
 * the sort skips such pieces as it skips the same location.
 */
static int render_all(struct folded *fd)
{
	struct hashmap by_text = {};
	int err = 0;

	for (size_t i = 0; !err && i < fd->p->nlocations; i++) {
		struct loc_text *t = &fd->locs[i];
		uint64_t h;
		size_t it = 0;
		uint32_t j;

		t->len = render_location(&fd->p->locations[i], NULL);
		t->text = malloc(t->len + 1);
		if (!t->text) {
			err = -ENOMEM;
			break;
		}
		render_location(&fd->p->locations[i], t->text);
		t->text[t->len] = '\0';
		fd->tid[i] = (uint32_t)i;
		h = hashmap_hash_bytes(t->text, t->len);
		while (hashmap__next(&by_text, h, &it, &j)) {
			const char *other = fd->locs[j].text;

			/* j was rendered before i: other is never NULL */
			if (other && fd->locs[j].len == t->len &&
			    memcmp(other, t->text, t->len) == 0) {
				fd->tid[i] = j;
				break;
			}
		}
		if (fd->tid[i] == i)
			err = hashmap__add(&by_text, h, (uint32_t)i);
	}
	hashmap__clear(&by_text);
	/* the pid roots' texts and "[unknown]", ranked with the locations' */
	for (size_t i = fd->p->nlocations; !err && i < fd->ntexts; i++) {
		struct loc_text *t = &fd->locs[i];
		size_t j = i - fd->p->nlocations;

		t->text = malloc(32);
		if (!t->text) {
			err = -ENOMEM;
			break;
		}
		if (j < fd->npids)
			t->len = (size_t)snprintf(t->text, 32, "pid %" PRId64, fd->pids[j]);
		else
			t->len = (size_t)snprintf(t->text, 32, "[unknown]");
		fd->tid[i] = (uint32_t)i;
	}
	return err ?: rank_texts(fd);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The distinct pids of the samples to write (idx), ascending. */
static int collect_pids(struct folded *fd, const uint32_t *idx, size_t n)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		m += fd->p->samples[idx[i]].pid != 0;
	fd->pids = malloc((m ? m : 1) * sizeof(*fd->pids));
	if (!fd->pids)
		return -ENOMEM;
	for (size_t i = 0, k = 0; i < n; i++) {
		if (fd->p->samples[idx[i]].pid)
			fd->pids[k++] = fd->p->samples[idx[i]].pid;
	}
	qsort(fd->pids, m, sizeof(*fd->pids), cmp_i64);
	fd->npids = 0;
	for (size_t i = 0; i < m; i++) {
		if (!fd->npids || fd->pids[fd->npids - 1] != fd->pids[i])
			fd->pids[fd->npids++] = fd->pids[i];
	}
	fd->ntexts = fd->p->nlocations + fd->npids + 1;
	return 0;
}

/*
 * Piece d of sample i as a symbol: its text's rank + 1, 0 past the end
 * (a stack that ends first sorts first, as its text is a prefix).
 */
static uint32_t symbol(const struct folded *fd, uint32_t i, size_t d)
{
	const struct hb_sample *s = &fd->p->samples[i];
	size_t lo = 0, hi = fd->npids;

	if (s->pid && d-- == 0) {
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (fd->pids[mid] < s->pid)
				lo = mid + 1;
			else
				hi = mid;
		}
		return fd->locs[fd->p->nlocations + lo].rank + 1;
	}
	if (!s->nlocs)
		return d ? 0 : fd->locs[fd->ntexts - 1].rank + 1;
	return d < s->nlocs ? fd->locs[fd->tid[s->locs[s->nlocs - 1 - d]]].rank + 1 : 0;
}

static void swap_idx(uint32_t *a, size_t i, size_t j)
{
	uint32_t t = a[i];

	a[i] = a[j];
	a[j] = t;
}

/*
 * Multikey quicksort of samples by their symbols from depth d on (when no
 * piece's text is a prefix of another's, that is strcmp() order of the
 * whole stack texts): each sample's common prefix with its neighbours is
 * read once per partition, not once per comparison. Of the three parts
 * (below the pivot, equal: one piece deeper, above), the largest is sorted
 * by the loop and the others by recursion: each at most half, so the
 * recursion is at most log2(n) deep, however long the stacks.
 */
static void mkqs(const struct folded *fd, uint32_t *a, size_t n, size_t d)
{
	while (n > 1) {
		uint32_t pivot = symbol(fd, a[n / 2], d);
		size_t lt = 0, gt = n, i = 0, neq;

		/* a[0, lt) < pivot, a[lt, i) == pivot, a[gt, n) > pivot */
		while (i < gt) {
			uint32_t v = symbol(fd, a[i], d);

			if (v < pivot)
				swap_idx(a, lt++, i++);
			else if (v > pivot)
				swap_idx(a, i, --gt);
			else
				i++;
		}
		/* equal and ended (pivot 0): the same stack, nothing more to order */
		neq = pivot ? gt - lt : 0;
		if (neq >= lt && neq >= n - gt) {
			mkqs(fd, a, lt, d);
			mkqs(fd, a + gt, n - gt, d);
			a += lt;
			n = neq;
			d++;
		} else if (lt >= n - gt) {
			mkqs(fd, a + lt, neq, d + 1);
			mkqs(fd, a + gt, n - gt, d);
			n = lt;
		} else {
			mkqs(fd, a, lt, d);
			mkqs(fd, a + lt, neq, d + 1);
			a += gt;
			n -= gt;
		}
	}
}

/*
 * Piece k of sample @s's stack (@buf holds a pid's): the process with
 * --follow-forks (each one a tree of its own), then its locations root
 * first, or "[unknown]" without any. The pieces are joined by ';'.
 */
static size_t npieces(const struct hb_sample *s)
{
	return (s->pid ? 1 : 0) + (s->nlocs ? s->nlocs : 1);
}

static const char *piece(struct folded *fd, const struct hb_sample *s, size_t k, char buf[32],
			 size_t *len)
{
	const struct loc_text *t;

	if (s->pid && k-- == 0) {
		*len = (size_t)snprintf(buf, 32, "pid %" PRId64, s->pid);
		return buf;
	}
	if (!s->nlocs) {
		*len = strlen("[unknown]");
		return "[unknown]";
	}
	t = &fd->locs[s->locs[s->nlocs - 1 - k]];
	*len = t->len;
	return t->text;
}

/* A reader of one sample's joined stack text, byte by byte; -1 at its end. */
struct cursor {
	struct folded *fd;
	const struct hb_sample *s;
	size_t k, n, off, len;
	const char *text;
	char buf[32];
};

static void cursor_at(struct cursor *c, struct folded *fd, const struct hb_sample *s, size_t k)
{
	c->fd = fd;
	c->s = s;
	c->k = k;
	c->n = npieces(s);
	c->off = 0;
	c->text = k < c->n ? piece(fd, s, k, c->buf, &c->len) : "";
	if (k >= c->n)
		c->len = 0;
}

static int cursor_next(struct cursor *c)
{
	if (c->off < c->len)
		return (unsigned char)c->text[c->off++];
	if (c->k + 1 >= c->n)
		return -1;
	c->k++;
	c->text = piece(c->fd, c->s, c->k, c->buf, &c->len);
	c->off = 0;
	return ';';
}

/*
 * The first piece where x's and y's texts may differ: the same pid and then
 * locations that print the same (the same location, or another call site
 * in the same function) are equal text.
 */
static size_t first_difference(const uint32_t *tid, const struct hb_sample *x,
			       const struct hb_sample *y)
{
	size_t k = x->pid ? 1 : 0, m = x->nlocs < y->nlocs ? x->nlocs : y->nlocs;
	const uint32_t *lx = x->locs + x->nlocs, *ly = y->locs + y->nlocs;

	if (x->pid != y->pid)
		return 0;
	if (!x->nlocs || !y->nlocs)
		return x->nlocs || y->nlocs ? k : k + 1;
	for (size_t i = 1; i <= m;) {
		uint64_t pa, pb;
		uint32_t a, b;

		/* stacks share long runs of the same locations: two at a time */
		if (i < m) {
			memcpy(&pa, lx - i - 1, sizeof(pa));
			memcpy(&pb, ly - i - 1, sizeof(pb));
			if (pa == pb) {
				i += 2;
				continue;
			}
		}
		a = lx[-(ptrdiff_t)i];
		b = ly[-(ptrdiff_t)i];
		if (a != b && tid[a] != tid[b])
			return k + i - 1;
		i++;
	}
	return k + m;
}

/* strcmp() of the two samples' joined texts, without joining them. */
static int cmp_sample(const void *a, const void *b, void *arg)
{
	struct folded *fd = arg;
	const struct hb_sample *x = &fd->p->samples[*(const uint32_t *)a];
	const struct hb_sample *y = &fd->p->samples[*(const uint32_t *)b];
	size_t nx = npieces(x), ny = npieces(y), k = first_difference(fd->tid, x, y);
	struct cursor cx, cy;

	if (k >= nx && k >= ny)
		return 0;
	if (k < nx && k < ny && x->pid == y->pid && (k || !x->pid) && x->nlocs && y->nlocs) {
		/* two locations' texts: decided by them unless one is a prefix of another */
		size_t d = k - (x->pid ? 1 : 0);
		const struct loc_text *tx = &fd->locs[fd->tid[x->locs[x->nlocs - 1 - d]]];
		const struct loc_text *ty = &fd->locs[fd->tid[y->locs[y->nlocs - 1 - d]]];

		if (!tx->prefix && !ty->prefix)
			return tx->rank < ty->rank ? -1 : 1;
	}
	/* the texts agree up to piece k (and the ';' before it, when k > 0) */
	cursor_at(&cx, fd, x, k);
	cursor_at(&cy, fd, y, k);
	for (;;) {
		int u = k < nx ? cursor_next(&cx) : -1, v = k < ny ? cursor_next(&cy) : -1;

		if (u != v)
			return u < v ? -1 : 1;
		if (u < 0)
			return 0;
	}
}

/* Sample @s's stack text into fd->line (grown as needed); its length, or 0 without memory. */
static size_t line_of(struct folded *fd, const struct hb_sample *s)
{
	size_t len = 0, n = npieces(s), plen;
	char buf[32];

	for (size_t k = 0; k < n; k++) {
		const char *t = piece(fd, s, k, buf, &plen);

		/* room for ';', the piece and, at the end, " BASE NEW\n" */
		if (len + plen + 64 > fd->cap) {
			size_t ncap = (len + plen + 64) * 2;
			char *nl = realloc(fd->line, ncap);

			if (!nl)
				return 0;
			fd->line = nl;
			fd->cap = ncap;
		}
		if (k)
			fd->line[len++] = ';';
		memcpy(fd->line + len, t, plen);
		len += plen;
	}
	return len;
}

/* diff: "stack BASE NEW", the two-column input of differential flame graphs */
static int write_stacks(struct folded *fd, const uint32_t *idx, size_t n, bool diff, FILE *f)
{
	const struct hb_sample *smp = fd->p->samples;

	for (size_t i = 0; i < n;) {
		int64_t sum[2] = { 0, 0 };
		size_t j, len;

		for (j = i; j < n && (j == i || cmp_sample(&idx[i], &idx[j], fd) == 0); j++) {
			const struct hb_sample *s = &smp[idx[j]];
			int64_t *acc = &sum[s->diff_base ? 0 : 1];

			/* saturate rather than wrap: a wrapped sum would go negative */
			if (__builtin_add_overflow(
				    *acc, s->diff_base ? -s->v[fd->which] : s->v[fd->which], acc))
				*acc = INT64_MAX;
		}
		len = line_of(fd, &smp[idx[i]]);
		if (!len)
			return -ENOMEM;
		len += (size_t)(diff ? snprintf(fd->line + len, 64, " %" PRId64 " %" PRId64 "\n",
						sum[0], sum[1])
				     : snprintf(fd->line + len, 64, " %" PRId64 "\n", sum[1]));
		errno = 0;
		if (fwrite(fd->line, 1, len, f) != len)
			return errno ? -errno : -EIO;
		i = j;
	}
	return 0;
}

int folded_write(const struct hb_profile *p, enum hb_value which, FILE *f)
{
	struct folded fd = { .p = p, .which = which };
	uint32_t *idx = NULL;
	size_t n = 0;
	bool diff = false;
	int err = 0;

	if ((unsigned int)which >= HB_NVALUES || hb_profile_check_samples(p))
		return -EINVAL;
	if (p->nsamples > UINT32_MAX)
		return -E2BIG;

	for (size_t i = 0; i < p->nsamples && !diff; i++)
		diff = p->samples[i].diff_base;
	idx = calloc(p->nsamples ? p->nsamples : 1, sizeof(*idx));
	if (!idx) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];

		/* a diff's base samples are negated: what counts is that they are not zero */
		if (diff ? !s->v[which] : s->v[which] <= 0)
			continue;
		idx[n++] = (uint32_t)i;
	}
	err = collect_pids(&fd, idx, n);
	if (err)
		goto out;
	fd.locs = calloc(fd.ntexts, sizeof(*fd.locs));
	fd.tid = calloc(fd.ntexts, sizeof(*fd.tid));
	err = fd.locs && fd.tid ? render_all(&fd) : -ENOMEM;
	if (err)
		goto out;
	if (fd.any_prefix)
		qsort_r(idx, n, sizeof(*idx), cmp_sample, &fd);
	else
		mkqs(&fd, idx, n, 0);
	err = write_stacks(&fd, idx, n, diff, f);
	if (err)
		goto out;
	/* buffered write errors only show up on flush: report them here, not later */
	errno = 0;
	if (fflush(f))
		err = errno ? -errno : -EIO;
	else if (ferror(f))
		err = -EIO;
out:
	for (size_t i = 0; fd.locs && i < fd.ntexts; i++)
		free(fd.locs[i].text);
	free(fd.pids);
	free(fd.locs);
	free(fd.tid);
	free(fd.line);
	free(idx);
	return err;
}
