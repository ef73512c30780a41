// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "browser.h"
#include "harness.h"

#define CHROMIUM "/usr/bin/chromium"

static const char *const flags[] = {
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--hide-scrollbars",
	"--window-size=1200,800",
};

#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

void hb_chromium(const char *url, const char *action, const char *outpath)
{
	static int runs;
	const char *argv[NFLAGS + 5];
	char profile[PATH_MAX + 32];
	size_t n = 0;
	int rc;

	cr_assert_eq(access(CHROMIUM, X_OK), 0,
		     "these tests need Debian's chromium package: run make deps (as root)");
	/* a fresh profile each time: nothing is shared between runs, nothing fetched */
	snprintf(profile, sizeof(profile), "--user-data-dir=%s/chromium-%d", hb_tmpdir(), ++runs);
	argv[n++] = CHROMIUM;
	for (size_t i = 0; i < NFLAGS; i++)
		argv[n++] = flags[i];
	argv[n++] = profile;
	argv[n++] = action;
	argv[n++] = url;
	argv[n] = NULL;
	rc = hb_wait(hb_spawn(argv, outpath), 90000);
	cr_assert_eq(rc, 0, "chromium %s %s exited with %d", action, url, rc);
}

void hb_screenshot(const char *path, const char *keep)
{
	char png[PATH_MAX], url[PATH_MAX + 16], action[PATH_MAX + 16], log[PATH_MAX], *img;
	char cmd[3 * PATH_MAX];
	static int n;
	ssize_t len;

	snprintf(png, sizeof(png), "%s/screenshot-%d.png", hb_tmpdir(), ++n);
	snprintf(log, sizeof(log), "%s/screenshot-%d.log", hb_tmpdir(), n);
	snprintf(url, sizeof(url), "file://%s", path);
	snprintf(action, sizeof(action), "--screenshot=%s", png);
	hb_chromium(url, action, log);
	len = hb_read_file(png, &img);
	cr_assert_gt(len, 10000, "no screenshot, or an empty one");
	cr_assert_eq(memcmp(img, "\x89PNG\r\n\x1a\n", 8), 0);
	/* IHDR: width and height, big-endian, after the signature and the chunk header */
	cr_assert_eq(((unsigned char)img[18] << 8) | (unsigned char)img[19], 1200);
	cr_assert_eq(((unsigned char)img[22] << 8) | (unsigned char)img[23], 800);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", png, hb_path(keep));
	cr_assert_eq(system(cmd), 0);
	free(img);
}

char *hb_page_dom(const char *path)
{
	char url[PATH_MAX + 16], dom[PATH_MAX], *text = NULL;
	static int n;

	snprintf(url, sizeof(url), "file://%s", path);
	snprintf(dom, sizeof(dom), "%s/dom-of-page-%d.txt", hb_tmpdir(), ++n);
	hb_chromium(url, "--dump-dom", dom);
	cr_assert_gt(hb_read_file(dom, &text), 0, "chromium wrote no DOM of %s", path);
	return text;
}
