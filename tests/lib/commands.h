/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf's command line as main parses it: cli_parse with main's own
 * table of commands (user/main.c, built into the unit tests without its
 * main(): the Makefile's heapbpf_main.o).
 */
#ifndef __HEAPBPF_TEST_COMMANDS_H
#define __HEAPBPF_TEST_COMMANDS_H

#include "cli/cli.h"

extern const struct cli_command heapbpf_commands[];
extern const size_t heapbpf_ncommands;

static inline int hb_cli_parse(int argc, char **argv, struct cli *c)
{
	const struct cli_command *cmd;

	return cli_parse(argc, argv, c, heapbpf_commands, heapbpf_ncommands, &cmd);
}

#endif /* __HEAPBPF_TEST_COMMANDS_H */
