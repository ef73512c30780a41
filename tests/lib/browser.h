/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Headless Chromium (Debian's chromium) as the tests drive it, for what a
 * person looks at in a browser: the DOM after the page's own script ran,
 * and a screenshot. Each run gets a fresh profile in the test's directory
 * and fetches nothing.
 */
#ifndef __HEAPBPF_TEST_BROWSER_H
#define __HEAPBPF_TEST_BROWSER_H

/* Chromium on url with action (--dump-dom, --screenshot=PATH); its stdout and stderr into outpath. */
void hb_chromium(const char *url, const char *action, const char *outpath);
/*
 * The page at path (a file) as a 1200x800 PNG, asserted to be one with
 * something in it, kept as BUILD/keep (a picture a person can look at).
 */
void hb_screenshot(const char *path, const char *keep);
/* The page at path's DOM as Chromium serializes it after its scripts ran (malloc'ed). */
char *hb_page_dom(const char *path);

#endif /* __HEAPBPF_TEST_BROWSER_H */
