// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pprof encoder tests: a small hand-made profile goes through pprof_encode()
 * and comes back through pprof_decode(), and every field is checked; the
 * bytes are also fed to gzip(1) and protoc(1) as independent decoders.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "profile/pprof.h"
#include "harness.h"

#define PROTO_DIR "/usr/share/gocode/src/github.com/google/pprof/proto"

/* The expected content of each location's lines, callee first. */
struct exp_line {
	const char *function, *system_name, *file;
	int64_t line;
};

struct exp_loc {
	uint64_t address;
	uint32_t mapping;
	uint32_t nlines;
	struct exp_line lines[2];
};

static const struct exp_loc exp_locs[] = {
	/* 0: in libjemalloc, no file */
	{ 0x7f0000001234, 2, 1, { { "je_malloc_default", NULL, NULL, 0 } } },
	/* 1: inline_helper inlined into handle_request */
	{ 0x401000,
	  1,
	  2,
	  { { "inline_helper", NULL, "app.c", 10 },
	    { "handle_request", "_Z14handle_requestv", "app.c", 42 } } },
	/* 2 */
	{ 0x402000, 1, 1, { { "main", NULL, "app.c", 100 } } },
	/* 3: same function as location 1's caller line, another line */
	{ 0x403000, 1, 1, { { "handle_request", "_Z14handle_requestv", "app.c", 55 } } },
	/* 4: no mapping, no symbols */
	{ 0xdead, 0, 0, { { NULL, NULL, NULL, 0 } } },
	/* 5: same names as 3 but another file: a different function */
	{ 0x404000, 1, 1, { { "handle_request", "_Z14handle_requestv", "other.c", 7 } } },
};

#define NLOCS (sizeof(exp_locs) / sizeof(exp_locs[0]))

struct exp_sample {
	uint32_t nlocs;
	uint32_t locs[3];
	int64_t v[HB_NVALUES];
};

static const struct exp_sample exp_samples[] = {
	{ 3, { 0, 1, 2 }, { 10, 1000, 2, 200 } },
	{ 3, { 0, 3, 2 }, { 5, 500, 5, 500 } },
	{ 2, { 4, 2 }, { 1, 64, 0, 0 } },
	{ 2, { 5, 2 }, { 2, 128, 1, 64 } },
};

#define NSAMPLES (sizeof(exp_samples) / sizeof(exp_samples[0]))

static struct hb_profile *make_profile(bool raw)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));

	p->nmappings = 2;
	p->mappings = hb_xcalloc(2, sizeof(*p->mappings));
	p->mappings[0] = (struct hb_mapping){
		.start = 0x400000,
		.limit = 0x500000,
		.file_offset = 0,
		.path = hb_xstrdup("/usr/bin/app"),
		.build_id = hb_xstrdup("0123456789abcdef0123456789abcdef01234567"),
		.has_functions = true,
		.has_filenames = true,
		.has_line_numbers = true,
		.has_inline_frames = true,
	};
	p->mappings[1] = (struct hb_mapping){
		.start = 0x7f0000000000,
		.limit = 0x7f0000100000,
		.file_offset = 0x1000,
		.path = hb_xstrdup("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
		.build_id = hb_xstrdup("fedcba9876543210"),
		.has_functions = true,
	};

	p->nlocations = NLOCS;
	p->locations = hb_xcalloc(NLOCS, sizeof(*p->locations));
	for (size_t i = 0; i < NLOCS; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = exp_locs[i].address;
		l->mapping = exp_locs[i].mapping;
		l->nlines = exp_locs[i].nlines;
		l->lines = hb_xcalloc(l->nlines + 1, sizeof(*l->lines));
		for (uint32_t j = 0; j < l->nlines; j++) {
			const struct exp_line *e = &exp_locs[i].lines[j];

			l->lines[j].function = hb_xstrdup(e->function);
			l->lines[j].system_name = hb_xstrdup(e->system_name);
			l->lines[j].file = hb_xstrdup(e->file);
			l->lines[j].line = e->line;
		}
	}

	p->nsamples = NSAMPLES;
	p->samples = hb_xcalloc(NSAMPLES, sizeof(*p->samples));
	for (size_t i = 0; i < NSAMPLES; i++) {
		struct hb_sample *s = &p->samples[i];

		s->nlocs = exp_samples[i].nlocs;
		s->locs = hb_xcalloc(s->nlocs, sizeof(*s->locs));
		memcpy(s->locs, exp_samples[i].locs, s->nlocs * sizeof(*s->locs));
		memcpy(s->v, exp_samples[i].v, sizeof(s->v));
	}

	p->period = 524288;
	p->time_nanos = 1700000000123456789LL;
	p->duration_nanos = 30000000000LL;
	p->raw = raw;
	p->ncomments = 2;
	p->comments = hb_xcalloc(2, sizeof(*p->comments));
	p->comments[0] = hb_xstrdup("heapbpf 0.1 pid=1234");
	p->comments[1] = hb_xstrdup("jemalloc 5.3.0");
	return p;
}

