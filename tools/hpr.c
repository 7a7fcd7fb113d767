/* SPDX-License-Identifier: MIT */
/*
 * hpr: the command-line companion of libhpregion. Dispatches to the
 * subcommands (probe, pool, mount, stat); see hpr(1).
 */
#include "hpr.h"

#include <hpregion/hpregion.h>
#include <string.h>

const char *hpr_prog = "hpr";

static const char usage[] =
	"usage: hpr COMMAND [ARGS]\n"
	"  probe [--json] [--size SIZE]   what this machine gives; which backend\n"
	"                                  works for SIZE and how to fix the others\n"
	"  pool [SIZE] [--node N] [--set COUNT | --min COUNT] [--json]\n"
	"                                  show or set hugetlb pools (setting: root)\n"
	"  mount DIR [--hugetlbfs] [--size SIZE] [--pagesize SIZE]\n"
	"        [--huge always|within_size|advise] [--mode MODE] [--owner USER[:GROUP]]\n"
	"        [--unsafe-path]\n"
	"                                  mount a huge tmpfs or hugetlbfs (root)\n"
	"  stat PID [--json]              hpregion regions of a running process\n"
	"  stat --kept DIR [--json]       kept regions (HPR_F_ATTACH) in a directory\n"
	"  version                        library version\n"
	"See hpr(1) and hpr-COMMAND(1).\n";

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2)
		return usage_error(usage, "no command given");
	cmd = argv[1];
	if (!strcmp(cmd, "probe"))
		return cmd_probe(argc - 1, argv + 1);
	if (!strcmp(cmd, "pool"))
		return cmd_pool(argc - 1, argv + 1);
	if (!strcmp(cmd, "mount"))
		return cmd_mount(argc - 1, argv + 1);
	if (!strcmp(cmd, "stat"))
		return cmd_stat(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("hpr %s\n", hpr_version());
		return 0;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		fputs(usage, stdout);
		return 0;
	}
	return usage_error(usage, "unknown command '%s'", cmd);
}
