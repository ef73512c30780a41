// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where Pyroscope credentials go, end to end, against the local stand-ins of
 * tests/pyroscope/ (not Pyroscope): never through the environment's proxy,
 * never over plain http to anything but a loopback address, and never into
 * heapbpf's messages when a server echoes them. Only loopback addresses are
 * connected to: the names that must be refused are resolved in a private
 * mount and network namespace (its own /etc/hosts, no network at all).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "standin.h"

#define PUSH_SERVER   "tests/pyroscope/pyroscope_push_server.py"
#define SECRET_TOKEN  "tok-creds-5e2f81"
#define SECRET_USER   "12345"
#define SECRET_PASSWD "pw-creds-b0a710ad"
/* base64 of SECRET_USER ":" SECRET_PASSWD, the Authorization header's value */
#define SECRET_BASIC "MTIzNDU6cHctY3JlZHMtYjBhNzEwYWQ="

static pid_t server_pid;
static int server_port;
static const char *const proxy_vars[] = { "http_proxy", "HTTPS_PROXY", "https_proxy",
					  "ALL_PROXY",	"all_proxy",   NULL };

static void creds_fini(void)
{
	hb_standin_kill(&server_pid);
	hb_tmpdir_cleanup();
}

TestSuite(pyro_creds, .fini = creds_fini, .timeout = 180);

static int spooled(const char *dir)
{
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_type == DT_REG && strstr(de->d_name, ".spool") != NULL;
	closedir(d);
	return n;
}

static void start_server(const char *const *extra, const char *const *env)
{
	const char *cmd[] = { "/usr/bin/python3", PUSH_SERVER, NULL };

	server_pid = hb_standin_start(cmd, 0, extra, env, &server_port);
}

/* Accepted profiles so far. */
static int accepted(void)
{
	char lines[4][8192];

	return hb_standin_log(&lines[0][0], sizeof(lines[0]), 4);
}

/* A listening socket on the loopback that nothing answers on: a proxy that only counts. */
static int listener(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 16), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* The connections made to the listener so far (heapbpf has exited: all of them queued). */
static int connections(int fd)
{
	int n = 0, c;

	while ((c = accept(fd, NULL, NULL)) >= 0) {
		close(c);
		n++;
	}
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK, "accept: %s", strerror(errno));
	return n;
}

static void set_proxy_env(int port)
{
	char url[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	for (const char *const *v = proxy_vars; *v; v++)
		setenv(*v, url, 1);
}

static void unset_proxy_env(void)
{
	for (const char *const *v = proxy_vars; *v; v++)
		unsetenv(*v);
}

/* heapbpf --pid pid -d 1 --pyroscope http://127.0.0.1:<stand-in>, more options (NULL-ended). */
static int run(const char *pid, const char *spool, const char *const *more, char *err,
	       size_t errlen)
{
	const char *args[32];
	char url[64];
	int n = hb_standin_args(args, url, sizeof(url), "http", server_port, pid, spool);

	for (; more && *more && n < 31; more++)
		args[n++] = *more;
	args[n] = NULL;
	return hb_run(args, err, errlen, 90000);
}

/*
 * (a) http_proxy, https_proxy and all_proxy name a local listener: a push
 * with a token goes straight to the server, nothing reaches the listener.
 * Without a credential the environment's proxy is still honoured, and
 * --pyroscope-proxy names one for every request.
 */
Test(pyro_creds, a_credential_never_goes_through_the_environments_proxy)
{
	const char *expect[] = { "PYRO_EXPECT_TOKEN=" SECRET_TOKEN, NULL };
	const char *patient[] = { "--pyroscope-retries", "1", "--pyroscope-timeout", "5", NULL };
	const char *quick[] = { "--pyroscope-retries", "0", "--pyroscope-timeout", "1", NULL };
	const char *named[] = { "--pyroscope-retries",
				"0",
				"--pyroscope-timeout",
				"1",
				"--pyroscope-proxy",
				NULL,
				NULL };
	char pid[16], err[65536], purl[64];
	const char *spool = hb_tmp("spool");
	int proxy, pport, rc;
	struct svc a;

	hb_require_bpf();
	start_server(NULL, expect);
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	proxy = listener(&pport);
	set_proxy_env(pport);
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN, 1);
	rc = run(pid, spool, patient, err, sizeof(err));
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	cr_assert_eq(connections(proxy), 0, "the proxy was asked: %s", err);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(accepted(), 1, "%s", err);
	cr_assert_eq(spooled(spool), 0);

	/* no credential: the environment's proxy, as libcurl has it (it never answers here) */
	rc = run(pid, spool, quick, err, sizeof(err));
	unset_proxy_env();
	cr_assert_eq(connections(proxy), 1, "%s", err);
	cr_assert_eq(rc, 5, "%s", err);
	cr_assert_eq(accepted(), 1, "%s", err);
	cr_assert_eq(spooled(spool), 1);

	/* --pyroscope-proxy: the one named, with no proxy in the environment */
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", pport);
	named[5] = purl;
	rc = run(pid, spool, named, err, sizeof(err));
	cr_assert_eq(connections(proxy), 1, "%s", err);
	cr_assert_eq(rc, 5, "%s", err);
	/* ... but never for a credential over plain http, which it would read */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN, 1);
	rc = run(pid, spool, named, err, sizeof(err));
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	cr_assert_eq(rc, 1, "%s", err);
	cr_assert(strstr(err, "--pyroscope-proxy would see the credentials"), "%s", err);
	cr_assert_eq(connections(proxy), 0, "%s", err);
	close(proxy);
	cr_assert_eq(svc_stop(&a), 0);
}