static Perftools__Profiles__Profile *roundtrip(const struct hb_profile *p)
{
	Perftools__Profiles__Profile *prof = NULL;
	uint8_t *gz = NULL;
	size_t len = 0;

	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	cr_assert_not_null(gz);
	cr_assert_gt(len, 18);
	/* gzip magic, deflate method */
	cr_assert_eq(gz[0], 0x1f);
	cr_assert_eq(gz[1], 0x8b);
	cr_assert_eq(gz[2], 8);
	cr_assert_eq(pprof_decode(gz, len, &prof), 0);
	cr_assert_not_null(prof);
	free(gz);
	return prof;
}

static const char *str(const Perftools__Profiles__Profile *prof, int64_t id)
{
	cr_assert(id >= 0 && (size_t)id < prof->n_string_table, "string id %lld out of range",
		  (long long)id);
	return prof->string_table[id];
}

/* NULL in an expectation stands for the string table's "" */
static void assert_str(const Perftools__Profiles__Profile *prof, int64_t id, const char *want)
{
	cr_assert_str_eq(str(prof, id), want ? want : "");
}

static const Perftools__Profiles__Function *func(const Perftools__Profiles__Profile *prof,
						 uint64_t id)
{
	cr_assert(id >= 1 && id <= prof->n_function, "function id %llu out of range",
		  (unsigned long long)id);
	return prof->function[id - 1];
}

/* The function of the first line of location @loc_id. */
static const Perftools__Profiles__Function *first_func(const Perftools__Profiles__Profile *prof,
						       uint64_t loc_id)
{
	const Perftools__Profiles__Location *l;

	cr_assert(loc_id >= 1 && loc_id <= prof->n_location);
	l = prof->location[loc_id - 1];
	cr_assert_eq(l->id, loc_id);
	cr_assert_geq(l->n_line, 1);
	return func(prof, l->line[0]->function_id);
}

static int64_t find_str(const Perftools__Profiles__Profile *prof, const char *s)
{
	for (size_t i = 0; i < prof->n_string_table; i++) {
		if (strcmp(prof->string_table[i], s) == 0)
			return i;
	}
	return -1;
}

Test(pprof, header_fields)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof = roundtrip(p);
	static const char *const names[] = { "alloc_objects", "alloc_space", "inuse_objects",
					     "inuse_space" };
	static const char *const units[] = { "count", "bytes", "count", "bytes" };

	cr_assert_geq(prof->n_string_table, 1);
	cr_assert_str_eq(prof->string_table[0], "");

	cr_assert_eq(prof->n_sample_type, 4);
	for (int i = 0; i < 4; i++) {
		assert_str(prof, prof->sample_type[i]->type, names[i]);
		assert_str(prof, prof->sample_type[i]->unit, units[i]);
	}
	cr_assert_not_null(prof->period_type);
	assert_str(prof, prof->period_type->type, "space");
	assert_str(prof, prof->period_type->unit, "bytes");
	cr_assert_eq(prof->period, 524288);
	cr_assert_eq(prof->time_nanos, 1700000000123456789LL);
	cr_assert_eq(prof->duration_nanos, 30000000000LL);
	assert_str(prof, prof->default_sample_type, "inuse_space");
	cr_assert_eq(prof->drop_frames, 0);
	cr_assert_eq(prof->keep_frames, 0);

	cr_assert_eq(prof->n_comment, 3);
	assert_str(prof, prof->comment[0], "heapbpf 0.1 pid=1234");
	assert_str(prof, prof->comment[1], "jemalloc 5.3.0");
	assert_str(prof, prof->comment[2], PPROF_RAW_COMMENT);

	/* deduplicated: no string twice */
	for (size_t i = 0; i < prof->n_string_table; i++)
		for (size_t j = i + 1; j < prof->n_string_table; j++)
			cr_assert_str_neq(prof->string_table[i], prof->string_table[j],
					  "string %zu and %zu are both \"%s\"", i, j,
					  prof->string_table[i]);
	/* "bytes" serves both alloc_space and the period type */
	cr_assert_eq(prof->sample_type[1]->unit, prof->period_type->unit);
	cr_assert_eq(prof->sample_type[0]->unit, prof->sample_type[2]->unit);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

