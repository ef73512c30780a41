// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "util/hooks.h"
#include "util/errmsg.h"
#include "heapbpf.h"

#include "heapbpf.skel.h"
#include "sampling/probes.h"
#include "sampling/vclock.h"

struct probes {
	struct heapbpf_bpf *skel;
	struct bpf_link *fork_link, *exec_link; /* the targets' process trees, attached once */
	struct bpf_link *oom_link;		/* heapbpf watch: OOM victims among them */
	bool oom;
	/*
	 * by_file: the sampling uprobes are attached once per object file (the
	 * files below) for every process, and BPF keeps the samples of the pids
	 * in its `sampled` map only; else once per pid.
	 */
	bool by_file;
	/* without by_file: targets attached (one coarse clock address serves the first's tree) */
	unsigned int direct_targets;
	/* HEAPBPF_BENCH_PARTS: bench/bpfstats.py's decomposition (HEAPBPF_PART_*), else 0 */
	unsigned long bench_parts;
	struct probed_file *files;
	size_t nfiles;
	/* alloc and free uprobes of every target and followed child (or of every file) */
	struct bpf_link **links;
	size_t nlinks;
	/* t->activity_off of each target, while the late-activation check runs */
	struct bpf_link **activity;
	size_t nactivity;
	struct ring_buffer *rb;
};

/*
 * An object file whose sampling functions carry uprobes for every process
 * (by_file): its two links (in links too), and how many targets use them.
 * An entry whose users all left keeps its place, without links.
 */
struct probed_file {
	dev_t dev;
	ino_t ino;
	uint64_t alloc_off, free_off;
	size_t users;
	struct bpf_link *link[2];
};

static size_t round_pow2_pages(size_t bytes)
{
	size_t v = 4096;

	/* BPF ring buffers are a power-of-two number of pages */
	while (v < bytes && v < ((size_t)1 << 30))
		v <<= 1;
	return v;
}

/* The architecture this heapbpf was compiled for, in the words of probes__regs_arch(). */
#if defined(__x86_64__)
#define PROBES_HOST_ARCH "x86-64"
#elif defined(__aarch64__)
#define PROBES_HOST_ARCH "arm64"
#else
#define PROBES_HOST_ARCH "unknown"
#endif

const char *probes__regs_arch(const struct btf *btf)
{
	const struct btf_type *t;
	const struct btf_member *m;
	__s32 id = btf ? btf__find_by_name_kind(btf, "pt_regs", BTF_KIND_STRUCT) : -ENOENT;

	if (id < 0)
		return NULL;
	t = btf__type_by_id(btf, (__u32)id);
	m = btf_members(t);
	/* x86-64's names each register (r9: the sixth argument); arm64's opens with user_pt_regs */
	for (__u16 i = 0; i < btf_vlen(t); i++, m++) {
		if (!strcmp(btf__name_by_offset(btf, m->name_off), "r9"))
			return "x86-64";
	}
	if (btf__find_by_name_kind(btf, "user_pt_regs", BTF_KIND_STRUCT) >= 0)
		return "arm64";
	return NULL;
}

int probes__check_regs_arch(const struct btf *btf, char *err, size_t errlen)
{
	const char *arch = probes__regs_arch(btf);

	if (arch && !strcmp(arch, PROBES_HOST_ARCH))
		return 0;
	return hb_fail(
		err, errlen, -ENOEXEC,
		"heapbpf's BPF object reads %s's registers and this heapbpf is built for %s, "
		"so it would read jemalloc's arguments from the wrong ones: build heapbpf "
		"and its BPF object for one architecture (make ARCH=...)",
		arch ? arch : "an unknown architecture", PROBES_HOST_ARCH);
}

int probes__check_arch(char *err, size_t errlen)
{
	struct heapbpf_bpf *skel = heapbpf_bpf__open();
	int rc;

	if (!skel)
		return hb_fail(err, errlen, -errno, "cannot open heapbpf's BPF object: %s",
			       strerror(errno));
	rc = probes__check_regs_arch(bpf_object__btf(skel->obj), err, errlen);
	heapbpf_bpf__destroy(skel);
	return rc;
}

