/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Pyroscope spool: a directory of profiles waiting for delivery, one
 * file each, named STAMP-NANOSECONDS-PID.spool so that names sort by time
 * and concurrent heapbpf runs never collide:
 *
 *   20250102T030405Z-123456789-4242.spool
 *
 * A file is "HBSPOOL1\nname=NAME\nfrom=N\nuntil=N\n\n" then the gzip-compressed
 * pprof body, written atomically. The spool is bounded like snapshots
 * (retain.h, every file its own group), and one heapbpf at a time delivers
 * it (the delivery lock, .deliver.lock in the directory).
 */
#ifndef __HEAPBPF_SPOOL_H
#define __HEAPBPF_SPOOL_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/retain.h"

#define SPOOL_MAX_FILE ((size_t)64 << 20) /* larger spool files are not read */

/* One spooled profile, whichever API sends it (push makes its labels of name=, pyro_push.h). */
struct spool_profile {
	const char *name; /* name=, without CR or LF */
	int64_t from, until;
	const void *body; /* gzip-compressed pprof */
	size_t len;
};

struct spool;

/* dir must exist; keep and max_bytes bound it (0: no limit). */
int spool__new(const char *dir, size_t keep, uint64_t max_bytes, struct spool **out);
/* Releases the delivery lock when held. */
void spool__free(struct spool *sp);
const char *spool__dir(const struct spool *sp);

/* Writes p into a new spool file, atomically; a message naming the file in err. */
int spool__put(struct spool *sp, const struct spool_profile *p, char *err, size_t errlen);

/* Retention: deletes the oldest files beyond keep, then beyond max_bytes (retain_prune). */
int spool__prune(struct spool *sp, struct retain_result *r, char *err, size_t errlen);

/*
 * The delivery lock. wait false: -EWOULDBLOCK at once when another heapbpf
 * holds it. Other errors with a message in err.
 */
int spool__lock(struct spool *sp, bool wait, char *err, size_t errlen);
/* Makes the removals since spool__lock() durable, then releases the lock. */
void spool__unlock(struct spool *sp);

/* The spool's files, oldest first: their number, or a negative errno. */
int spool__list(const struct spool *sp, struct dirent ***files);
void spool_list_free(struct dirent **files, int n);

/*
 * Reads the spool file named file: 0, -ENOENT when it is gone (pruned
 * meanwhile), -EBADMSG when it is not a spool file, -EPERM when heapbpf
 * did not write it (another owner, a mode other than 0600, a link: left in
 * place, never pushed), or another negative errno (-OUTPUT_E* when the
 * spool directory fails output_dir_check()). p points into *data, which the caller frees (also on error).
 */
int spool__read(const struct spool *sp, const char *file, struct spool_profile *p, char **data);

/* Deletes a delivered (or undeliverable) file. */
void spool__remove(struct spool *sp, const char *file);

#endif /* __HEAPBPF_SPOOL_H */