/* No trace of the password, the base64 of user:password or any long piece of it. */
static void assert_no_basic_secret(const char *err)
{
	char piece[9];

	cr_assert_null(strstr(err, SECRET_PASSWD), "%s", err);
	for (size_t i = 0; i + 8 <= strlen(SECRET_BASIC); i++) {
		snprintf(piece, sizeof(piece), "%.8s", SECRET_BASIC + i);
		cr_assert_null(strstr(err, piece), "%s holds %s", err, piece);
	}
}

/*
 * (b) A server that echoes the Authorization header in its error body: the
 * reply is withheld from heapbpf's messages (its status and Connect code
 * said), also where the reply's printed start would cut the value in two.
 */
Test(pyro_creds, an_echoed_authorization_header_is_redacted)
{
	const char *echo0[] = { "--echo-auth", "0", NULL },
		   *echo480[] = { "--echo-auth", "480", NULL };
	const char *ingest[] = { "--pyroscope-api", "ingest", "--pyroscope-retries", "0", NULL };
	const char *push[] = { "--pyroscope-retries", "0", NULL };
	char pid[16], err[65536];
	const char *spool = hb_tmp("spool");
	struct svc a;
	int rc;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	setenv("HEAPBPF_PYROSCOPE_USER", SECRET_USER, 1);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", SECRET_PASSWD, 1);

	start_server(echo0, NULL);
	rc = run(pid, spool, push, err, sizeof(err));
	cr_assert_eq(rc, 1, "%s", err);
	cr_assert(strstr(err, "HTTP 401 unauthenticated (reply withheld: it contained the "
			      "credential)"),
		  "%s", err);
	assert_no_basic_secret(err);
	hb_standin_stop(&server_pid);

	/* "HTTP 400: " and 480 characters, then the header: its value crosses the 512th */
	start_server(echo480, NULL);
	rc = run(pid, spool, ingest, err, sizeof(err));
	cr_assert_eq(rc, 1, "%s", err);
	cr_assert(strstr(err, "HTTP 400 (reply withheld: it contained the credential)"), "%s", err);
	cr_assert_null(strstr(err, "xxxAuthorization"), "%s", err);
	assert_no_basic_secret(err);
	/* both refused for good (the one kept by the first run too): deleted */
	cr_assert_eq(spooled(spool), 0);
	hb_standin_stop(&server_pid);

	unsetenv("HEAPBPF_PYROSCOPE_USER");
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
	cr_assert_eq(svc_stop(&a), 0);
}

/* Credentials with characters that every encoding changes: / " + space = > ~ ? */
#define ENC_USER   "Qv7kW/Jm4>"
#define ENC_PASSWD "Zx9Tq\"pw/cRed5+v8Hn r3~?"
/* base64 of ENC_USER ":" ENC_PASSWD */
#define ENC_BASIC "UXY3a1cvSm00PjpaeDlUcSJwdy9jUmVkNSt2OEhuIHIzfj8="
#define ENC_TOKEN "tK9/Fq2Lw+Wz7Pe=\"Lm8Rb\""

