// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The profile sink: every format to a file, atomically, with its sample type and compression. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "profile/folded.h"
#include "profile/pprof.h"
#include "export/sink.h"

static char dir[] = "/tmp/heapbpf-sink-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(sink, .init = setup, .fini = teardown);

/* main <- alloc_a (two samples on one stack: 3 objects, 300 bytes in use) and <- alloc_b */
static struct hb_profile *profile(void)
{
	static const char *const names[] = { "alloc_a", "alloc_b", "main" };
	static const uint32_t stacks[][2] = { { 0, 2 }, { 1, 2 } };
	static const int64_t values[][HB_NVALUES] = { { 4, 400, 3, 300 }, { 1, 64, 0, 0 } };
	struct hb_profile *p = calloc(1, sizeof(*p));

	cr_assert_not_null(p);
	p->period = 524288;
	p->nlocations = 3;
	p->locations = calloc(3, sizeof(*p->locations));
	for (size_t i = 0; i < 3; i++) {
		p->locations[i].address = 0x1000 + i;
		p->locations[i].nlines = 1;
		p->locations[i].lines = calloc(1, sizeof(struct hb_line));
		p->locations[i].lines[0].function = strdup(names[i]);
	}
	p->nsamples = 2;
	p->samples = calloc(2, sizeof(*p->samples));
	for (size_t i = 0; i < 2; i++) {
		p->samples[i].nlocs = 2;
		p->samples[i].locs = calloc(2, sizeof(uint32_t));
		memcpy(p->samples[i].locs, stacks[i], sizeof(stacks[i]));
		memcpy(p->samples[i].v, values[i], sizeof(values[i]));
	}
	return p;
}

static size_t slurp(const char *path, uint8_t **buf)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, n;

	cr_assert_not_null(f, "%s was not written", path);
	*buf = malloc(cap);
	n = fread(*buf, 1, cap, f);
	fclose(f);
	return n;
}

static const char *in_dir(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

Test(sink, pprof_file_decodes_with_all_four_values)
{
	struct hb_profile *p = profile();
	struct sink s = { .kind = SINK_FILE, .format = FMT_PPROF, .path = in_dir("h.pb.gz") };
	Perftools__Profiles__Profile *pp = NULL;
	char err[256] = "";
	uint8_t *buf;
	size_t n;

	cr_assert_eq(sink_write(p, &s, err, sizeof(err)), 0, "%s", err);
	n = slurp(s.path, &buf);
	cr_assert_eq(pprof_decode(buf, n, &pp), 0);
	cr_assert_eq(pp->n_sample_type, HB_NVALUES);
	cr_assert_eq(pp->n_sample, 2);
	cr_assert_eq(pp->sample[0]->value[HB_INUSE_SPACE] + pp->sample[1]->value[HB_INUSE_SPACE],
		     300);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);
	hb_profile__free(p);
}

Test(sink, folded_carries_the_chosen_sample_type)
{
	struct hb_profile *p = profile();
	struct sink s = { .kind = SINK_FILE,
			  .format = FMT_FOLDED,
			  .sample_type = HB_ALLOC_SPACE,
			  .path = in_dir("h.folded") };
	char err[256] = "";
	uint8_t *buf;
	size_t n;

	cr_assert_eq(sink_write(p, &s, err, sizeof(err)), 0, "%s", err);
	n = slurp(s.path, &buf);
	cr_assert_eq(n, strlen("main;alloc_a 400\nmain;alloc_b 64\n"));
	cr_assert_eq(memcmp(buf, "main;alloc_a 400\nmain;alloc_b 64\n", n), 0);
	free(buf);
	hb_profile__free(p);
}

Test(sink, folded_zstd_is_the_same_text_compressed)
{
	struct hb_profile *p = profile();
	struct sink s = { .kind = SINK_FILE,
			  .format = FMT_FOLDED,
			  .sample_type = HB_INUSE_SPACE,
			  .zstd = true,
			  .path = in_dir("h.folded.zst") };
	char err[256] = "", text[256];
	uint8_t *buf;
	size_t n, m;

	cr_assert_eq(sink_write(p, &s, err, sizeof(err)), 0, "%s", err);
	n = slurp(s.path, &buf);
	m = ZSTD_decompress(text, sizeof(text) - 1, buf, n);
	cr_assert(!ZSTD_isError(m));
	text[m] = '\0';
	/* alloc_b has nothing in use: no line */
	cr_assert_str_eq(text, "main;alloc_a 300\n");
	free(buf);
	hb_profile__free(p);
}

