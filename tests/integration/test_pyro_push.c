// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Pyroscope's push API end to end, against local stand-ins - not Pyroscope:
 * tests/pyroscope/pyroscope_push_server.py (Connect's unary rules, Pyroscope's
 * label rules, the body decoded with heapbpf's own proto/ and the pprof
 * inside checked; /ingest as well) and, for the fallback,
 * tests/pyroscope/pyroscope_rules_server.py (/ingest only: 404 to push).
 */
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "standin.h"
#include "profile/pprof.h"
#include "export/pyro_push.h"

#define PUSH_SERVER   "tests/pyroscope/pyroscope_push_server.py"
#define INGEST_SERVER "tests/pyroscope/pyroscope_rules_server.py"
#define SECRET_TOKEN  "tok-push-4d1e9a"
#define SECRET_PASSWD "pw-push-b0a710ad"

static pid_t server_pid;
static int server_port;
static const char *server_scheme = "http";

static void push_fini(void)
{
	hb_standin_kill(&server_pid);
	hb_tmpdir_cleanup();
}

TestSuite(pyro_push, .fini = push_fini, .timeout = 180);

/* How often needle occurs in the file (0 when it does not exist). */
static int occurrences(const char *path, const char *needle)
{
	char *text = NULL, *at;
	int n = 0;

	if (hb_read_file(path, &text) < 0)
		return 0;
	for (at = text; (at = strstr(at, needle)); at += strlen(needle))
		n++;
	free(text);
	return n;
}

/* Starts a stand-in (script) on port (0: any) with extra arguments and env expectations. */
static void start_server(const char *script, int port, const char *const *extra,
			 const char *const *env)
{
	const char *cmd[] = { "/usr/bin/python3", script, NULL };

	server_pid = hb_standin_start(cmd, port, extra, env, &server_port);
}

static void stop_server(void)
{
	hb_standin_stop(&server_pid);
}

/* Accepted profiles so far: lines of the stand-in's log. */
static int accepted(char lines[][8192], int max)
{
	return hb_standin_log(&lines[0][0], 8192, max);
}

/* heapbpf for a second with --pyroscope to the stand-in, plus up to two options. */
static void run_heapbpf(const char *pid, const char *spool, const char *extra1, const char *extra2,
			int want, char *err, size_t errlen)
{
	hb_standin_deliver(server_scheme, server_port, pid, spool, extra1, extra2, want, err,
			   errlen);
}

Test(pyro_push, memory_profile_with_its_labels_tenant_and_basic_auth)
{
	const char *expect[] = { "PYRO_EXPECT_TENANT=team-a", "PYRO_EXPECT_USER=12345",
				 "PYRO_EXPECT_PASSWORD=" SECRET_PASSWD, NULL };
	char pid[16], err[65536], lines[4][8192], want[64];
	const char *spool = hb_tmp("spool"), *id;
	struct svc a;

	hb_require_bpf();
	start_server(PUSH_SERVER, 0, NULL, expect);
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	setenv("HEAPBPF_PYROSCOPE_TENANT", "team-a", 1);
	setenv("HEAPBPF_PYROSCOPE_USER", "12345", 1);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", SECRET_PASSWD, 1);
	run_heapbpf(pid, spool, "--label", "env=test", 0, err, sizeof(err));
	unsetenv("HEAPBPF_PYROSCOPE_TENANT");
	unsetenv("HEAPBPF_PYROSCOPE_USER");
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
	cr_assert_eq(accepted(lines, 4), 1, "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	/* Connect: proto body, protocol version 1, the timeout as Connect-Timeout-Ms */
	cr_assert(strstr(lines[0], "\"api\": \"push\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"content_type\": \"application/proto\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"connect_protocol_version\": \"1\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"connect_timeout_ms\": \"5000\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"tenant\": \"team-a\""), "%s", lines[0]);
	/* the labels: memory, not to be differenced again, the service and the defaults, sorted */
	cr_assert(strstr(lines[0], "\"__name__\": \"memory\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"__delta__\": \"false\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"service_name\": \"alloc-service-s\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"comm\": \"alloc-service-s\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"hostname\": "), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"env\": \"test\""), "%s", lines[0]);
	snprintf(want, sizeof(want), "\"pid\": \"%s\"", pid);
	cr_assert(strstr(lines[0], want), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"sorted\": true"), "%s", lines[0]);
	/* one sample: a UUID, the gzip pprof with the memory sample types and the sites */
	id = strstr(lines[0], "\"id\": \"");
	cr_assert_not_null(id);
	cr_assert_eq(strcspn(id + 7, "\""), 36, "%s", id);
	cr_assert(strstr(lines[0], "\"gzip\": true"), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"sample_types\": [\"alloc_objects/count\", "
				   "\"alloc_space/bytes\", \"inuse_objects/count\", "
				   "\"inuse_space/bytes\"]"),
		  "%s", lines[0]);
	cr_assert(strstr(lines[0], "large_buffers"), "%s", lines[0]);
	cr_assert_null(strstr(lines[0], "\"alloc_space\": 0,"), "%s", lines[0]);
	/* nothing refused on the way, no secret in the messages */
	cr_assert_eq(access(hb_tmp("server.log.rejects"), F_OK), -1);
	cr_assert_null(strstr(err, SECRET_PASSWD), "%s", err);
	cr_assert_eq(svc_stop(&a), 0);
}