/*
 * Nothing of secret in len bytes of text (where): no run of three letters or
 * digits of it, nor any six of a longer one, which an echo keeps readable
 * whether it percent-encodes or JSON-escapes what is around them.
 */
static void assert_no_trace(const char *text, size_t len, const char *secret, const char *where)
{
	for (const char *s = secret; *s;) {
		size_t n = 0;

		while (isalnum((unsigned char)s[n]))
			n++;
		for (size_t i = 0; n >= 3 && i + (n < 6 ? n : 6) <= n; i++) {
			size_t w = n < 6 ? n : 6;

			cr_assert_null(memmem(text, len, s + i, w), "%s holds %.*s: %.*s", where,
				       (int)w, s + i, (int)len, text);
		}
		s += n ? n : 1;
	}
}

/* Nothing of any secret in heapbpf's output (err) or in a file of dir or the file out. */
static void assert_nowhere(const char *const *secrets, const char *err, const char *dir,
			   const char *out)
{
	char path[PATH_MAX + 256];
	struct dirent *de;
	char *text = NULL;
	ssize_t len;
	DIR *d;

	for (const char *const *sec = secrets; *sec; sec++) {
		assert_no_trace(err, strlen(err), *sec, "the output");
		d = opendir(dir);
		cr_assert_not_null(d);
		while ((de = readdir(d))) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (de->d_type != DT_REG || (len = hb_read_file(path, &text)) < 0)
				continue;
			assert_no_trace(text, (size_t)len, *sec, path);
			free(text);
		}
		closedir(d);
		len = hb_read_file(out, &text);
		cr_assert_geq(len, 0, "%s", out);
		assert_no_trace(text, (size_t)len, *sec, out);
		free(text);
	}
	/* nor an echo that escapes every character (\uXXXX) */
	cr_assert_null(strstr(err, "\\u00"), "%s", err);
}

/*
 * (d) A server that echoes the credentials URL-encoded (upper- and
 * lower-case hex, '+' for a space) or JSON-escaped (\/ \" or every
 * character \uXXXX), the Authorization header and the user:password it
 * decodes to, to push and to /ingest: the reply is withheld, and nothing of
 * a credential is in heapbpf's output or in any file it writes.
 */
Test(pyro_creds, an_encoded_echo_of_the_credential_is_withheld)
{
	static const char *const encodings[] = { "url", "url-lower", "form", "json", "json-u" };
	const char *const basic[] = { ENC_USER, ENC_PASSWD, ENC_BASIC, NULL };
	const char *const token[] = { ENC_TOKEN, NULL };
	const char *out = hb_tmp("profile.pb.gz"), *spool = hb_tmp("spool");
	const char *ingest[] = {
		"--pyroscope-api", "ingest", "--pyroscope-retries", "0", "-o", out, NULL
	};
	const char *push[] = { "--pyroscope-retries", "0", "-o", out, NULL };
	char pid[16], err[65536];
	struct svc a;
	int rc;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	for (size_t e = 0; e < sizeof(encodings) / sizeof(encodings[0]); e++) {
		const char *echo[] = { "--echo-auth", "0", "--echo-as", encodings[e], NULL };

		start_server(echo, NULL);
		for (int k = 0; k < 4; k++) {
			bool use_push = k % 2 == 0, use_token = k >= 2;

			if (use_token) {
				setenv("HEAPBPF_PYROSCOPE_TOKEN", ENC_TOKEN, 1);
			} else {
				setenv("HEAPBPF_PYROSCOPE_USER", ENC_USER, 1);
				setenv("HEAPBPF_PYROSCOPE_PASSWORD", ENC_PASSWD, 1);
			}
			rc = run(pid, spool, use_push ? push : ingest, err, sizeof(err));
			unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
			unsetenv("HEAPBPF_PYROSCOPE_USER");
			unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
			cr_assert_eq(rc, 1, "%s: %s", encodings[e], err);
			cr_assert(strstr(err,
					 use_push ? "HTTP 401 unauthenticated (reply withheld: "
						    "it contained the credential)"
						  : "HTTP 400 (reply withheld: it contained the "
						    "credential)"),
				  "%s: %s", encodings[e], err);
			assert_nowhere(use_token ? token : basic, err, spool, out);
		}
		hb_standin_stop(&server_pid);
	}
	cr_assert_eq(svc_stop(&a), 0);
}