int probes__load(const struct heapbpf_layout *layout, size_t ringbuf_bytes,
		 uint32_t fork_child_pid_off, const struct heapbpf_oom_offsets *oom, bool by_file,
		 struct probes **out)
{
	struct probes *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->skel = heapbpf_bpf__open();
	if (!p->skel) {
		err = -errno;
		goto fail;
	}
	p->skel->rodata->layout = *layout;
	/*
	 * HEAPBPF_FAULT_INJECT=layout: a layout that does not fit, its tctx read
	 * as 0, so every sample's read of tctx->gctx faults (the tests' check
	 * that such a run writes no profile)
	 */
	if (hb_hook(HB_HOOK_FAULT_INJECT) && !strcmp(hb_hook(HB_HOOK_FAULT_INJECT), "layout"))
		p->skel->rodata->layout.alloc_tctx_arg = HEAPBPF_ARG_NONE;
	p->skel->rodata->fork_child_pid_off = fork_child_pid_off;
	/* heapbpf watch alone hears of OOM victims */
	if (oom)
		p->skel->rodata->oom_off = *oom;
	bpf_program__set_autoload(p->skel->progs.heapbpf_oom, oom != NULL);
	p->oom = oom != NULL;
	p->skel->rodata->filter_pids = by_file;
	/*
	 * Only for bench/bpfstats.py, which measures what each part of the
	 * sampling programs costs by leaving it out, with build/bench/heapbpf
	 * (HEAPBPF_BENCH): the profile of such a run is incomplete. heapbpf's
	 * own programs have no such knob.
	 */
#ifdef HEAPBPF_BENCH
	if (hb_hook(HB_HOOK_BENCH_PARTS))
		p->bench_parts = strtoul(hb_hook(HB_HOOK_BENCH_PARTS), NULL, 0);
	if (p->bench_parts)
		hb_warn("HEAPBPF_BENCH_PARTS=%#lx leaves parts of the BPF "
			"programs out (a benchmark's setting): this run's profiles are incomplete",
			p->bench_parts);
	p->skel->rodata->bench_skip = (__u32)(p->bench_parts & 0xff);
#else
	if (hb_hook(HB_HOOK_BENCH_PARTS))
		hb_warn("HEAPBPF_BENCH_PARTS is ignored: only the benchmarks' build of heapbpf "
			"(build/bench/heapbpf) takes it");
#endif
	p->by_file = by_file;
	/* the collector is woken at a quarter full, and polls every PROBES_POLL_MS otherwise */
	p->skel->rodata->wakeup_bytes = round_pow2_pages(ringbuf_bytes) / 4;
	err = bpf_map__set_max_entries(p->skel->maps.events, round_pow2_pages(ringbuf_bytes));
	if (err)
		goto fail;
	err = heapbpf_bpf__load(p->skel);
	if (err)
		goto fail;
	*out = p;
	return 0;
fail:
	probes__free(p);
	return err;
}

/* Forks and execs of every tracked process, attached before the first uprobe. */
static int attach_tree(struct probes *p)
{
	if (p->fork_link)
		return 0;
	p->fork_link = bpf_program__attach_tracepoint(p->skel->progs.heapbpf_fork, "sched",
						      "sched_process_fork");
	if (!p->fork_link)
		return -errno;
	p->exec_link = bpf_program__attach_tracepoint(p->skel->progs.heapbpf_exec, "sched",
						      "sched_process_exec");
	if (!p->exec_link)
		return -errno;
	if (p->oom) {
		p->oom_link = bpf_program__attach_tracepoint(p->skel->progs.heapbpf_oom, "oom",
							     "mark_victim");
		if (!p->oom_link)
			return -errno;
	}
	return 0;
}

int probes__track(struct probes *p, pid_t pid)
{
	__u32 key = (__u32)pid;
	__u8 one = 1;

	return bpf_map__update_elem(p->skel->maps.tracked, &key, sizeof(key), &one, sizeof(one),
				    BPF_ANY)
		       ? -errno
		       : 0;
}

void probes__untrack(struct probes *p, pid_t pid)
{
	__u32 key = pid;

	bpf_map__delete_elem(p->skel->maps.tracked, &key, sizeof(key), 0);
	if (p->by_file)
		bpf_map__delete_elem(p->skel->maps.sampled, &key, sizeof(key), 0);
}

