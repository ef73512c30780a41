// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A server's reply that echoes a credential, in whatever encoding: found
 * (pyro_auth__holds), so that pyroscope.c withholds the reply.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/pyro_auth.h"

#define USER   "u.ser/12345"
#define PASSWD "p@ss w/rd\"x+y&z"
/* base64 of USER ":" PASSWD */
#define BASIC "dS5zZXIvMTIzNDU6cEBzcyB3L3JkIngreSZ6"
#define TOKEN "tok/en+s3cret=\"v\""

static void unset_all(void)
{
	unsetenv("HEAPBPF_PYROSCOPE_USER");
	unsetenv("HEAPBPF_PYROSCOPE_PASSWORD");
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	unsetenv("HEAPBPF_PYROSCOPE_TENANT");
}

TestSuite(pyro_redact, .fini = unset_all);

static struct pyro_auth *basic_auth(void)
{
	struct pyro_auth *a = NULL;
	char err[512];

	setenv("HEAPBPF_PYROSCOPE_USER", USER, 1);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", PASSWD, 1);
	cr_assert_eq(pyro_auth__new("https://p.example/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	return a;
}

static struct pyro_auth *token_auth(const char *token)
{
	struct pyro_auth *a = NULL;
	char err[512];

	setenv("HEAPBPF_PYROSCOPE_TOKEN", token, 1);
	cr_assert_eq(pyro_auth__new("https://p.example/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	return a;
}

/* Percent-encoding: every byte (all) or only those outside [A-Za-z0-9-._~]; ' ' as '+'. */
static void pct(const char *s, bool upper, bool all, bool plus, char *out)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (plus && c == ' ')
			*out++ = '+';
		else if (!all && (strchr("-._~", c) || (c < 0x80 && isalnum(c))))
			*out++ = (char)c;
		else
			out += sprintf(out, upper ? "%%%02X" : "%%%02x", c);
	}
	*out = '\0';
}

/* The character s starts (UTF-8) into *cp; its length in bytes. */
static int next_char(const char *s, unsigned int *cp)
{
	const unsigned char *u = (const unsigned char *)s;

	if (u[0] < 0x80) {
		*cp = u[0];
		return 1;
	}
	if (u[0] < 0xe0) {
		*cp = (u[0] & 0x1fu) << 6 | (u[1] & 0x3fu);
		return 2;
	}
	if (u[0] < 0xf0) {
		*cp = (u[0] & 0x0fu) << 12 | (u[1] & 0x3fu) << 6 | (u[2] & 0x3fu);
		return 3;
	}
	*cp = (u[0] & 0x07u) << 18 | (u[1] & 0x3fu) << 12 | (u[2] & 0x3fu) << 6 | (u[3] & 0x3fu);
	return 4;
}

/* JSON: "\uXXXX" for every character (all) or JSON's own escapes where it needs one. */
static void json(const char *s, bool upper, bool all, char *out)
{
	const char *f = upper ? "\\u%04X" : "\\u%04x";
	unsigned int cp;

	while (*s) {
		int n = next_char(s, &cp);

		if (all && cp >= 0x10000) {
			out += sprintf(out, f, 0xd800 + ((cp - 0x10000) >> 10));
			out += sprintf(out, f, 0xdc00 + ((cp - 0x10000) & 0x3ff));
		} else if (all) {
			out += sprintf(out, f, cp);
		} else if (cp == '"' || cp == '\\' || cp == '/') {
			out += sprintf(out, "\\%c", (char)cp);
		} else {
			memcpy(out, s, n);
			out += n;
		}
		s += n;
	}
	*out = '\0';
}

/* HTML: every character a numeric reference, decimal or hexadecimal. */
static void html(const char *s, bool hex, char *out)
{
	unsigned int cp;

	while (*s) {
		s += next_char(s, &cp);
		out += sprintf(out, hex ? "&#x%X;" : "&#%u;", cp);
	}
	*out = '\0';
}

/* secret, in its encoded form enc, inside a reply: found. */
static void found(const struct pyro_auth *a, const char *enc, const char *what)
{
	char reply[8192];

	snprintf(reply, sizeof(reply), "{\"code\":\"unauthenticated\",\"message\":\"bad %s\"}",
		 enc);
	cr_assert(pyro_auth__holds(a, reply, strlen(reply), 1), "%s not found: %s", what, reply);
	cr_assert(pyro_auth__holds(a, enc, strlen(enc), 3), "%s not found: %s", what, enc);
}

/* Every encoding of s that a server may echo it in. */
static void every_encoding(const struct pyro_auth *a, const char *s)
{
	char e[4096], e2[8192];

	found(a, s, "raw");
	pct(s, true, true, false, e);
	found(a, e, "percent, upper case, every byte");
	pct(s, false, true, false, e);
	found(a, e, "percent, lower case, every byte");
	pct(s, true, false, true, e);
	found(a, e, "form-encoded, upper case");
	pct(s, false, false, true, e);
	found(a, e, "form-encoded, lower case");
	json(s, false, false, e);
	found(a, e, "JSON's own escapes (\\/ \\\")");
	json(s, false, true, e);
	found(a, e, "JSON \\u, lower case");
	json(s, true, true, e);
	found(a, e, "JSON \\u, upper case");
	html(s, false, e);
	found(a, e, "HTML decimal");
	html(s, true, e);
	found(a, e, "HTML hexadecimal");
	/* nested: URL-encoded twice, JSON inside URL, URL inside JSON */
	pct(s, true, false, false, e);
	pct(e, false, false, false, e2);
	found(a, e2, "percent-encoded twice");
	json(s, false, true, e);
	pct(e, true, true, false, e2);
	found(a, e2, "JSON \\u, then percent-encoded");
	pct(s, true, true, false, e);
	json(e, true, true, e2);
	found(a, e2, "percent-encoded, then JSON \\u");
	/* a header's value upper-cased */
	snprintf(e, sizeof(e), "%s", s);
	for (char *c = e; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	found(a, e, "upper case");
}

Test(pyro_redact, unescape_decodes_each_form)
{
	char out[256];
	size_t n;

	n = pyro_auth_unescape("a%2fb%2Fc+d", 11, out);
	cr_assert_eq(n, 7);
	cr_assert_eq(memcmp(out, "a/b/c d", 7), 0);
	n = pyro_auth_unescape("\\/\\\"\\\\\\u002f\\u002F\\x2f\\n", 24, out);
	cr_assert_eq(n, 7, "%zu", n);
	cr_assert_eq(memcmp(out, "/\"\\///\n", 7), 0);
	/* a surrogate pair is one character, as UTF-8; \u00e9 as UTF-8 too */
	n = pyro_auth_unescape("\\ud83d\\ude00\\u00e9", 18, out);
	cr_assert_eq(n, 6);
	cr_assert_eq(memcmp(out, "\xf0\x9f\x98\x80\xc3\xa9", 6), 0);
	n = pyro_auth_unescape("&#47;&#x2F;&quot;&amp;&lt;", 26, out);
	cr_assert_eq(n, 5);
	cr_assert_eq(memcmp(out, "//\"&<", 5), 0);
	/* what is not a whole escape stays */
	n = pyro_auth_unescape("%2 %zz \\u00 &#47 &x; \\q", 23, out);
	cr_assert_eq(n, 23);
	cr_assert_eq(memcmp(out, "%2 %zz \\u00 &#47 &x; \\q", 23), 0);
	/* one round only: nested escapes come out one level less */
	n = pyro_auth_unescape("%252F", 5, out);
	cr_assert_eq(n, 3);
	cr_assert_eq(memcmp(out, "%2F", 3), 0);
}

Test(pyro_redact, each_encoding_of_a_basic_credential_is_found)
{
	struct pyro_auth *a = basic_auth();
	char e[512];

	every_encoding(a, PASSWD);
	every_encoding(a, USER);
	every_encoding(a, BASIC);
	/* the Authorization header's value, as a form or a URL would carry it */
	pct("Basic " BASIC, true, false, true, e);
	found(a, e, "the header, form-encoded");
	pyro_auth__free(a);
}

Test(pyro_redact, each_encoding_of_a_token_is_found)
{
	struct pyro_auth *a = token_auth(TOKEN);

	every_encoding(a, TOKEN);
	pyro_auth__free(a);
	/* a token outside ASCII: its UTF-8 bytes however a server escapes them */
	a = token_auth("t\xc3\xb6ken-\xe2\x82\xac-\xf0\x9f\x94\x91-42");
	every_encoding(a, "t\xc3\xb6ken-\xe2\x82\xac-\xf0\x9f\x94\x91-42");
	found(a, "t\\u00f6ken-\\u20ac-\\ud83d\\udd11-42", "JSON \\u of its characters");
	found(a, "t&#246;ken-&#x20AC;-&#128273;-42", "HTML of its characters");
	pyro_auth__free(a);
}

/* A secret that holds escapes itself: decoded alike on both sides. */
Test(pyro_redact, a_secret_with_escapes_of_its_own_is_found)
{
	const char *tok = "ab%41cd\\u0042+e&amp;f";
	struct pyro_auth *a = token_auth(tok);

	every_encoding(a, tok);
	/* only its '+' escaped, its '%' left alone (a lax encoder) */
	found(a, "ab%41cd\\u0042%2Be&amp;f", "partly encoded");
	pyro_auth__free(a);
}

Test(pyro_redact, a_reply_without_the_credential_is_not_withheld)
{
	const char *replies[] = {
		"{\"code\":\"unauthenticated\",\"message\":\"invalid token\"}",
		"401 Unauthorized: user u.ser/1234 is not known",
		"p@ss w/r \"x+y&z u.ser%2F1234",
		"%25%25%2541 &amp;amp; \\\\\\\\",
		"",
	};
	struct pyro_auth *a = basic_auth();

	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++)
		cr_assert_not(pyro_auth__holds(a, replies[i], strlen(replies[i]), 1), "%s",
			      replies[i]);
	/* bytes of any value, NUL included: the whole length is read */
	cr_assert(pyro_auth__holds(a, "x\0" PASSWD, 2 + strlen(PASSWD), 1));
	cr_assert_not(pyro_auth__holds(a, "x\0" PASSWD, 2, 1));
	pyro_auth__free(a);
}

Test(pyro_redact, short_secrets_and_deep_nesting)
{
	struct pyro_auth *a = NULL;
	char err[512], deep[64] = "%";

	setenv("HEAPBPF_PYROSCOPE_TOKEN", "tok-s3cret", 1);
	setenv("HEAPBPF_PYROSCOPE_TENANT", "ab", 1);
	cr_assert_eq(pyro_auth__new("https://p.example/ingest", NULL, &a, err, sizeof(err)), 0,
		     "%s", err);
	/* a reply is checked for every secret however short; heapbpf's messages from 3 */
	cr_assert(pyro_auth__holds(a, "tenant %61b", 11, 1));
	cr_assert_not(pyro_auth__holds(a, "tenant %61b", 11, 3));
	/* still decoding after PYRO_UNESCAPE_ROUNDS rounds: counted as holding one */
	for (int i = 0; i < PYRO_UNESCAPE_ROUNDS + 1; i++)
		strcat(deep, "25");
	strcat(deep, "41");
	cr_assert(pyro_auth__holds(a, deep, strlen(deep), 3), "%s", deep);
	/* three levels are decoded and looked through */
	cr_assert_not(pyro_auth__holds(a, "%252541", 7, 3));
	cr_assert(pyro_auth__holds(a, "%25252574ok-s3cret", 18, 3));
	pyro_auth__free(a);
}
