/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef __HEAPBPF_CLI_CHECKS_H
#define __HEAPBPF_CLI_CHECKS_H

#include <stdbool.h>

#include "cli/cli.h"

/*
 * The refusals several commands share, each 0 or -EINVAL after cli_bad():
 * in the order a command calls them, they decide which sentence a command
 * line with several faults gets.
 */
int checks_no_operand(int n, char **operands);
int checks_refuse_input_options(const struct cli *c);
int checks_refuse_live_heap(const struct cli *c);
int checks_refuse_top_keys(const struct cli_given *g);
int checks_refuse_fleet_options(const struct cli *c);
int checks_target(const struct cli *c, const struct cli_given *g);
int checks_at_peak(const struct cli *c);
int checks_one_file(const struct cli *c);
int checks_resolve_format(struct cli *c);
int checks_combinations(struct cli *c, bool have_type, bool have_duration);

#endif /* __HEAPBPF_CLI_CHECKS_H */