Test(pyro_push, unavailable_and_resource_exhausted_retried_invalid_argument_refused)
{
	const char *unavailable[] = { "--fail-first=1", "--fail-code=unavailable", NULL };
	const char *exhausted[] = { "--fail-first=1", "--fail-code=resource_exhausted",
				    "--retry-after=1", NULL };
	const char *invalid[] = { "--fail-all", "--fail-code=invalid_argument", NULL };
	char pid[16], err[65536], lines[8][8192];
	const char *spool = hb_tmp("spool");
	struct svc a;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	/* 503 unavailable: retried, delivered */
	start_server(PUSH_SERVER, 0, unavailable, NULL);
	run_heapbpf(pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert(strstr(err, "HTTP 503 unavailable"), "%s", err);
	cr_assert(strstr(err, "will retry"), "%s", err);
	cr_assert_eq(accepted(lines, 8), 1, "%s", err);
	stop_server();
	/* 429 resource_exhausted: retried after the server's Retry-After, delivered */
	start_server(PUSH_SERVER, 0, exhausted, NULL);
	run_heapbpf(pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert(strstr(err, "HTTP 429 resource_exhausted"), "%s", err);
	cr_assert(strstr(err, "will retry"), "%s", err);
	cr_assert_eq(accepted(lines, 8), 2, "%s", err);
	stop_server();
	/* 400 invalid_argument: never retried, the profile leaves the spool, exit 1 */
	start_server(PUSH_SERVER, 0, invalid, NULL);
	run_heapbpf(pid, spool, NULL, NULL, 1, err, sizeof(err));
	cr_assert(strstr(err, "HTTP 400 invalid_argument"), "%s", err);
	cr_assert(strstr(err, "refused"), "%s", err);
	cr_assert_null(strstr(err, "will retry"), "%s", err);
	cr_assert_eq(occurrences(hb_tmp("server.log.rejects"), "\"invalid_argument\""), 1);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(accepted(lines, 8), 2);
	cr_assert_eq(svc_stop(&a), 0);
}

/* A spooled profile remembers no API: what one spooled, the other delivers. */
Test(pyro_push, spool_through_an_outage_delivered_by_either_api)
{
	char pid[16], err[65536], lines[8][8192];
	const char *spool = hb_tmp("spool");
	struct svc a;
	int port;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	/* a port nothing listens on */
	start_server(PUSH_SERVER, 0, NULL, NULL);
	port = server_port;
	stop_server();
	run_heapbpf(pid, spool, NULL, NULL, 5, err, sizeof(err));
	run_heapbpf(pid, spool, "--pyroscope-api", "ingest", 5, err, sizeof(err));
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 2);
	/* back: push delivers both and its own, oldest first */
	start_server(PUSH_SERVER, port, NULL, NULL);
	run_heapbpf(pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert_eq(accepted(lines, 8), 3, "%s", err);
	for (int i = 0; i < 3; i++)
		cr_assert(strstr(lines[i], "\"api\": \"push\""), "%s", lines[i]);
	cr_assert_lt(atoll(strstr(lines[0], "\"time_nanos\": ") + 14),
		     atoll(strstr(lines[2], "\"time_nanos\": ") + 14));
	stop_server();
	/* and a profile spooled by push goes to /ingest as well */
	run_heapbpf(pid, spool, NULL, NULL, 5, err, sizeof(err));
	start_server(PUSH_SERVER, port, NULL, NULL);
	run_heapbpf(pid, spool, "--pyroscope-api", "ingest", 0, err, sizeof(err));
	cr_assert_eq(accepted(lines, 8), 5, "%s", err);
	cr_assert(strstr(lines[3], "\"api\": \"ingest\""), "%s", lines[3]);
	cr_assert(strstr(lines[4], "\"api\": \"ingest\""), "%s", lines[4]);
	cr_assert(strstr(lines[3], "\"format\": \"pprof\""), "%s", lines[3]);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}

/* A server without push (404): /ingest for the rest of the run, said once, asked once. */
Test(pyro_push, not_found_falls_back_to_ingest_once_per_run)
{
	char pid[16], err[65536], lines[8][8192];
	const char *spool = hb_tmp("spool");
	struct svc a;
	int port;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	start_server(INGEST_SERVER, 0, NULL, NULL);
	port = server_port;
	stop_server();
	run_heapbpf(pid, spool, NULL, NULL, 5, err, sizeof(err));
	run_heapbpf(pid, spool, NULL, NULL, 5, err, sizeof(err));
	start_server(INGEST_SERVER, port, NULL, NULL);
	run_heapbpf(pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert_eq(accepted(lines, 8), 3, "%s", err);
	for (int i = 0; i < 3; i++)
		cr_assert(strstr(lines[i], "\"format\": \"pprof\""), "%s", lines[i]);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	{
		char *at = strstr(err, "no push API there");

		cr_assert_not_null(at, "%s", err);
		cr_assert_null(strstr(at + 1, "no push API there"), "said twice: %s", err);
	}
	cr_assert(strstr(err, "HTTP 404"), "%s", err);
	cr_assert_eq(occurrences(hb_tmp("server.log.rejects"), PYRO_PUSH_PATH), 1);
	cr_assert_eq(svc_stop(&a), 0);
}

Test(pyro_push, refused_credentials_keep_the_profile_without_secrets)
{
	const char *expect[] = { "PYRO_EXPECT_TOKEN=" SECRET_TOKEN, NULL };
	char pid[16], err[65536], lines[4][8192];
	const char *spool = hb_tmp("spool");
	struct svc a;

	hb_require_bpf();
	start_server(PUSH_SERVER, 0, NULL, expect);
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN "-wrong", 1);
	run_heapbpf(pid, spool, NULL, NULL, 1, err, sizeof(err));
	cr_assert(strstr(err, "HTTP 401 unauthenticated"), "%s", err);
	cr_assert(strstr(err, "HEAPBPF_PYROSCOPE_TOKEN"), "%s", err);
	cr_assert_null(strstr(err, SECRET_TOKEN), "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 1);
	cr_assert_eq(accepted(lines, 4), 0);
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN, 1);
	run_heapbpf(pid, spool, NULL, NULL, 0, err, sizeof(err));
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	cr_assert_eq(accepted(lines, 4), 2, "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}

/* TLS through libcurl with the certificate checked, as for /ingest: an unknown CA refused. */
Test(pyro_push, tls_verifies_the_certificate)
{
	char pid[16], err[65536], lines[4][8192], cmd[4 * PATH_MAX], ca[PATH_MAX + 32];
	const char *cert = hb_tmp("cert.pem"), *key = hb_tmp("key.pem"), *spool = hb_tmp("spool");
	const char *tls[] = { "--tls-cert", cert, "--tls-key", key, NULL };
	struct svc a;

	hb_require_bpf();
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
		 "-addext subjectAltName=IP:127.0.0.1 -keyout '%s' -out '%s' 2>/dev/null",
		 key, cert);
	cr_assert_eq(system(cmd), 0, "openssl could not make a certificate");
	start_server(PUSH_SERVER, 0, tls, NULL);
	server_scheme = "https";
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	run_heapbpf(pid, spool, NULL, NULL, 5, err, sizeof(err));
	cr_assert(strstr(err, "certificate") || strstr(err, "SSL"), "%s", err);
	cr_assert_eq(accepted(lines, 4), 0);
	snprintf(ca, sizeof(ca), "--pyroscope-ca=%s", cert);
	run_heapbpf(pid, spool, ca, NULL, 0, err, sizeof(err));
	server_scheme = "http";
	cr_assert_eq(accepted(lines, 4), 2, "%s", err);
	cr_assert(strstr(lines[0], "\"api\": \"push\""), "%s", lines[0]);
	cr_assert(strstr(lines[1], "\"api\": \"push\""), "%s", lines[1]);
	cr_assert_eq(svc_stop(&a), 0);
}

/*
 * --interval through push: every window is accepted (the first one too, which
 * a server computing deltas would drop) and carries the window's own
 * allocations, nothing once the service stops allocating.
 */
Test(pyro_push, interval_windows_are_deltas_every_one_accepted)
{
	char pid[16], lines[8][8192];
	const char *spool = hb_tmp("spool");
	struct svc a;
	int n;

	hb_require_bpf();
	start_server(PUSH_SERVER, 0, NULL, NULL);
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	hb_standin_paused_windows(&a, pid, server_port, spool);
	n = accepted(lines, 8);
	cr_assert_eq(n, 3, "%d profiles", n);
	for (int i = 0; i < n; i++) {
		cr_assert(strstr(lines[i], "\"api\": \"push\""), "%s", lines[i]);
		cr_assert(strstr(lines[i], "\"__delta__\": \"false\""), "%s", lines[i]);
	}
	cr_assert_gt(atol(strstr(lines[0], "\"alloc_objects\": ") + 17), 0, "%s", lines[0]);
	cr_assert(strstr(lines[2], "\"alloc_objects\": 0,"), "%s", lines[2]);
	cr_assert_null(strstr(lines[2], "\"inuse_space\": 0}"), "%s", lines[2]);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}

Test(pyro_push, api_option_is_checked)
{
	char err[4096];
	const char *bad[] = { "--pid",		 "1",	 "--pyroscope", "http://127.0.0.1:1",
			      "--pyroscope-api", "grpc", NULL };
	const char *alone[] = { "--pid", "1", "--pyroscope-api", "push", NULL };

	cr_assert_eq(hb_run(bad, err, sizeof(err), 30000), 2, "%s", err);
	cr_assert(strstr(err, "unknown --pyroscope-api \"grpc\"; use push or ingest"), "%s", err);
	cr_assert_eq(hb_run(alone, err, sizeof(err), 30000), 2, "%s", err);
	cr_assert(strstr(err, "apply to --pyroscope"), "%s", err);
}

/* ---- the stand-in's own rules, with requests made here (no BPF needed) ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void base64(const uint8_t *in, size_t len, FILE *f)
{
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < len ? in[i + 2] : 0);

		fputc(b64[v >> 18 & 63], f);
		fputc(b64[v >> 12 & 63], f);
		fputc(i + 1 < len ? b64[v >> 6 & 63] : '=', f);
		fputc(i + 2 < len ? b64[v & 63] : '=', f);
	}
}

/* A small valid pprof of now, gzip-compressed. */
static void make_profile(uint8_t **buf, size_t *len)
{
	struct hb_profile p = { .period = 524288 };

	p.time_nanos = (int64_t)time(NULL) * 1000000000LL;
	cr_assert_eq(pprof_encode(&p, buf, len), 0);
}

/* Writes the body of a PushRequest with these labels: proto, or the same as Connect's JSON. */
static const char *write_body(const char *name, const struct pyro_label *l, size_t n, bool json)
{
	const char *path = hb_tmp(name);
	uint8_t *prof, *req;
	size_t plen, rlen;
	FILE *f = fopen(path, "we");

	cr_assert_not_null(f);
	make_profile(&prof, &plen);
	if (!json) {
		cr_assert_eq(pyro_push_encode(l, n, prof, plen, "id-1", &req, &rlen), 0);
		fwrite(req, 1, rlen, f);
		free(req);
	} else {
		fputs("{\"series\": [{\"labels\": [", f);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s{\"name\": \"%s\", \"value\": \"%s\"}", i ? ", " : "",
				l[i].key, l[i].value);
		fputs("], \"samples\": [{\"rawProfile\": \"", f);
		base64(prof, plen, f);
		fputs("\", \"ID\": \"id-2\"}]}]}", f);
	}
	free(prof);
	cr_assert_eq(fclose(f), 0);
	return path;
}

/* POSTs (or with method "GET", gets) file to the push path; the HTTP status, the answer in out. */
static int post(const char *method, const char *ctype, const char *header, const char *file,
		char *out, size_t outlen)
{
	char cmd[4 * PATH_MAX], *text = NULL;
	const char *answer = hb_tmp("answer");
	int status = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "curl -s -X %s -o '%s' -w '%%{http_code}' -H 'Content-Type: %s' %s%s%s "
		 "--data-binary @'%s' http://127.0.0.1:%d" PYRO_PUSH_PATH,
		 method, answer, ctype, header ? "-H '" : "", header ? header : "",
		 header ? "'" : "", file, server_port);
	p = popen(cmd, "re");
	cr_assert_not_null(p);
	cr_assert_eq(fscanf(p, "%d", &status), 1);
	pclose(p);
	out[0] = '\0';
	if (hb_read_file(answer, &text) >= 0) {
		snprintf(out, outlen, "%s", text);
		free(text);
	}
	unlink(answer);
	return status;
}

Test(pyro_push, stand_in_enforces_connect_and_pyroscope_rules)
{
	const struct pyro_label good[] = { { "__delta__", "false" },
					   { "__name__", "memory" },
					   { "service_name", "svc" } };
	const struct pyro_label no_delta[] = { { "__name__", "memory" },
					       { "service_name", "svc" } };
	const struct pyro_label cpu[] = { { "__name__", "process_cpu" },
					  { "service_name", "svc" } };
	const struct pyro_label no_service[] = { { "__delta__", "false" },
						 { "__name__", "memory" } };
	const struct pyro_label bad_name[] = { { "__delta__", "false" },
					       { "__name__", "memory" },
					       { "a-b", "x" },
					       { "service_name", "svc" } };
	const struct pyro_label twice[] = { { "__delta__", "false" },
					    { "__name__", "memory" },
					    { "env", "a" },
					    { "service_name", "svc" },
					    { "env", "b" } };
	const struct pyro_label unsorted[] = { { "service_name", "svc" },
					       { "__name__", "memory" },
					       { "__delta__", "false" } };
	const struct pyro_label bad_metric[] = { { "__delta__", "false" },
						 { "__name__", "mem-ory" },
						 { "service_name", "svc" } };
	char out[4096], lines[8][8192];
	const char *garbage = hb_tmp("garbage");
	FILE *f;

	start_server(PUSH_SERVER, 0, NULL, NULL);
	/* both of Connect's content types; a success is an empty PushResponse in the same one */
	cr_assert_eq(post("POST", "application/proto", "Connect-Protocol-Version: 1",
			  write_body("good.bin", good, 3, false), out, sizeof(out)),
		     200, "%s", out);
	cr_assert_str_eq(out, "");
	cr_assert_eq(post("POST", "application/json", NULL, write_body("good.json", good, 3, true),
			  out, sizeof(out)),
		     200, "%s", out);
	cr_assert_str_eq(out, "{}");
	/* Pyroscope sorts the labels itself: unsorted is accepted, and recorded as such */
	cr_assert_eq(post("POST", "application/proto", NULL,
			  write_body("unsorted.bin", unsorted, 3, false), out, sizeof(out)),
		     200, "%s", out);
	/* a profile other than memory needs no __delta__ */
	cr_assert_eq(post("POST", "application/proto", NULL, write_body("cpu.bin", cpu, 2, false),
			  out, sizeof(out)),
		     200, "%s", out);
	cr_assert_eq(accepted(lines, 8), 4);
	cr_assert(strstr(lines[0], "\"sorted\": true"), "%s", lines[0]);
	cr_assert(strstr(lines[1], "\"content_type\": \"application/json\""), "%s", lines[1]);
	cr_assert(strstr(lines[1], "\"id\": \"id-2\""), "%s", lines[1]);
	cr_assert(strstr(lines[2], "\"sorted\": false"), "%s", lines[2]);
	/* Connect errors: JSON {code, message} with the code's HTTP status */
	cr_assert_eq(post("POST", "application/proto", NULL,
			  write_body("nodelta.bin", no_delta, 2, false), out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "\"code\": \"invalid_argument\""), "%s", out);
	cr_assert(strstr(out, "__delta__=false"), "%s", out);
	cr_assert_eq(post("POST", "application/json", NULL,
			  write_body("nodelta.json", no_delta, 2, true), out, sizeof(out)),
		     400, "%s", out);
	cr_assert_eq(post("POST", "application/proto", NULL,
			  write_body("noservice.bin", no_service, 2, false), out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "service name is not provided"), "%s", out);
	cr_assert_eq(post("POST", "application/proto", NULL,
			  write_body("badname.bin", bad_name, 4, false), out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "invalid label name 'a-b'"), "%s", out);
	cr_assert_eq(post("POST", "application/proto", NULL,
			  write_body("twice.bin", twice, 5, false), out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "duplicate label name: 'env'"), "%s", out);
	cr_assert_eq(post("POST", "application/proto", NULL,
			  write_body("metric.bin", bad_metric, 3, false), out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "invalid metric name"), "%s", out);
	/* the body must decode with push.proto */
	f = fopen(garbage, "we");
	fputs("\x0a\xff\xff\xff", f);
	fclose(f);
	cr_assert_eq(post("POST", "application/proto", NULL, garbage, out, sizeof(out)), 400);
	cr_assert(strstr(out, "cannot decode PushRequest"), "%s", out);
	/* HTTP-level refusals: content type, method, protocol version */
	cr_assert_eq(post("POST", "text/plain", NULL, garbage, out, sizeof(out)), 415);
	cr_assert_eq(post("GET", "application/proto", NULL, garbage, out, sizeof(out)), 405);
	cr_assert_eq(post("POST", "application/proto", "Connect-Protocol-Version: 2",
			  write_body("v2.bin", good, 3, false), out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "connect-protocol-version"), "%s", out);
	cr_assert_eq(accepted(lines, 8), 4);
}