/*
 * Where the allocation probe reads pid's coarse clock (t: its jemalloc, whose
 * mappings a forked child shares), or 0: only where frees carry no pointer
 * but jemalloc's allocation time (5.3.0), which the collector matches to it.
 */
static uint64_t coarse_clock(const struct probes *p, const struct jemalloc_target *t, pid_t pid)
{
	const struct heapbpf_layout *l = &p->skel->rodata->layout;

	if (l->free_ptr_arg != HEAPBPF_ARG_NONE || !l->info_has_time)
		return 0;
	return vclock_coarse_addr(pid, t->maps);
}

/* by_file: pid's samples are kept from now on, its coarse clock read at clock (0: none). */
static int sample_pid(struct probes *p, pid_t pid, uint64_t clock)
{
	__u32 key = pid;
	__u64 v = clock;

	if (bpf_map__update_elem(p->skel->maps.sampled, &key, sizeof(key), &v, sizeof(v), BPF_ANY))
		return -errno;
	return 0;
}

/*
 * Without by_file, the one coarse clock address of the targets' trees: the
 * first target's; a second target with another address leaves none (its
 * frees are matched without it).
 */
static void direct_clock(struct probes *p, uint64_t clock)
{
	if (!p->direct_targets++)
		p->skel->bss->coarse_at = clock;
	else if (p->skel->bss->coarse_at != clock)
		p->skel->bss->coarse_at = 0;
}

/* by_file: t's object's entry in files (*idx), a new one (no users yet) if it has none. */
static int file_probed(struct probes *p, const struct jemalloc_target *t, size_t *idx)
{
	struct probed_file *v, f = { .alloc_off = t->alloc_off, .free_off = t->free_off };
	struct stat st;

	if (stat(t->open_path, &st))
		return -errno;
	f.dev = st.st_dev;
	f.ino = st.st_ino;
	for (size_t i = 0; i < p->nfiles; i++) {
		const struct probed_file *e = &p->files[i];

		if (e->dev == f.dev && e->ino == f.ino && e->alloc_off == f.alloc_off &&
		    e->free_off == f.free_off) {
			*idx = i;
			return 0;
		}
	}
	v = realloc(p->files, (p->nfiles + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	p->files = v;
	*idx = p->nfiles;
	v[p->nfiles++] = f;
	return 0;
}

/* One more link in *v (grown by one); the link is destroyed when there is no room. */
static int keep_link(struct bpf_link ***v, size_t *n, struct bpf_link *l)
{
	struct bpf_link **nv;

	if (!l)
		return -errno;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	*v = nv;
	nv[(*n)++] = l;
	return 0;
}

/* Destroys the links of v past n (what one failed attach made). */
static void drop_links(struct bpf_link **v, size_t *n, size_t keep)
{
	while (*n > keep)
		bpf_link__destroy(v[--*n]);
}

/* The allocation and free uprobes on t's jemalloc object, for pid only, by file offset. */
static int attach_sampling(struct probes *p, const struct jemalloc_target *t, pid_t pid)
{
	size_t keep = p->nlinks;
	int err;

	err = keep_link(&p->links, &p->nlinks,
			bpf_program__attach_uprobe(p->skel->progs.heapbpf_alloc, false, pid,
						   t->open_path, t->alloc_off));
	err = err
		      ?: keep_link(&p->links, &p->nlinks,
				   bpf_program__attach_uprobe(p->skel->progs.heapbpf_free, false,
							      pid, t->open_path, t->free_off));
	/* the decomposition's warm measure: every hit runs each program twice, back to back */
	if (!err && (p->bench_parts & HEAPBPF_PART_TWICE) && !p->by_file)
		err = keep_link(&p->links, &p->nlinks,
				bpf_program__attach_uprobe(p->skel->progs.heapbpf_alloc, false, pid,
							   t->open_path, t->alloc_off))
			      ?: keep_link(&p->links, &p->nlinks,
					   bpf_program__attach_uprobe(p->skel->progs.heapbpf_free,
								      false, pid, t->open_path,
								      t->free_off));
	if (err)
		drop_links(p->links, &p->nlinks, keep);
	return err;
}

int probes__attach(struct probes *p, const struct jemalloc_target *t, bool activity, int *file)
{
	size_t keep = p->nactivity, fi = 0;
	int err;

	*file = -1;
	/* before the uprobes, so that no fork in the window is missed */
	err = attach_tree(p);
	err = err ?: probes__track(p, t->pid);
	if (!err && p->by_file) {
		size_t first = p->nlinks;

		err = file_probed(p, t, &fi);
		err = err ?: sample_pid(p, t->pid, coarse_clock(p, t, t->pid));
		/* every process that maps the file: BPF keeps the sampled pids' events only */
		if (!err && !p->files[fi].users) {
			err = attach_sampling(p, t, -1);
			if (!err) {
				p->files[fi].link[0] = p->links[first];
				p->files[fi].link[1] = p->links[first + 1];
			}
		}
		if (!err) {
			p->files[fi].users++;
			*file = (int)fi;
		}
	} else {
		err = err ?: attach_sampling(p, t, t->pid);
		if (!err)
			direct_clock(p, coarse_clock(p, t, t->pid));
	}
	if (!err && activity && t->activity_off) {
		err = keep_link(&p->activity, &p->nactivity,
				bpf_program__attach_uprobe(p->skel->progs.heapbpf_activity, false,
							   t->pid, t->open_path, t->activity_off));
		/* this target's sampling probes go (a file's with its last user); others' stay */
		if (err && !p->by_file)
			drop_links(p->links, &p->nlinks, p->nlinks - 2);
		if (err && p->by_file)
			probes__release(p, *file);
	}
	if (err) {
		drop_links(p->activity, &p->nactivity, keep);
		probes__untrack(p, t->pid);
	}
	return err;
}

static void destroy_links(struct bpf_link **v, size_t n);

/* Takes l out of links (its order kept). */
static void forget_link(struct probes *p, const struct bpf_link *l)
{
	for (size_t i = 0; i < p->nlinks; i++) {
		if (p->links[i] == l) {
			memmove(&p->links[i], &p->links[i + 1],
				(p->nlinks - i - 1) * sizeof(p->links[0]));
			p->nlinks--;
			return;
		}
	}
}

void probes__release(struct probes *p, int file)
{
	struct probed_file *f;

	if (!p->by_file || file < 0 || (size_t)file >= p->nfiles || !p->files[file].users)
		return;
	f = &p->files[file];
	if (--f->users)
		return;
	forget_link(p, f->link[0]);
	forget_link(p, f->link[1]);
	destroy_links(f->link, 2);
	f->link[0] = NULL;
	f->link[1] = NULL;
}

int probes__ring_buffer(struct probes *p, probes_event_fn fn, void *ctx, struct ring_buffer **rb)
{
	if (!p->rb) {
		p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), fn, ctx, NULL);
		if (!p->rb)
			return -errno;
	}
	*rb = p->rb;
	return 0;
}

