// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "collect/collector.h"
#include "util/errmsg.h"
#include "heap/heapwalk.h"
#include "heap/memsrc_proc.h"
#include "profile/report.h"
#include "sampling/session.h"
#include "jemalloc/target.h"
#include "run/top.h"
#include "profile/wrappers.h"

struct top {
	struct top_opts o;
	struct top_ui ui;
	bool screen; /* stdout is a terminal: the full-screen view */
	bool keys;   /* stdin is a terminal too: raw mode and keys */
	bool raw_on, alt_on, mask_set;
	struct termios saved;
	sigset_t saved_mask;
	int wfd;		/* SIGWINCH, read through a signalfd */
	struct top_snap last;	/* the latest snapshot */
	struct top_frame frame; /* the interval on show (kept while paused) */
	bool have_frame;
	struct top_view shown; /* the header values of the interval on show */
	uint64_t last_samples;
	/* the live heap: read each interval unless it cannot be (no layout, a failed read) */
	bool live_off, have_syms;
	struct heapwalk_syms sy;
	int64_t live_next; /* CLOCK_MONOTONIC ns before which it is not read again */
};

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void term_size(int *w, int *h)
{
	struct winsize ws;

	*w = 80;
	*h = 24;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*w = ws.ws_col;
		*h = ws.ws_row;
	}
}

/* The screen's lines as drawn: from the top left, each cleared to its end, no scrolling. */
static void put_screen(FILE *out, const char *text)
{
	fputs("\x1b[H", out);
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) : strlen(text);

		fwrite(text, 1, n, out);
		fputs("\x1b[K", out);
		text += n + !!nl;
		if (*text)
			fputs("\r\n", out);
	}
	fputs("\x1b[J", out);
}

/* Renders the view into one buffer; *buf is the caller's to free. */
static int render(struct top *t, char **buf, size_t *len)
{
	struct top_view v = t->shown;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(buf, len);
	FILE *tf = NULL;
	int w, h, rc;

	if (!f)
		return -ENOMEM;
	v.ui = t->ui;
	v.frame = t->have_frame ? &t->frame : NULL;
	if (!t->screen) {
		rc = topview_render_table(f, &v, TOP_TABLE_ROWS);
		return fclose(f) && !rc ? -ENOMEM : rc;
	}
	term_size(&w, &h);
	tf = open_memstream(&text, &tlen);
	rc = tf ? topview_render_screen(tf, &v, w, h) : -ENOMEM;
	if (tf && fclose(tf) && !rc)
		rc = -ENOMEM;
	if (!rc)
		put_screen(f, text);
	free(text);
	return fclose(f) && !rc ? -ENOMEM : rc;
}

/* Draws the view (or prints a table); 1 when stdout is gone (the session then ends). */
static int show(struct top *t)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = render(t, &buf, &len);

	if (!rc && write_all(STDOUT_FILENO, buf, len))
		rc = 1;
	free(buf);
	return rc;
}

/*
 * The whole live heap as jemalloc's tables hold it (what --live-heap
 * writes): everything sampled while prof_active was on, before heapbpf
 * attached too, and not freed. A table that changed under every attempt
 * keeps the last value; anything else that fails turns the reading off.
 * The ring buffer waits while the tables are read: a read takes at most a
 * twentieth of the time (one of 40 ms waits 800 ms for the next), and one
 * past LIVE_MAX_NS turns the reading off.
 */
#define LIVE_MAX_NS (250 * 1000000LL)

static void read_live(struct top *t)
{
	const struct jemalloc_target *jt = t->o.t;
	struct heapwalk_stats st = { 0 };
	struct heapwalk_opts wo;
	struct collector *c = NULL;
	struct mem_source m = { 0 };
	char err[512];
	int rc;

	int64_t began = hb_clock_ns(CLOCK_MONOTONIC), took;

	if (t->live_off || !jt || began < t->live_next)
		return;
	if (!t->have_syms) {
		rc = heapwalk_target_syms(jt, &t->sy, err, sizeof(err));
		t->have_syms = !rc;
		t->live_off = rc != 0;
		if (rc)
			return;
	}
	rc = collector__new(1ull << jt->lg_prof_sample, &c);
	rc = rc ?: memsrc_proc_open(jt->pid, &m, err, sizeof(err));
	if (!rc) {
		heapwalk_default_opts(&wo);
		rc = heapwalk_read(&m, jt->layout, &t->sy, &wo, c, &st, err, sizeof(err));
		memsrc_proc_close(&m);
	}
	collector__free(c);
	took = hb_clock_ns(CLOCK_MONOTONIC) - began;
	t->live_next = began + 20 * took;
	if (took > LIVE_MAX_NS) {
		t->live_off = true;
		t->shown.live_known = false;
		return;
	}
	if (rc) {
		t->live_off = rc != -EAGAIN;
		t->shown.live_known &= !t->live_off;
		return;
	}
	t->shown.live_known = true;
	t->shown.live_bytes = t->o.raw ? (double)st.curbytes : st.inuse_space;
}

