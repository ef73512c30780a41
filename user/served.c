// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "errmsg.h"
#include "guard.h"
#include "replay.h"
#include "runs.h"
#include "serve.h"
#include "session.h"
#include "served.h"
#include "window.h"

bool served_can(const struct cli *o, size_t ntargets)
{
	return o->mode == MODE_LIVE && !o->watch && !o->interval && !o->reset && !o->record &&
	       !o->follow_forks && !o->children && !o->live_heap && ntargets == 1;
}

/* The stop signals (blocked since main's start) as a descriptor: they end the window early. */
static int stop_signals(void)
{
	sigset_t set;

	session_stop_signals(&set);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The recording in fd made into tr's outputs, as heapbpf report makes them. */
static int write_window(struct target_run *tr, int fd, char *err, size_t errlen)
{
	const struct cli *o = tr->run->opts;
	struct replay_opts ro = { .to = -1, .temporary_ns = o->temporary_ns };
	const struct jemalloc_target *t = tr->t;
	struct heap_data d;
	struct replay *rp;
	char path[64];
	int rc;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = replay__load(path, &ro, &rp, err, errlen);
	if (rc)
		return rc;
	tr->t = &rp->ident;
	tr->start_ns = rp->start_wall_ns;
	d = (struct heap_data){
		.collector = rp->collector,
		.symbolizer = rp->symbolizer,
		.counters = &rp->counters,
	};
	rc = window_last(tr, &d, rp->start_wall_ns + rp->duration_ns, err, errlen);
	tr->t = t;
	replay__free(rp);
	return rc;
}

int served_window(struct target_run *tr, const struct jemalloc_target *t, char *err, size_t errlen)
{
	const struct cli *o = tr->run->opts;
	pid_t holder = runs_lock_holder(guard_dir(), tr->pid);
	char comm[HB_CLEAN_SIZE(sizeof(t->comm))], version[HB_CLEAN_SIZE(sizeof(t->version))];
	char path[HB_CLEAN_SIZE(256)];
	struct runs_entry e;
	int rc, fd, sfd;

	if (holder <= 0)
		return hb_fail(err, errlen, -EAGAIN,
			       "pid %d was held by another heapbpf, which %s; run again", tr->pid,
			       holder ? "is still taking it" : "let it go meanwhile");
	if (runs_holder_of(guard_dir(), tr->pid, &e))
		snprintf(e.mode, sizeof(e.mode), "run");
	hb_note("pid %d (%s): jemalloc %s in %s, sampling every %llu bytes on average, by heapbpf "
		"%s (pid %d), which holds it: this run's window comes from it%s",
		tr->pid, hb_clean(comm, sizeof(comm), t->comm),
		hb_clean(version, sizeof(version), t->version),
		hb_clean(path, sizeof(path), t->path), 1ULL << t->lg_prof_sample, e.mode, holder,
		o->duration > 0 ? "" : "; Ctrl-C to stop");
	fd = memfd_create("heapbpf-window", MFD_CLOEXEC);
	sfd = stop_signals();
	if (fd < 0 || sfd < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		if (sfd >= 0)
			close(sfd);
		return hb_fail(err, errlen, rc, "cannot ask for the window: %s", strerror(-rc));
	}
	rc = serve_ask(guard_dir(), holder, tr->pid, (uint64_t)(o->duration * 1e9), fd, sfd, err,
		       errlen);
	close(sfd);
	tr->t = t;
	rc = rc ?: write_window(tr, fd, err, errlen);
	close(fd);
	return rc;
}