int probes__ring_buffer_add(struct probes *p, struct ring_buffer *rb, probes_event_fn fn, void *ctx)
{
	return ring_buffer__add(rb, bpf_map__fd(p->skel->maps.events), fn, ctx);
}

const struct heapbpf_layout *probes__layout(const struct probes *p)
{
	return &p->skel->rodata->layout;
}

void probes__close_ring_buffer(struct probes *p)
{
	ring_buffer__free(p->rb);
	p->rb = NULL;
}

int probes__attach_pid(struct probes *p, const struct jemalloc_target *t, pid_t pid)
{
	/* a forked child maps its parent's object: the file's uprobes see it already */
	return p->by_file ? sample_pid(p, pid, coarse_clock(p, t, pid))
			  : attach_sampling(p, t, pid);
}

int probes__activity_bytes(struct probes *p, pid_t pid, uint64_t *bytes)
{
	__u32 key = (__u32)pid;
	__u64 v = 0;

	*bytes = 0;
	if (bpf_map__lookup_elem(p->skel->maps.activity, &key, sizeof(key), &v, sizeof(v), 0))
		return errno == ENOENT ? 0 : -errno;
	*bytes = v;
	return 0;
}

void probes__detach_activity(struct probes *p)
{
	drop_links(p->activity, &p->nactivity, 0);
	free(p->activity);
	p->activity = NULL;
}

int probes__attach_activity(struct probes *p, const struct jemalloc_target *t,
			    struct bpf_link **link)
{
	__u32 key = (__u32)t->pid;