/* Every interval: a snapshot, the interval since the last one, and the view redrawn. */
static int on_interval(struct session *s, void *arg)
{
	struct top *t = arg;
	const struct collector_stats *st = collector__stats(s->collector);
	struct report_opts ro = {
		.raw = t->o.raw,
		.pid = t->o.pid,
		.procs = s->procs,
		.nprocs = s->nprocs,
		.wrappers = t->o.wrappers,
		.nwrappers = t->o.nwrappers,
	};
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC), wall = hb_clock_ns(CLOCK_REALTIME);
	struct hb_profile *p = NULL;
	struct top_snap snap;
	struct top_frame fr;
	int rc;

	rc = report__build(s->collector, s->symbolizer, t->o.t, &ro, &p);
	rc = rc ?: topview_snap_build(p, now, &snap);
	hb_profile__free(p);
	if (rc)
		return rc;
	/* the first interval starts when sampling was switched on */
	if (!t->last.mono_ns)
		t->last.mono_ns = now - (wall - s->start_wall_ns);
	rc = topview_frame_build(&t->last, &snap, &fr);
	topview_snap_free(&t->last);
	t->last = snap;
	if (rc)
		return rc;
	if (t->ui.paused) {
		/* sampling goes on; the screen keeps the interval it shows */
		topview_frame_free(&fr);
		t->last_samples = st->allocs;
		return 0;
	}
	topview_frame_free(&t->frame);
	t->frame = fr;
	t->have_frame = true;
	t->shown.elapsed = (wall - s->start_wall_ns) / 1e9;
	t->shown.samples = st->allocs;
	t->shown.interval_samples = st->allocs - t->last_samples;
	t->shown.sampled_bytes = st->alloc_bytes;
	t->shown.frees = st->frees_matched;
	t->shown.earlier_frees = st->frees_unmatched;
	t->shown.drops = s->counters.alloc_drops + s->counters.free_drops;
	t->last_samples = st->allocs;
	read_live(t);
	return show(t);
}

static int on_keys(struct session *s, void *arg)
{
	struct top *t = arg;
	char buf[64];
	int avail = 0;
	ssize_t n;

	(void)s;
	/* readable with nothing to read: the terminal hung up (ssh gone, tmux pane killed) */
	if (ioctl(STDIN_FILENO, FIONREAD, &avail) || avail <= 0)
		return 1;
	n = read(STDIN_FILENO, buf, (size_t)avail < sizeof(buf) ? (size_t)avail : sizeof(buf));
	if (n <= 0)
		return n < 0 && errno == EINTR ? 0 : 1;
	switch (topview_keys(&t->ui, buf, (size_t)n)) {
	case TOP_QUIT:
		return 1;
	case TOP_REDRAW:
		return show(t);
	default:
		return 0;
	}
}

static int on_winch(struct session *s, void *arg)
{
	struct top *t = arg;
	struct signalfd_siginfo si;

	(void)s;
	if (read(t->wfd, &si, sizeof(si)) != sizeof(si))
		return 0;
	return show(t);
}

/* Keys one at a time, not echoed; Ctrl-C and Ctrl-Z arrive as keys, not as signals. */
static int raw_mode(struct top *t)
{
	struct termios tio;

	if (tcgetattr(STDIN_FILENO, &t->saved))
		return -errno;
	tio = t->saved;
	tio.c_lflag &= ~(ICANON | ECHO | ISIG | IEXTEN);
	tio.c_iflag &= ~(IXON | ICRNL);
	tio.c_cc[VMIN] = 1;
	tio.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &tio))
		return -errno;
	t->raw_on = true;
	return 0;
}

/* SIGWINCH blocked and read through a descriptor on the session's event loop. */
static int winch_fd(struct top *t)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	if (sigprocmask(SIG_BLOCK, &set, &t->saved_mask))
		return -errno;
	t->mask_set = true;
	t->wfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return t->wfd < 0 ? -errno : 0;
}

static const char enter_screen[] = "\x1b[?1049h\x1b[?25l\x1b[2J";
static const char leave_screen[] = "\x1b[?25h\x1b[?1049l";

int top__new(const struct top_opts *o, struct top **out, char *err, size_t errlen)
{
	struct top *t = calloc(1, sizeof(*t));
	int rc;

	*out = NULL;
	if (!t)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	t->o = *o;
	t->ui = o->ui;
	t->wfd = -1;
	t->shown = (struct top_view){
		.pid = o->pid,
		.comm = o->t ? o->t->comm : NULL,
		.raw = o->raw,
	};
	t->screen = isatty(STDOUT_FILENO);
	t->keys = t->screen && isatty(STDIN_FILENO);
	if (t->screen) {
		rc = winch_fd(t);
		rc = rc ?: t->keys ? raw_mode(t) : 0;
		if (!rc) {
			t->alt_on = true;
			rc = write_all(STDOUT_FILENO, enter_screen, sizeof(enter_screen) - 1);
		}
		rc = rc ?: show(t);
		if (rc) {
			top__free(t);
			return hb_fail(err, errlen, rc < 0 ? rc : -EIO,
				       "cannot set up the terminal: %s",
				       strerror(rc < 0 ? -rc : EIO));
		}
	}
	*out = t;
	return 0;
}

void top__session_opts(struct top *t, struct session_opts *so)
{
	so->interval = 1;
	so->on_interval = on_interval;
	so->interval_arg = t;
	so->on_status = NULL;
	so->nwatch = 0;
	if (t->keys)
		so->watch[so->nwatch++] = (struct session_watch){ STDIN_FILENO, on_keys, t };
	if (t->wfd >= 0)
		so->watch[so->nwatch++] = (struct session_watch){ t->wfd, on_winch, t };
}

void top__free(struct top *t)
{
	if (!t)
		return;
	/* each step on its own: a terminal that hung up refuses them, and that is fine */
	if (t->alt_on)
		write_all(STDOUT_FILENO, leave_screen, sizeof(leave_screen) - 1);
	if (t->raw_on)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	if (t->wfd >= 0)
		close(t->wfd);
	if (t->mask_set)
		sigprocmask(SIG_SETMASK, &t->saved_mask, NULL);
	topview_snap_free(&t->last);
	topview_frame_free(&t->frame);
	free(t);
}