Test(pprof, not_raw_has_no_raw_comment)
{
	struct hb_profile *p = make_profile(false);
	Perftools__Profiles__Profile *prof = roundtrip(p);

	cr_assert_eq(prof->n_comment, 2);
	assert_str(prof, prof->comment[0], "heapbpf 0.1 pid=1234");
	assert_str(prof, prof->comment[1], "jemalloc 5.3.0");
	cr_assert_eq(find_str(prof, PPROF_RAW_COMMENT), -1);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

Test(pprof, mappings)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof = roundtrip(p);
	const Perftools__Profiles__Mapping *m;

	cr_assert_eq(prof->n_mapping, 2);
	m = prof->mapping[0];
	cr_assert_eq(m->id, 1);
	cr_assert_eq(m->memory_start, 0x400000);
	cr_assert_eq(m->memory_limit, 0x500000);
	cr_assert_eq(m->file_offset, 0);
	assert_str(prof, m->filename, "/usr/bin/app");
	assert_str(prof, m->build_id, "0123456789abcdef0123456789abcdef01234567");
	cr_assert(m->has_functions);
	cr_assert(m->has_filenames);
	cr_assert(m->has_line_numbers);
	cr_assert(m->has_inline_frames);

	m = prof->mapping[1];
	cr_assert_eq(m->id, 2);
	cr_assert_eq(m->memory_start, 0x7f0000000000);
	cr_assert_eq(m->memory_limit, 0x7f0000100000);
	cr_assert_eq(m->file_offset, 0x1000);
	assert_str(prof, m->filename, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
	assert_str(prof, m->build_id, "fedcba9876543210");
	cr_assert(m->has_functions);
	cr_assert_not(m->has_filenames);
	cr_assert_not(m->has_line_numbers);
	cr_assert_not(m->has_inline_frames);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

Test(pprof, locations_lines_functions)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof = roundtrip(p);

	cr_assert_eq(prof->n_location, NLOCS);
	for (size_t i = 0; i < NLOCS; i++) {
		const Perftools__Profiles__Location *l = prof->location[i];

		cr_assert_eq(l->id, i + 1);
		cr_assert_eq(l->mapping_id, exp_locs[i].mapping);
		cr_assert_eq(l->address, exp_locs[i].address);
		cr_assert_eq(l->n_line, exp_locs[i].nlines, "location %zu", i);
		for (size_t j = 0; j < l->n_line; j++) {
			const struct exp_line *e = &exp_locs[i].lines[j];
			const Perftools__Profiles__Function *f;

			f = func(prof, l->line[j]->function_id);
			cr_assert_eq(l->line[j]->line, e->line);
			assert_str(prof, f->name, e->function);
			assert_str(prof, f->system_name,
				   e->system_name ? e->system_name : e->function);
			assert_str(prof, f->filename, e->file);
			cr_assert_eq(f->start_line, 0);
		}
	}
	/* the inlined pair keeps its order: callee first, then its caller */
	assert_str(prof, func(prof, prof->location[1]->line[0]->function_id)->name,
		   "inline_helper");
	assert_str(prof, func(prof, prof->location[1]->line[1]->function_id)->name,
		   "handle_request");

	/*
	 * je_malloc_default, inline_helper, handle_request@app.c, main,
	 * handle_request@other.c: handle_request@app.c is shared by two lines.
	 */
	cr_assert_eq(prof->n_function, 5);
	for (size_t i = 0; i < prof->n_function; i++)
		cr_assert_eq(prof->function[i]->id, i + 1);
	cr_assert_eq(prof->location[1]->line[1]->function_id,
		     prof->location[3]->line[0]->function_id);
	cr_assert_neq(prof->location[3]->line[0]->function_id,
		      prof->location[5]->line[0]->function_id);
	for (size_t i = 0; i < prof->n_function; i++) {
		for (size_t j = i + 1; j < prof->n_function; j++) {
			const Perftools__Profiles__Function *a = prof->function[i];
			const Perftools__Profiles__Function *b = prof->function[j];

			cr_assert(a->name != b->name || a->system_name != b->system_name ||
					  a->filename != b->filename,
				  "functions %zu and %zu are the same", i, j);
		}
	}

	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

Test(pprof, samples)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof = roundtrip(p);

	cr_assert_eq(prof->n_sample, NSAMPLES);
	for (size_t i = 0; i < NSAMPLES; i++) {
		const Perftools__Profiles__Sample *s = prof->sample[i];

		cr_assert_eq(s->n_location_id, exp_samples[i].nlocs);
		for (size_t j = 0; j < s->n_location_id; j++) {
			cr_assert_eq(s->location_id[j], exp_samples[i].locs[j] + 1,
				     "sample %zu frame %zu", i, j);
			cr_assert_leq(s->location_id[j], prof->n_location);
		}
		cr_assert_eq(s->n_value, 4);
		for (size_t j = 0; j < 4; j++)
			cr_assert_eq(s->value[j], exp_samples[i].v[j], "sample %zu value %zu", i,
				     j);
		cr_assert_eq(s->n_label, 0);
	}
	/* leaf first: sample 0 starts in je_malloc_default and ends in main */
	assert_str(prof, first_func(prof, prof->sample[0]->location_id[0])->name,
		   "je_malloc_default");
	assert_str(prof, first_func(prof, prof->sample[0]->location_id[2])->name, "main");

	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

Test(pprof, empty_profile)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));
	Perftools__Profiles__Profile *prof = roundtrip(p);

	cr_assert_eq(prof->n_sample_type, 4);
	assert_str(prof, prof->sample_type[3]->type, "inuse_space");
	cr_assert_str_eq(prof->string_table[0], "");
	cr_assert_eq(prof->n_sample, 0);
	cr_assert_eq(prof->n_location, 0);
	cr_assert_eq(prof->n_mapping, 0);
	cr_assert_eq(prof->n_function, 0);
	cr_assert_eq(prof->n_comment, 0);
	assert_str(prof, prof->default_sample_type, "inuse_space");
	assert_str(prof, prof->period_type->type, "space");

	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