	*link = NULL;
	if (!t->activity_off)
		return 0;
	bpf_map__delete_elem(p->skel->maps.activity, &key, sizeof(key), 0);
	*link = bpf_program__attach_uprobe(p->skel->progs.heapbpf_activity, false, t->pid,
					   t->open_path, t->activity_off);
	return *link ? 0 : -errno;
}

void probes__drop_activity(struct probes *p, pid_t pid, struct bpf_link *link)
{
	__u32 key = (__u32)pid;

	if (!link)
		return;
	bpf_link__destroy(link);
	bpf_map__delete_elem(p->skel->maps.activity, &key, sizeof(key), 0);
}

/* Links destroyed side by side at most. */
#define DETACH_THREADS 8

static void *destroy_link(void *l)
{
	bpf_link__destroy(l);
	return NULL;
}

/*
 * Destroys the n links of v, each on a thread of its own: the kernel waits
 * for grace periods when it detaches one (measured on 6.18: 80 ms for each
 * tracepoint, 120 ms for each uprobe, 0.4 s for the four one after
 * another), and such waits side by side overlap. A thread that cannot be
 * started leaves its link to this one.
 */
static void destroy_links(struct bpf_link **v, size_t n)
{
	pthread_t th[DETACH_THREADS];
	bool started[DETACH_THREADS];

	while (n) {
		size_t k = n < DETACH_THREADS ? n : DETACH_THREADS;

		for (size_t i = 0; i < k; i++)
			started[i] = !pthread_create(&th[i], NULL, destroy_link, v[n - 1 - i]);
		for (size_t i = 0; i < k; i++) {
			if (started[i])
				pthread_join(th[i], NULL);
			else
				bpf_link__destroy(v[n - 1 - i]);
		}
		n -= k;
	}
}

void probes__detach(struct probes *p)
{
	size_t n = 0, cap = 3 + p->nlinks + p->nactivity;
	struct bpf_link **all = calloc(cap, sizeof(*all));

	/* one after another when even that list cannot be had */
	if (all) {
		all[n++] = p->fork_link;
		all[n++] = p->exec_link;
		all[n++] = p->oom_link;
		for (size_t i = 0; i < p->nlinks; i++)
			all[n++] = p->links[i];
		for (size_t i = 0; i < p->nactivity; i++)
			all[n++] = p->activity[i];
		destroy_links(all, n);
		free(all);
		p->nlinks = 0;
		p->nactivity = 0;
	} else {
		bpf_link__destroy(p->fork_link);
		bpf_link__destroy(p->exec_link);
		bpf_link__destroy(p->oom_link);
	}
	p->fork_link = NULL;
	p->exec_link = NULL;
	p->oom_link = NULL;
	drop_links(p->links, &p->nlinks, 0);
	free(p->links);
	p->links = NULL;
	probes__detach_activity(p);
}

void probes__counters_add(const struct probes *p, struct heapbpf_counters *c)
{
	/* .bss is memory-mapped: read each counter once */
	volatile struct heapbpf_counters *src = &p->skel->bss->counters;

	c->alloc_hits += src->alloc_hits;
	c->free_hits += src->free_hits;
	c->alloc_drops += src->alloc_drops;
	c->free_drops += src->free_drops;
	c->read_faults += src->read_faults;
	c->activity_hits += src->activity_hits;
	c->activity_bytes += src->activity_bytes;
	c->proc_drops += src->proc_drops;
	c->untracked_forks += src->untracked_forks;
	c->oom_drops += src->oom_drops;
}

void probes__counters(const struct probes *p, struct heapbpf_counters *c)
{
	memset(c, 0, sizeof(*c));
	probes__counters_add(p, c);
}

void probes__print_run_time(const struct probes *p, FILE *f)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, p->skel->obj)
	{
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_program__fd(prog) < 0 ||
		    bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) || !info.run_cnt)
			continue;
		fprintf(f, "heapbpf: bpf_stats: %s run_cnt %llu run_time_ns %llu\n",
			bpf_program__name(prog), (unsigned long long)info.run_cnt,
			(unsigned long long)info.run_time_ns);
	}
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	ring_buffer__free(p->rb);
	probes__detach(p);
	free(p->files);
	heapbpf_bpf__destroy(p->skel);
	free(p);
}
