// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pyroscope delivery without a server: URLs, credentials, and what a flush does when none answers. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "harness.h"
#include "export/pyro_auth.h"
#include "export/pyroscope.h"
#include "export/spool.h"

TestSuite(pyroscope, .fini = hb_tmpdir_cleanup);

Test(pyroscope, ingest_url)
{
	char out[256], err[512];

	cr_assert_eq(pyroscope_ingest_url("https://p.example:4040", out, sizeof(out), err,
					  sizeof(err)),
		     0);
	cr_assert_str_eq(out, "https://p.example:4040/ingest");
	cr_assert_eq(pyroscope_ingest_url("http://127.0.0.1:4040/prefix/", out, sizeof(out), err,
					  sizeof(err)),
		     0);
	cr_assert_str_eq(out, "http://127.0.0.1:4040/prefix/ingest");
	cr_assert_eq(pyroscope_ingest_url("http://h/ingest", out, sizeof(out), err, sizeof(err)),
		     0);
	cr_assert_str_eq(out, "http://h/ingest");
	cr_assert_eq(pyroscope_ingest_url("ftp://h", out, sizeof(out), err, sizeof(err)), -EINVAL);
	cr_assert_eq(pyroscope_ingest_url("http://h/?x=1", out, sizeof(out), err, sizeof(err)),
		     -EINVAL);
	cr_assert_eq(pyroscope_ingest_url("http:///x", out, sizeof(out), err, sizeof(err)),
		     -EINVAL);
	/* credentials in the URL: refused, and the message does not repeat them */
	cr_assert_eq(pyroscope_ingest_url("https://user:hunter2@h", out, sizeof(out), err,
					  sizeof(err)),
		     -EINVAL);
	cr_assert_null(strstr(err, "hunter2"), "%s", err);
	/* an @ in the path is not userinfo */
	cr_assert_eq(pyroscope_ingest_url("https://h/a@b", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_eq(pyroscope_ingest_url("https://h/long", out, 12, err, sizeof(err)),
		     -ENAMETOOLONG);
	cr_assert_str_eq(err, "the --pyroscope URL is too long");
}

Test(pyroscope, credentials_from_environment_and_files)
{
	struct pyro_opts po = { .url = "https://p.example", .spool_dir = "/tmp", .timeout = 1 };
	char err[512], path[PATH_MAX + 16];
	struct pyro *p = NULL;
	FILE *f;

	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyroscope__free(p);
	setenv("HEAPBPF_PYROSCOPE_USER", "123", 1);
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "HEAPBPF_PYROSCOPE_PASSWORD"), "%s", err);
	snprintf(path, sizeof(path), "%s/pw", hb_tmpdir());
	f = fopen(path, "w");
	fputs("s3cret-value\n", f);
	fclose(f);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD_FILE", path, 1);
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyroscope__free(p);
	/* both forms of one secret, or basic auth and a token: refused */
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", "x", 1);
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "t", 1);
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert_null(strstr(err, "s3cret"), "%s", err);
	unsetenv("HEAPBPF_PYROSCOPE_USER");
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD_FILE");
	/* a header injection attempt */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "t\r\nX-Evil: 1", 1);
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert_null(strstr(err, "Evil"), "%s", err);
	/* a token over plain http to another host (an address: nothing is resolved or sent) */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "tok", 1);
	po.url = "http://192.0.2.1";
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	po.url = "http://127.0.0.1:4040";
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyroscope__free(p);
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
}