Test(sink, extensions)
{
	cr_assert_str_eq(sink_extension(FMT_PPROF, false), "pb.gz");
	cr_assert_str_eq(sink_extension(FMT_PPROF, true), "pb.gz");
	cr_assert_str_eq(sink_extension(FMT_FOLDED, false), "folded");
	cr_assert_str_eq(sink_extension(FMT_FOLDED, true), "folded.zst");
}

Test(sink, unwritable_destination_is_named_and_leaves_nothing)
{
	struct hb_profile *p = profile();
	struct sink s = { .kind = SINK_FILE,
			  .format = FMT_PPROF,
			  .path = in_dir("no/such/h.pb.gz") };
	char err[256] = "";

	cr_assert_eq(sink_write(p, &s, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "cannot write") && strstr(err, "no/such/h.pb.gz"), "%s", err);
	cr_assert_neq(access(s.path, F_OK), 0);
	hb_profile__free(p);
}

Test(sink, the_spool_takes_pprof_only)
{
	struct hb_profile *p = profile();
	struct sink s = { .kind = SINK_SPOOL, .format = FMT_FOLDED, .name = "svc{}" };
	char err[256] = "";

	cr_assert_eq(sink_write(p, &s, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "pprof"), "%s", err);
	hb_profile__free(p);
}

Test(sink, unknown_format_is_refused)
{
	struct hb_profile *p = profile();
	struct sink s = { .kind = SINK_FILE, .format = FMT_COUNT, .path = in_dir("x") };
	char err[256] = "";

	cr_assert_eq(sink_write(p, &s, err, sizeof(err)), -EINVAL);
	cr_assert_neq(access(s.path, F_OK), 0);
	hb_profile__free(p);
}

Test(sink, follow_forks_pid_is_a_label_and_a_root_frame)
{
	struct hb_profile *p = profile();
	struct sink pf = { .kind = SINK_FILE, .format = FMT_PPROF, .path = in_dir("p.pb.gz") };
	struct sink ff = { .kind = SINK_FILE,
			   .format = FMT_FOLDED,
			   .sample_type = HB_ALLOC_OBJECTS,
			   .path = in_dir("p.folded") };
	Perftools__Profiles__Profile *pp = NULL;
	char err[256] = "";
	const char *want = "pid 4242;main;alloc_a 4\npid 77;main;alloc_b 1\n";
	uint8_t *buf;
	size_t n;

	p->samples[0].pid = 4242;
	p->samples[1].pid = 77;
	cr_assert_eq(sink_write(p, &pf, err, sizeof(err)), 0, "%s", err);
	n = slurp(pf.path, &buf);
	cr_assert_eq(pprof_decode(buf, n, &pp), 0);
	for (size_t i = 0; i < 2; i++) {
		cr_assert_eq(pp->sample[i]->n_label, 1);
		cr_assert_str_eq(pp->string_table[pp->sample[i]->label[0]->key], "pid");
		cr_assert_eq(pp->sample[i]->label[0]->num, p->samples[i].pid);
	}
	perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);
	cr_assert_eq(sink_write(p, &ff, err, sizeof(err)), 0, "%s", err);
	n = slurp(ff.path, &buf);
	cr_assert_eq(n, strlen(want));
	cr_assert_eq(memcmp(buf, want, n), 0, "%.*s", (int)n, (char *)buf);
	free(buf);
	hb_profile__free(p);
}

Test(sink, without_pids_no_label_and_no_pid_string)
{
	struct hb_profile *p = profile();
	struct sink pf = { .kind = SINK_FILE, .format = FMT_PPROF, .path = in_dir("q.pb.gz") };
	Perftools__Profiles__Profile *pp = NULL;
	char err[256] = "";
	uint8_t *buf;
	size_t n;

	cr_assert_eq(sink_write(p, &pf, err, sizeof(err)), 0, "%s", err);
	n = slurp(pf.path, &buf);
	cr_assert_eq(pprof_decode(buf, n, &pp), 0);
	for (size_t i = 0; i < pp->n_sample; i++)
		cr_assert_eq(pp->sample[i]->n_label, 0);
	for (size_t i = 0; i < pp->n_string_table; i++)
		cr_assert_str_neq(pp->string_table[i], "pid");
	perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);
	hb_profile__free(p);
}