Test(pprof, dangling_references_rejected)
{
	struct hb_profile *p = make_profile(true);
	uint8_t *gz = (uint8_t *)"untouched";
	size_t len = 7;

	p->samples[1].locs[1] = NLOCS;
	cr_assert_eq(pprof_encode(p, &gz, &len), -EINVAL);
	cr_assert_str_eq((char *)gz, "untouched");
	cr_assert_eq(len, 7);
	p->samples[1].locs[1] = 3;

	p->locations[2].mapping = 3;
	cr_assert_eq(pprof_encode(p, &gz, &len), -EINVAL);
	p->locations[2].mapping = 2;
	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	free(gz);
	hb_profile__free(p);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	cr_assert_geq(n, 0);
	rewind(f);
	buf = hb_xcalloc(n + 1, 1);
	cr_assert_eq(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* gzip(1) and protoc(1) decode it too, so this is not a self-consistent mistake. */
Test(pprof, independent_decoders_accept)
{
	struct hb_profile *p = make_profile(true);
	char dir[] = "/tmp/heapbpf-pprof-XXXXXX";
	char gzpath[64], binpath[64], txtpath[64], cmd[512];
	uint8_t *gz;
	size_t len;
	char *txt;
	FILE *f;
	int rc;

	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(gzpath, sizeof(gzpath), "%s/p.pb.gz", dir);
	snprintf(binpath, sizeof(binpath), "%s/p.pb", dir);
	snprintf(txtpath, sizeof(txtpath), "%s/p.txt", dir);
	f = fopen(gzpath, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(gz, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);

	snprintf(cmd, sizeof(cmd),
		 "gzip -dc < %s > %s && protoc --decode=perftools.profiles.Profile "
		 "--proto_path=%s profile.proto < %s > %s",
		 gzpath, binpath, PROTO_DIR, binpath, txtpath);
	rc = system(cmd);
	cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "'%s' failed: %d", cmd, rc);

	txt = read_file(txtpath);
	cr_assert_not_null(strstr(txt, "string_table: \"\"\n"), "%s", txt);
	cr_assert_not_null(strstr(txt, "string_table: \"alloc_space\""));
	cr_assert_not_null(strstr(txt, "string_table: \"inuse_space\""));
	cr_assert_not_null(strstr(txt, "string_table: \"inline_helper\""));
	cr_assert_not_null(strstr(txt, "string_table: \"_Z14handle_requestv\""));
	cr_assert_not_null(strstr(txt, "string_table: \"" PPROF_RAW_COMMENT "\""));
	cr_assert_not_null(strstr(txt, "period: 524288"));
	cr_assert_not_null(strstr(txt, "time_nanos: 1700000000123456789"));
	cr_assert_not_null(strstr(txt, "has_inline_frames: true"));
	cr_assert_not_null(strstr(txt, "memory_start: 4194304"));
	cr_assert_not_null(strstr(txt, "default_sample_type: "));

	free(txt);
	unlink(gzpath);
	unlink(binpath);
	unlink(txtpath);
	rmdir(dir);
	free(gz);
	hb_profile__free(p);
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Many distinct strings: exercises hash table growth and exact dedup. */
Test(pprof, many_strings)
{
	enum { N = 30000, NFILES = 1000 };
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));
	Perftools__Profiles__Profile *prof;
	char buf[64];
	char **sorted;

	p->nmappings = 1;
	p->mappings = hb_xcalloc(1, sizeof(*p->mappings));
	p->mappings[0].path = hb_xstrdup("/bin/big");
	p->mappings[0].build_id = hb_xstrdup("aa");
	p->nlocations = N;
	p->locations = hb_xcalloc(N, sizeof(*p->locations));
	for (int i = 0; i < N; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x1000 + i;
		l->mapping = 1;
		l->nlines = 1;
		l->lines = hb_xcalloc(1, sizeof(*l->lines));
		snprintf(buf, sizeof(buf), "fn_%d", i);
		l->lines[0].function = hb_xstrdup(buf);
		snprintf(buf, sizeof(buf), "src_%d.c", i % NFILES);
		l->lines[0].file = hb_xstrdup(buf);
		l->lines[0].line = i;
	}
	p->nsamples = N;
	p->samples = hb_xcalloc(N, sizeof(*p->samples));
	for (int i = 0; i < N; i++) {
		p->samples[i].nlocs = 2;
		p->samples[i].locs = hb_xcalloc(2, sizeof(uint32_t));
		p->samples[i].locs[0] = i;
		p->samples[i].locs[1] = (i + 1) % N;
		p->samples[i].v[HB_ALLOC_SPACE] = i;
	}

	prof = roundtrip(p);
	/* "", 4 type names, count, bytes, space, path, build id, functions, files */
	cr_assert_eq(prof->n_string_table, 10 + N + NFILES);
	cr_assert_eq(prof->n_function, N);
	sorted = hb_xcalloc(prof->n_string_table, sizeof(*sorted));
	memcpy(sorted, prof->string_table, prof->n_string_table * sizeof(*sorted));
	qsort(sorted, prof->n_string_table, sizeof(*sorted), cmp_strp);
	for (size_t i = 1; i < prof->n_string_table; i++)
		cr_assert_str_neq(sorted[i - 1], sorted[i]);
	free(sorted);
	for (int i = 0; i < N; i += 997) {
		const Perftools__Profiles__Function *f =
			func(prof, prof->location[i]->line[0]->function_id);

		snprintf(buf, sizeof(buf), "fn_%d", i);
		assert_str(prof, f->name, buf);
		assert_str(prof, f->system_name, buf);
		snprintf(buf, sizeof(buf), "src_%d.c", i % NFILES);
		assert_str(prof, f->filename, buf);
		cr_assert_eq(prof->sample[i]->location_id[1], (uint64_t)(i + 1) % N + 1);
		cr_assert_eq(prof->sample[i]->value[HB_ALLOC_SPACE], i);
	}
	perftools__profiles__profile__free_unpacked(prof, NULL);
	hb_profile__free(p);
}

static size_t gzip_into(const void *in, size_t len, uint8_t *out, size_t cap)
{
	z_stream zs = { 0 };
	size_t n;

	cr_assert_eq(deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
	zs.next_in = (Bytef *)in;
	zs.avail_in = len;
	zs.next_out = out;
	zs.avail_out = cap;
	cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
	n = zs.total_out;
	deflateEnd(&zs);
	return n;
}

Test(pprof, decode_rejects_bad_input)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof = NULL;
	static const uint8_t not_proto[] = { 0xff, 0xff, 0xff, 0xff };
	uint8_t junk[64], *gz;
	size_t len, n;

	cr_assert_eq(pprof_decode((const uint8_t *)"hello", 5, &prof), -EBADMSG);
	cr_assert_eq(pprof_decode((const uint8_t *)"", 0, &prof), -EBADMSG);

	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	/* truncated */
	cr_assert_eq(pprof_decode(gz, len / 2, &prof), -EBADMSG);
	cr_assert_eq(pprof_decode(gz, len - 1, &prof), -EBADMSG);
	/* corrupted CRC */
	gz[len - 8] ^= 0xff;
	cr_assert_eq(pprof_decode(gz, len, &prof), -EBADMSG);
	gz[len - 8] ^= 0xff;
	/* over the limit */
	cr_assert_eq(pprof_decode_max(gz, len, 16, &prof), -EFBIG);
	cr_assert_null(prof);
	cr_assert_eq(pprof_decode(gz, len, &prof), 0);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	prof = NULL;

	/* valid gzip, not a Profile */
	n = gzip_into(not_proto, sizeof(not_proto), junk, sizeof(junk));
	cr_assert_eq(pprof_decode(junk, n, &prof), -EBADMSG);
	cr_assert_null(prof);

	free(gz);
	hb_profile__free(p);
}

Test(pprof, decode_limit_is_on_output)
{
	size_t big = 2 << 20, cap = 64 << 10, n;
	Perftools__Profiles__Profile *prof = NULL;
	uint8_t *zeros = hb_xcalloc(big, 1), *gz = hb_xcalloc(cap, 1);

	n = gzip_into(zeros, big, gz, cap);
	cr_assert_lt(n, 16 << 10);
	cr_assert_eq(pprof_decode_max(gz, n, big - 1, &prof), -EFBIG);
	/* exactly at the limit it inflates, then fails as a Profile (tag 0) */
	cr_assert_eq(pprof_decode_max(gz, n, big, &prof), -EBADMSG);
	cr_assert_null(prof);
	free(zeros);
	free(gz);
}

Test(pprof, decode_multi_member_gzip)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *ref = roundtrip(p), *prof = NULL;
	size_t packed_len = perftools__profiles__profile__get_packed_size(ref), n;
	uint8_t *packed = hb_xcalloc(packed_len, 1), *gz = hb_xcalloc(2 * packed_len + 256, 1);

	perftools__profiles__profile__pack(ref, packed);
	/* two gzip members, as `cat a.gz b.gz` would make */
	n = gzip_into(packed, packed_len / 2, gz, packed_len + 128);
	n += gzip_into(packed + packed_len / 2, packed_len - packed_len / 2, gz + n,
		       packed_len + 128);
	cr_assert_eq(pprof_decode(gz, n, &prof), 0);
	cr_assert_eq(prof->n_string_table, ref->n_string_table);
	cr_assert_eq(prof->n_sample, ref->n_sample);
	cr_assert_eq(prof->period, 524288);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	prof = NULL;

	/* trailing garbage is not a member */
	memcpy(gz + n, "junk", 4);
	cr_assert_eq(pprof_decode(gz, n + 4, &prof), -EBADMSG);

	free(packed);
	free(gz);
	perftools__profiles__profile__free_unpacked(ref, NULL);
	hb_profile__free(p);
}