Test(pyroscope, secrets_are_redacted_from_messages)
{
	struct pyro_auth *a = NULL;
	char err[512], msg[256];

	setenv("HEAPBPF_PYROSCOPE_TOKEN", "tok-s3cret", 1);
	setenv("HEAPBPF_PYROSCOPE_TENANT", "ab", 1);
	cr_assert_eq(pyro_auth__new("http://localhost:4040/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	snprintf(msg, sizeof(msg), "HTTP 401: bad token tok-s3cret (tok-s3cret) for ab");
	pyro_auth__redact(a, msg);
	/* a two-character secret would redact half of every message: kept */
	cr_assert_str_eq(msg, "HTTP 401: bad token *** (***) for ab");
	pyro_auth__free(a);
}

/* The Authorization header's value, echoed by a server: the base64 of user:password. */
Test(pyroscope, basic_auth_header_value_is_redacted)
{
	struct pyro_auth *a = NULL;
	char err[512], msg[512];

	/* "12345:pw-b0a710ad" in base64; the user alone occurs in the base64 too ("MTIz") */
	setenv("HEAPBPF_PYROSCOPE_USER", "12345", 1);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", "pw-b0a710ad", 1);
	cr_assert_eq(pyro_auth__new("https://p.example/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	snprintf(msg, sizeof(msg),
		 "HTTP 400: echo Authorization: Basic MTIzNDU6cHctYjBhNzEwYWQ= "
		 "user 12345");
	pyro_auth__redact(a, msg);
	cr_assert_str_eq(msg, "HTTP 400: echo Authorization: Basic *** user ***");
	pyro_auth__free(a);
	unsetenv("HEAPBPF_PYROSCOPE_USER");
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
	/* a secret that reads like the mark itself: redacted once, not forever */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "***", 1);
	cr_assert_eq(pyro_auth__new("https://p.example/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	snprintf(msg, sizeof(msg), "a *** b");
	pyro_auth__redact(a, msg);
	cr_assert_str_eq(msg, "a *** b");
	pyro_auth__free(a);
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
}

/* Refused, with one sentence naming why and not repeating a password. */
static void refused(const char *url, const char *why)
{
	char pin[512] = "x", err[512] = "";

	cr_assert_eq(pyro_auth_transport(url, pin, sizeof(pin), err, sizeof(err)), -EINVAL,
		     "%s passed", url);
	cr_assert(strstr(err, why), "%s: %s", url, err);
	cr_assert_null(strchr(err, '\n'), "%s", err);
	cr_assert_null(strstr(err, "hunter2"), "%s", err);
	cr_assert_str_eq(pin, "");
}

/* Allowed; pin is what the request is pinned to. */
static void allowed(const char *url, const char *want_pin)
{
	char pin[512], err[512] = "";

	cr_assert_eq(pyro_auth_transport(url, pin, sizeof(pin), err, sizeof(err)), 0, "%s: %s", url,
		     err);
	cr_assert_str_eq(pin, want_pin, "%s", url);
}

Test(pyroscope, credentials_go_to_loopback_addresses_or_over_https)
{
	/*
	 * Names that only start like the loopback's are refused by what they
	 * resolve to: tests/integration/test_pyro_creds.c, in a network namespace
	 * of its own with its own /etc/hosts (a unit test here would ask the
	 * machine's resolver, off the host).
	 */
	allowed("https://p.example:4040/ingest", "");
	allowed("HTTPS://P.example/ingest", "");
	allowed("http://127.0.0.1:4040/ingest", "");
	allowed("HTTP://127.0.0.1:4040/ingest", "");
	allowed("http://127.1.2.3:4040/ingest", "");
	allowed("http://[::1]:4040/ingest", "");
	/* libcurl's reading of an address: 0x7f000001 is 127.0.0.1 */
	allowed("http://0x7f000001:4040/ingest", "");
	refused("http://0x0a000001:4040/ingest", "10.0.0.1 is not a loopback address");
	refused("http://10.1.2.3:4040/ingest", "10.1.2.3 is not a loopback address");
	refused("http://0.0.0.0:4040/ingest", "0.0.0.0 is not a loopback address");
	refused("http://128.0.0.1/ingest", "not a loopback address");
	refused("http://[::2]:4040/ingest", "::2 is not a loopback address");
	refused("http://[::ffff:127.0.0.1]:4040/ingest", "not a loopback address");
	refused("http://[fe80::1%25lo]:4040/ingest", "not a loopback address");
	/* userinfo: libcurl's host is after the @ */
	refused("http://127.0.0.1@10.1.2.3/ingest", "credentials in the URL");
	refused("http://u:hunter2@127.0.0.1/ingest", "credentials in the URL");
	refused("ftp://127.0.0.1/ingest", "http:// or https://");
}

/* localhost resolves to loopback addresses only: allowed, and pinned to what it resolved to. */
Test(pyroscope, a_loopback_name_is_pinned_to_its_addresses)
{
	char pin[512], err[512] = "", *addr, *save = NULL;

	cr_assert_eq(pyro_auth_transport("http://localhost:4040/ingest", pin, sizeof(pin), err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(strncmp(pin, "localhost:4040:", 15), 0, "%s", pin);
	cr_assert_neq(pin[15], '\0', "%s", pin);
	for (addr = strtok_r(pin + 15, ",", &save); addr; addr = strtok_r(NULL, ",", &save))
		cr_assert(strncmp(addr, "127.", 4) == 0 || strcmp(addr, "[::1]") == 0, "%s", addr);
	/* the scheme's port when the URL has none */
	cr_assert_eq(pyro_auth_transport("http://LOCALHOST/ingest", pin, sizeof(pin), err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(strncasecmp(pin, "localhost:80:", 13), 0, "%s", pin);
}

Test(pyroscope, a_credential_takes_no_proxy_but_the_named_one)
{
	struct pyro_opts po = { .url = "http://127.0.0.1:4040", .spool_dir = "/tmp", .timeout = 1 };
	struct pyro_auth *a = NULL;
	struct pyro *p = NULL;
	char err[512];

	/* a token over http through a proxy: the proxy would read it */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", "tok-s3cret", 1);
	po.proxy = "http://127.0.0.1:3128";
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--pyroscope-proxy would see the credentials"), "%s", err);
	po.url = "https://p.example";
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	pyroscope__free(p);
	/* no secret on the command line, and a proxy libcurl knows */
	po.proxy = "http://u:hunter2@127.0.0.1:3128";
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert_null(strstr(err, "hunter2"), "%s", err);
	po.proxy = "ftp://127.0.0.1:21";
	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--pyroscope-proxy needs a URL"), "%s", err);
	/* a token to localhost: pinned to the addresses checked */
	cr_assert_eq(pyro_auth__new("http://localhost:4040/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(strncmp(pyro_auth__pin(a), "localhost:4040:", 15), 0, "%s", pyro_auth__pin(a));
	pyro_auth__free(a);
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	/* without a credential nothing is resolved, nor pinned */
	cr_assert_eq(pyro_auth__new("http://localhost:4040/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_str_eq(pyro_auth__pin(a), "");
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

	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
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

	cr_assert_eq(pyroscope__spool(p, "svc{pid=1}", 1, 2, "gz", 2, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(pyroscope__spool(p, "svc{pid=1}", 3, 4, "gz", 2, err, sizeof(err)), 0, "%s",
		     err);
	/* older than both, and not a spool file: deleted and counted as refused */
	snprintf(path, sizeof(path), "%s/00000000T000000Z-000000000-1.spool", hb_tmpdir());
	f = fopen(path, "w");
	fputs("not a spool file", f);
	fclose(f);
	cr_assert_eq(chmod(path, 0600), 0);
	/* another file heapbpf did not write (its mode): left alone, never pushed */
	snprintf(path, sizeof(path), "%s/00000000T000000Z-000000000-2.spool", hb_tmpdir());
	f = fopen(path, "w");
	fputs("HBSPOOL1\nname=forged{}\nfrom=1\nuntil=2\n\nbody", f);
	fclose(f);
	cr_assert_eq(chmod(path, 0644), 0);
	/* retries 0: the first attempt fails and delivery stops there, keeping the rest */
	pyroscope__flush(p, true, 0, &r);
	cr_assert_eq(r.rejected, 1);
	cr_assert_eq(r.foreign, 1);
	cr_assert_eq(r.sent, 0);
	cr_assert_eq(r.pending, 2);
	cr_assert_not(r.auth_failed);
	cr_assert_not(r.busy);
	cr_assert_eq(spool_files(), 3);
	pyroscope__free(p);
}

Test(pyroscope, another_delivery_makes_a_flush_busy)
{
	struct pyro *p = unreachable();
	struct pyro_flush_result r;
	struct spool *other = NULL;
	char err[512];

	cr_assert_eq(pyroscope__spool(p, "svc{}", 1, 2, "gz", 2, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(spool__new(hb_tmpdir(), 0, 0, &other), 0);
	cr_assert_eq(spool__lock(other, false, err, sizeof(err)), 0, "%s", err);
	pyroscope__flush(p, false, 0, &r);
	cr_assert(r.busy);
	cr_assert_eq(r.pending, 0);
	cr_assert_eq(spool_files(), 1);
	spool__free(other);
	pyroscope__free(p);
}

Test(pyroscope, a_full_spool_drops_the_oldest)
{
	struct pyro_opts po = {
		.url = "http://127.0.0.1:1", .spool_dir = hb_tmpdir(), .spool_keep = 2, .timeout = 1
	};
	struct pyro_flush_result r;
	struct pyro *p = NULL;
	char err[512];

	cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pyroscope__spool(p, "svc{}", i, i + 1, "gz", 2, err, sizeof(err)), 0,
			     "%s", err);
	cr_assert_eq(spool_files(), 2);
	pyroscope__flush(p, true, 0, &r);
	cr_assert_eq(r.trimmed, 0);
	cr_assert_eq(r.pending, 2);
	pyroscope__free(p);
}

/*
 * A spooled name that is not SERVICE{LABEL=VALUE,...} (a label injected,
 * a value that would split) is refused for good before anything is sent,
 * to push and to /ingest alike: 127.0.0.1:1 refuses connections, so a
 * request sent would keep the profile as pending instead.
 */
Test(pyroscope, a_name_with_injected_labels_is_never_sent)
{
	static const char *const names[] = { "svc{pid=1}x{evil=1}", "svc{comm=a b}",
					     "svc{comm=a,comm=b}", "svc{comm=\"a\"}" };
	struct pyro_flush_result r;
	char err[512];

	for (int ingest = 0; ingest < 2; ingest++) {
		struct pyro_opts po = { .url = "http://127.0.0.1:1",
					.spool_dir = hb_tmpdir(),
					.timeout = 2,
					.ingest = ingest };
		struct pyro *p = NULL;

		cr_assert_eq(pyroscope__new(&po, &p, err, sizeof(err)), 0, "%s", err);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			cr_assert_eq(pyroscope__spool(p, names[i], 1, 2, "gz", 2, err, sizeof(err)),
				     0, "%s", err);
		pyroscope__flush(p, true, 0, &r);
		cr_assert_eq(r.rejected, 4, "ingest %d", ingest);
		cr_assert_eq(r.pending, 0, "ingest %d", ingest);
		cr_assert_eq(spool_files(), 0);
		pyroscope__free(p);
	}
}
