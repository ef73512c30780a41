/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One ELF object read with libelf: its symbols (.symtab and .dynsym, local
 * ones included: jemalloc's internals are local), build-id, loadable
 * segments and the jemalloc version string it embeds.
 */
#ifndef __HEAPBPF_ELFOBJ_H
#define __HEAPBPF_ELFOBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_object;

struct elf_sym {
	const char *name;
	uint64_t addr; /* st_value: link-time virtual address */
	uint64_t size;
	unsigned char type; /* STT_* */
	unsigned char bind; /* STB_* */
};

/* Room for a hex build-id (GNU build-ids are 20 bytes; up to 40 accepted) and its NUL. */
#define ELF_BUILD_ID_MAX 81

/* The build-id of the ELF file open on fd, as hex; -ENOENT when it has none. */
int elfobj_fd_build_id(int fd, char *hex, size_t len);

/* Opens and indexes path; -ENOENT, -ENOEXEC (not ELF), -ENOMEM. */
int elfobj__open(const char *path, struct elf_object **out);
void elfobj__free(struct elf_object *o);

/* True when the object has a .symtab (not stripped). */
bool elfobj__has_symtab(const struct elf_object *o);
/* ET_EXEC or ET_DYN */
int elfobj__type(const struct elf_object *o);
/* Lower-case hex of NT_GNU_BUILD_ID, or NULL. */
const char *elfobj__build_id(const struct elf_object *o);

/* Symbol by exact name (any type, .symtab preferred), or NULL. */
const struct elf_sym *elfobj__sym_by_name(const struct elf_object *o, const char *name);
/* The first symbol of type STT_FUNC/STT_OBJECT whose name ends with suffix, or NULL. */
const struct elf_sym *elfobj__sym_by_suffix(const struct elf_object *o, const char *suffix,
					    int type);
/* The function containing vaddr, or NULL. */
const struct elf_sym *elfobj__func_at(const struct elf_object *o, uint64_t vaddr);

/* Link-time vaddr <-> file offset through the PT_LOAD segments; -ENOENT when outside. */
int elfobj__vaddr_to_offset(const struct elf_object *o, uint64_t vaddr, uint64_t *off);
int elfobj__offset_to_vaddr(const struct elf_object *o, uint64_t off, uint64_t *vaddr);
/* True when vaddr lies in a writable PT_LOAD segment (its bss included). */
bool elfobj__vaddr_writable(const struct elf_object *o, uint64_t vaddr, uint64_t len);
/*
 * Load bias from the object's lowest mapping, the one holding its first
 * PT_LOAD (start, file offset): runtime address = vaddr + bias. -EINVAL for
 * any other mapping, -ENOENT when the object has no PT_LOAD.
 */
int elfobj__load_bias(const struct elf_object *o, uint64_t map_start, uint64_t map_offset,
		      uint64_t *bias);

/*
 * The jemalloc version string embedded in the object (JEMALLOC_VERSION,
 * "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c", or abbreviated: Redis's
 * "5.3.0-0-g0"), copied to buf; -ENOENT if none.
 */
int elfobj__jemalloc_version(const struct elf_object *o, char *buf, size_t len);

/* Finds the jemalloc version pattern in a memory block; exposed for tests. */
const char *elfobj_jemalloc_version_scan(const char *data, size_t len, size_t *match_len);

#endif /* __HEAPBPF_ELFOBJ_H */