/*
 * The samples are packed one at a time into the gzip stream: the bytes are
 * those protobuf-c packs for the whole message (decoded and packed again),
 * with pid and diff-base labels, numeric labels with and without a unit,
 * a sample without locations and the raw comment.
 */
Test(pprof, streamed_samples_pack_like_the_whole_message)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof;
	uint8_t *gz = NULL, *raw, *packed;
	size_t len = 0, plen;
	uLongf rlen;
	z_stream zs = { 0 };

	for (size_t i = 0; i < p->nsamples; i++) {
		struct hb_sample *s = &p->samples[i];

		s->pid = i % 2 ? 4242 : 0;
		s->diff_base = i == 1;
		s->nlabels = (uint32_t)(i % 3);
		s->labels = hb_xcalloc(2, sizeof(*s->labels));
		s->labels[0] = (struct hb_label){ "lifetime_p50", "nanoseconds", -7 - (int64_t)i };
		s->labels[1] = (struct hb_label){ "freed", NULL, 1LL << 40 };
	}
	p->samples[0].nlocs = 0;
	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	cr_assert_eq(pprof_decode(gz, len, &prof), 0);
	plen = perftools__profiles__profile__get_packed_size(prof);
	packed = hb_xcalloc(plen + 1, 1);
	perftools__profiles__profile__pack(prof, packed);
	raw = hb_xcalloc(plen + 1, 1);
	cr_assert_eq(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = gz;
	zs.avail_in = (uInt)len;
	zs.next_out = raw;
	zs.avail_out = (uInt)plen + 1;
	cr_assert_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
	rlen = zs.total_out;
	inflateEnd(&zs);
	cr_assert_eq(rlen, plen);
	cr_assert_eq(memcmp(raw, packed, plen), 0);
	cr_assert_eq(prof->n_sample, p->nsamples);
	cr_assert_eq(prof->sample[1]->n_label, 3, "pid, pprof::base and one label");
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	free(raw);
	free(packed);
	hb_profile__free(p);
}

