// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pyroscope delivery without a server: URLs, credentials, and what a flush does when none answers. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pyro_auth.h"
#include "pyroscope.h"
#include "spool.h"

TestSuite(pyroscope, .fini = hb_tmpdir_cleanup);

Test(pyroscope, ingest_url)
{
	char out[256], err[512];

	cr_assert_eq(pyro_ingest_url("https://p.example:4040", out, sizeof(out), err, sizeof(err)),
		     0);
	cr_assert_str_eq(out, "https://p.example:4040/ingest");
	cr_assert_eq(pyro_ingest_url("http://127.0.0.1:4040/prefix/", out, sizeof(out), err,
				     sizeof(err)),
		     0);
	cr_assert_str_eq(out, "http://127.0.0.1:4040/prefix/ingest");
	cr_assert_eq(pyro_ingest_url("http://h/ingest", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "http://h/ingest");
	cr_assert_eq(pyro_ingest_url("ftp://h", out, sizeof(out), err, sizeof(err)), -EINVAL);
	cr_assert_eq(pyro_ingest_url("http://h/?x=1", out, sizeof(out), err, sizeof(err)), -EINVAL);
	cr_assert_eq(pyro_ingest_url("http:///x", out, sizeof(out), err, sizeof(err)), -EINVAL);
	/* credentials in the URL: refused, and the message does not repeat them */
	cr_assert_eq(pyro_ingest_url("https://user:hunter2@h", out, sizeof(out), err, sizeof(err)),
		     -EINVAL);
	cr_assert_null(strstr(err, "hunter2"), "%s", err);
	/* an @ in the path is not userinfo */
	cr_assert_eq(pyro_ingest_url("https://h/a@b", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_eq(pyro_ingest_url("https://h/long", out, 12, err, sizeof(err)), -ENAMETOOLONG);
	cr_assert_str_eq(err, "the --pyroscope URL is too long");
}

Test(pyroscope, credentials_from_environment_and_files)
{
	struct pyro_opts po = { .url = "https://p.example", .spool_dir = "/tmp", .timeout = 1 };
	char err[512], path[PATH_MAX + 16];
	struct pyro *p = NULL;
	FILE *f;

	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyro__free(p);
	setenv("HEAPBPF_PYROSCOPE_USER", "123", 1);
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "HEAPBPF_PYROSCOPE_PASSWORD"), "%s", err);
	snprintf(path, sizeof(path), "%s/pw", hb_tmpdir());
	f = fopen(path, "w");
	fputs("s3cret-value\n", f);
	fclose(f);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD_FILE", path, 1);
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyro__free(p);
	/* both forms of one secret, or basic auth and a token: refused */
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", "x", 1);
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), -EINVAL);
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "t", 1);
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert_null(strstr(err, "s3cret"), "%s", err);
	unsetenv("HEAPBPF_PYROSCOPE_USER");
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD_FILE");
	/* a header injection attempt */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "t\r\nX-Evil: 1", 1);
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert_null(strstr(err, "Evil"), "%s", err);
	/* a token over plain http to another host */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "tok", 1);
	po.url = "http://p.example";
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), -EINVAL);
	po.url = "http://127.0.0.1:4040";
	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyro__free(p);
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
}

Test(pyroscope, secrets_are_redacted_from_messages)
{
	struct pyro_auth *a = NULL;
	char err[512], msg[256];

	setenv("HEAPBPF_PYROSCOPE_TOKEN", "tok-s3cret", 1);
	setenv("HEAPBPF_PYROSCOPE_TENANT", "ab", 1);
	cr_assert_eq(pyro_auth__new("http://localhost:4040/ingest", &a, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(msg, sizeof(msg), "HTTP 401: bad token tok-s3cret (tok-s3cret) for ab");
	pyro_auth__redact(a, msg);
	/* a two-character secret would redact half of every message: kept */
	cr_assert_str_eq(msg, "HTTP 401: bad token *** (***) for ab");
	pyro_auth__free(a);
}

/* A Pyroscope client for the temporary spool, with a server that refuses connections. */
static struct pyro *unreachable(void)
{
	struct pyro_opts po = {
		.url = "http://127.0.0.1:1", .spool_dir = hb_tmpdir(), .timeout = 2, .retries = 3
	};
	struct pyro *p = NULL;
	char err[512];

	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	return p;
}

static int spool_files(void)
{
	struct spool *sp = NULL;
	struct dirent **files = NULL;
	int n;

	cr_assert_eq(spool__new(hb_tmpdir(), 0, 0, &sp), 0);
	n = spool__list(sp, &files);
	spool_list_free(files, n);
	spool__free(sp);
	return n;
}

Test(pyroscope, an_unreachable_server_keeps_the_spool)
{
	struct pyro *p = unreachable();
	struct pyro_flush_result r;
	char err[512], path[PATH_MAX + 64];
	FILE *f;

	cr_assert_eq(pyro__spool(p, "svc{pid=1}", 1, 2, "gz", 2, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pyro__spool(p, "svc{pid=1}", 3, 4, "gz", 2, err, sizeof(err)), 0, "%s", err);
	/* older than both, and not a spool file: deleted and counted as refused */
	snprintf(path, sizeof(path), "%s/00000000T000000Z-000000000-1.spool", hb_tmpdir());
	f = fopen(path, "w");
	fputs("not a spool file", f);
	fclose(f);
	/* retries 0: the first attempt fails and delivery stops there, keeping the rest */
	pyro__flush(p, true, 0, &r);
	cr_assert_eq(r.rejected, 1);
	cr_assert_eq(r.sent, 0);
	cr_assert_eq(r.pending, 2);
	cr_assert_not(r.auth_failed);
	cr_assert_not(r.busy);
	cr_assert_eq(spool_files(), 2);
	pyro__free(p);
}

Test(pyroscope, another_delivery_makes_a_flush_busy)
{
	struct pyro *p = unreachable();
	struct pyro_flush_result r;
	struct spool *other = NULL;
	char err[512];

	cr_assert_eq(pyro__spool(p, "svc{}", 1, 2, "gz", 2, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(spool__new(hb_tmpdir(), 0, 0, &other), 0);
	cr_assert_eq(spool__lock(other, false, err, sizeof(err)), 0, "%s", err);
	pyro__flush(p, false, 0, &r);
	cr_assert(r.busy);
	cr_assert_eq(r.pending, 0);
	cr_assert_eq(spool_files(), 1);
	spool__free(other);
	pyro__free(p);
}

Test(pyroscope, a_full_spool_drops_the_oldest)
{
	struct pyro_opts po = {
		.url = "http://127.0.0.1:1", .spool_dir = hb_tmpdir(), .spool_keep = 2, .timeout = 1
	};
	struct pyro_flush_result r;
	struct pyro *p = NULL;
	char err[512];

	cr_assert_eq(pyro__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pyro__spool(p, "svc{}", i, i + 1, "gz", 2, err, sizeof(err)), 0, "%s",
			     err);
	cr_assert_eq(spool_files(), 2);
	pyro__flush(p, true, 0, &r);
	cr_assert_eq(r.trimmed, 0);
	cr_assert_eq(r.pending, 2);
	pyro__free(p);
}