/*
 * heapbpf with a token and --pyroscope url, in a mount and network namespace
 * of its own: hosts (lines of /etc/hosts) and nothing but /etc/hosts to
 * resolve names with, no network to reach. Returns its exit status, the
 * count of profiles it left in its spool in *spool_files.
 */
static int run_isolated(const char *pid, const char *url, const char *hosts, int *spool_files,
			char *err, size_t errlen)
{
	const char *hfile = hb_tmp("hosts"), *nfile = hb_tmp("nsswitch.conf"),
		   *efile = hb_tmp("isolated.err");
	const char *spool = hb_tmp("spool-isolated");
	const char *argv[] = {
		"/usr/bin/unshare",
		"--mount",
		"--net",
		"/bin/sh",
		"-c",
		"mount --bind \"$1\" /etc/hosts && mount --bind \"$2\" /etc/nsswitch.conf && "
		"shift 2 && exec \"$@\"",
		"sh",
		hfile,
		nfile,
		hb_path("heapbpf"),
		"--pid",
		pid,
		"-d",
		"1",
		"--pyroscope",
		url,
		"--spool-dir",
		spool,
		"--pyroscope-retries",
		"0",
		NULL
	};
	char *text = NULL;
	FILE *f;
	int rc;

	mkdir(spool, 0700);
	f = fopen(hfile, "w");
	cr_assert_not_null(f);
	fprintf(f, "127.0.0.1 localhost\n%s", hosts);
	fclose(f);
	f = fopen(nfile, "w");
	cr_assert_not_null(f);
	fputs("hosts: files\n", f);
	fclose(f);
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN, 1);
	rc = hb_wait(hb_spawn(argv, efile), 90000);
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	cr_assert_geq(hb_read_file(efile, &text), 0);
	snprintf(err, errlen, "%s", text);
	free(text);
	*spool_files = spooled(spool);
	return rc;
}

/* Exactly one line, "heapbpf: ...", holding what. */
static void one_sentence(const char *err, const char *what)
{
	cr_assert_eq(strncmp(err, "heapbpf: ", 9), 0, "%s", err);
	cr_assert(strchr(err, '\n') && strchr(err, '\n')[1] == '\0', "not one line: %s", err);
	cr_assert(strstr(err, what), "%s", err);
	cr_assert_null(strstr(err, SECRET_TOKEN), "%s", err);
}

/*
 * (c) A token over plain http to a host that is not only loopback
 * addresses: refused with one sentence before any window is spent, names
 * that merely start like the loopback's included.
 */
Test(pyro_creds, plain_http_off_the_loopback_is_refused_before_profiling)
{
	const char *hosts = "192.0.2.7 localhost.attacker.example\n"
			    "127.0.0.1 127.0.0.1.attacker.example\n"
			    "192.0.2.8 127.0.0.1.attacker.example\n"
			    "127.0.0.1 loopback.heapbpf.test\n"
			    "::1 loopback.heapbpf.test\n";
	char pid[16], err[4096];
	struct svc a;
	int n;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	cr_assert_eq(run_isolated(pid, "http://localhost.attacker.example:4040", hosts, &n, err,
				  sizeof(err)),
		     1, "%s", err);
	one_sentence(err, "localhost.attacker.example resolves to 192.0.2.7, not a loopback");
	cr_assert_eq(n, 0, "a window was spent");
	/* one loopback address among others is not enough */
	cr_assert_eq(run_isolated(pid, "http://127.0.0.1.attacker.example", hosts, &n, err,
				  sizeof(err)),
		     1, "%s", err);
	one_sentence(err, "127.0.0.1.attacker.example resolves to 192.0.2.8, not a loopback");
	cr_assert_eq(n, 0, "a window was spent");
	/* a name that does not resolve */
	cr_assert_eq(run_isolated(pid, "http://nowhere.attacker.example:4040", hosts, &n, err,
				  sizeof(err)),
		     1, "%s", err);
	one_sentence(err, "nowhere.attacker.example does not resolve");
	cr_assert_eq(n, 0, "a window was spent");
	/* a name of loopback addresses only passes (then nothing answers: no network here) */
	cr_assert_eq(run_isolated(pid, "http://loopback.heapbpf.test:1", hosts, &n, err,
				  sizeof(err)),
		     5, "%s", err);
	cr_assert_null(strstr(err, "loopback address"), "%s", err);
	cr_assert_eq(n, 1, "%s", err);
	cr_assert_eq(svc_stop(&a), 0);
}