/* n empty samples: field 2 (sample), length-delimited, of length 0; gzipped into *gz. */
static size_t empty_samples(size_t n, uint8_t **gz)
{
	uint8_t *raw = hb_xcalloc(2 * n, 1);
	size_t cap = 2 * n / 100 + 4096, len;

	for (size_t i = 0; i < n; i++)
		raw[2 * i] = 0x12;
	*gz = hb_xcalloc(cap, 1);
	len = gzip_into(raw, 2 * n, *gz, cap);
	free(raw);
	return len;
}

/*
 * 16 MB of empty samples (a 16 KiB gzip) is some 1 GB once protobuf-c has
 * unpacked it: refused within the budget, not after. 100k of them fit.
 */
Test(pprof, decode_memory_is_bounded_by_the_message)
{
	Perftools__Profiles__Profile *prof = NULL;
	uint8_t *gz;
	size_t n = empty_samples(8 << 20, &gz);

	cr_assert_lt(n, 64 << 10);
	cr_assert_eq(pprof_decode(gz, n, &prof), -E2BIG);
	cr_assert_null(prof);
	free(gz);

	n = empty_samples(100000, &gz);
	cr_assert_eq(pprof_decode(gz, n, &prof), 0);
	cr_assert_eq(prof->n_sample, 100000);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
}

/* A budget run out anywhere in the message frees what was unpacked (ASan checks the leaks). */
Test(pprof, decode_budget_fails_cleanly_at_every_size)
{
	struct hb_profile *p = make_profile(true);
	Perftools__Profiles__Profile *prof = NULL;
	size_t len, need = 0;
	uint8_t *gz;

	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	for (size_t budget = 0; !need; budget += 16) {
		int rc = pprof_decode_mem(gz, len, PPROF_DECODE_MAX, budget, &prof);

		if (rc == 0) {
			need = budget;
			break;
		}
		cr_assert_eq(rc, -E2BIG, "budget %zu: %d", budget, rc);
		cr_assert_null(prof);
	}
	cr_assert_eq(prof->n_sample, p->nsamples);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	hb_profile__free(p);
}
