/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Atomic output files: a profile is either fully written or not there, so a
 * collector that scrapes the output directory never reads half a profile.
 */
#ifndef __HEAPBPF_OUTPUT_H
#define __HEAPBPF_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * The mode of the files heapbpf writes (profiles, snapshots, recordings):
 * they hold the target's function names and addresses, so by default only
 * their owner reads them. Set exactly, whatever the umask.
 */
#define OUTPUT_DEFAULT_MODE 0600
/* --file-mode: the mode of every later output file (output_write_atomic, recordings). */
void output_set_file_mode(mode_t mode);
mode_t output_file_mode(void);

/*
 * Refusals of a path heapbpf will not write (negated, like errnos; beyond
 * the kernel's range). output_strerror() says why in words.
 */
#define OUTPUT_ESYMLINK 5001 /* the last component is a symbolic link */
#define OUTPUT_ESPECIAL 5002 /* it exists and is a device, a pipe or a socket */
#define OUTPUT_ESHARED	5003 /* its directory is writable by others, not sticky */
#define OUTPUT_EOWNER	5004 /* a private directory of another user's */
#define OUTPUT_ENOTDIR	5005 /* the directory part is not a directory */
#define OUTPUT_EPATH	5006 /* a directory on the way to it is another user's, or shared */
#define OUTPUT_ELINKIN	5007 /* a link on the way, made by another user in a shared directory */

/* What a negative errno or OUTPUT_E* code means, for "cannot write X: %s". */
const char *output_strerror(int rc);

/* --allow-shared-dir: write into directories other users can write after all. */
void output_allow_shared_dir(bool allow);
/* The user heapbpf acts for: SUDO_UID when root by sudo, else the real uid. */
uid_t output_invoking_uid(void);
/*
 * Whose directories, files and links heapbpf trusts: root, heapbpf's own
 * user and output_invoking_uid() (the rule output_dir_check() applies).
 */
bool output_trusted_uid(uid_t uid);

enum output_dir_kind {
	/*
	 * Profiles, snapshots, recordings: owned by root or the invoking user
	 * (a directory's owner can always write into it), and one others can
	 * write must have the sticky bit (as /tmp has), or they could swap
	 * the files.
	 */
	OUTPUT_DIR_FILES,
	/*
	 * heapbpf's own directories: the Pyroscope spool, whose every file is
	 * pushed with the operator's credentials, and the state directory of
	 * locks and flags to restore. Owned by root or the invoking user, and
	 * writable by nobody else, sticky or not.
	 */
	OUTPUT_DIR_PRIVATE,
};
/* 0 when the open directory @dfd may hold heapbpf's files of @kind, else -OUTPUT_E*. */
int output_dir_check(int dfd, enum output_dir_kind kind);
/* @dir opened (O_DIRECTORY) and checked by output_dir_check(); an fd or a negative code. */
int output_open_dir(const char *dir, enum output_dir_kind kind);

/*
 * Writes @path through @write_fn (which returns 0 or a negative errno).
 * Relative to its directory's fd, which must pass output_dir_check(), the
 * data goes to a new "<name>.tmp.XXXXXX" created exclusively and without
 * following links, is flushed, fsync'ed, made exactly output_file_mode()
 * (0600 unless --file-mode said otherwise) and renamed over @path: a
 * planted file or link at @path is replaced, never written through, and
 * no one else's file is truncated or chmod'ed. On any failure the temp
 * file is removed, @path is left as it was and a negative errno or
 * -OUTPUT_E* code is returned. @path "-" writes to stdout directly (flushed,
 * not synced). An existing @path that is a symbolic link, a device, a pipe
 * or a socket is refused; /dev/null alone is written in place. A directory
 * is -EISDIR.
 */
int output_write_atomic(const char *path, int (*write_fn)(FILE *f, void *arg), void *arg);
/* The same with the file made exactly @mode (the Pyroscope spool: always 0600). */
int output_write_atomic_mode(const char *path, mode_t mode, int (*write_fn)(FILE *f, void *arg),
			     void *arg);
/* The same for the name @base in the directory @dfd, already checked. */
int output_write_atomic_in(int dfd, const char *base, mode_t mode,
			   int (*write_fn)(FILE *f, void *arg), void *arg);
/*
 * The same, never synced: for a file that has only to outlive heapbpf, not
 * the machine (a run's state, whose processes a reboot ends too). A kill
 * leaves the old file or the new; a state written at each fork of a target
 * costs no disk flush.
 */
int output_write_state_in(int dfd, const char *base, mode_t mode,
			  int (*write_fn)(FILE *f, void *arg), void *arg);

/* The most names output_write_new_in() tries before it gives up with -EEXIST. */
#define OUTPUT_NEW_TRIES 1000

/* The name of try @seq into @name (@len bytes): 0, or a negative errno that ends the tries. */
typedef int output_name_fn(unsigned int seq, char *name, size_t len, void *arg);

/*
 * A new file in @dfd (already checked) that never takes another's name:
 * written as output_write_atomic_in() writes it (a temporary of ours,
 * flushed, synced, made exactly @mode), then given the first name
 * @name_fn makes for *@seq, *@seq + 1, ... that nothing holds, by a rename
 * that cannot replace (RENAME_NOREPLACE; a hard link where the file system
 * has no such rename): two writers never take one name, and whatever holds
 * a name (a file, a planted link) is left as it is. At most
 * OUTPUT_NEW_TRIES names; then -EEXIST. The name taken in @name, its
 * number in *@seq; on failure no file is left.
 */
int output_write_new_in(int dfd, mode_t mode, output_name_fn *name_fn, void *name_arg,
			unsigned int *seq, char *name, size_t len,
			int (*write_fn)(FILE *f, void *arg), void *arg);

/*
 * What output_write_atomic(@path) would refuse, said before a window is
 * spent: its directory missing or failing output_dir_check(), a link, a
 * device, a pipe or a directory at @path. 0 or the same negative code.
 */
int output_check_path(const char *path);

/*
 * For a file written as it goes (a recording, which a killed run must leave
 * readable): a new, empty file of ours made exactly @mode and renamed over
 * @path at once, with the same checks and refusals as output_write_atomic().
 * /dev/null is opened as it is. The open fd in *fd_out.
 */
int output_create_replacing(const char *path, mode_t mode, int *fd_out);

/* output_write_atomic() of @len bytes at @buf. */
int output_write_buffer(const char *path, const void *buf, size_t len);

#endif /* __HEAPBPF_OUTPUT_H */
