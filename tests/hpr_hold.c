/* SPDX-License-Identifier: MIT */
/*
 * hpr_hold: a process that holds hpregion regions until it is killed, for
 * the hpr stat test (tests/hpr_cli_test.sh).
 *   hpr_hold SIZE_MIB BACKEND:NAME[:DIR] ...
 * BACKEND is thp, shmem or hugetlb; DIR a directory on a huge tmpfs or
 * hugetlbfs mount (none: memfd). Each region is prefaulted; then one line
 * per region is printed with what hpr_stats says, then "ready", and the
 * process sleeps until a signal ends it.
 */
#include <hpregion/hpregion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t size;

	if (argc < 3) {
		fprintf(stderr, "usage: hpr_hold SIZE_MIB BACKEND:NAME[:DIR] ...\n");
		return 2;
	}
	size = strtoull(argv[1], NULL, 10) << 20;
	for (int i = 2; i < argc; i++) {
		char spec[512], *name, *dir;
		struct hpr_config c;
		struct hpr_stats st;
		hpr_region *r;
		int rc;

		snprintf(spec, sizeof(spec), "%s", argv[i]);
		name = strchr(spec, ':');
		if (!name) {
			fprintf(stderr, "hpr_hold: bad spec '%s'\n", argv[i]);
			return 2;
		}
		*name++ = '\0';
		dir = strchr(name, ':');
		if (dir)
			*dir++ = '\0';
		hpr_config_init(&c);
		c.size = size;
		c.name = name;
		c.path = dir;
		c.flags = HPR_F_PREFAULT;
		rc = hpr_backend_from_name(spec, &c.backend);
		if (rc) {
			fprintf(stderr, "hpr_hold: %s\n", hpr_strerror(rc));
			return 2;
		}
		rc = hpr_create(&c, &r);
		if (rc) {
			fprintf(stderr, "hpr_hold: %s:%s: %s\n", spec, name, hpr_strerror(rc));
			return 1;
		}
		memset(hpr_base(r), 0x5a, hpr_size(r));
		rc = hpr_stats(r, &st);
		if (rc) {
			fprintf(stderr, "hpr_hold: stats: %s\n", hpr_strerror(rc));
			return 1;
		}
		/* never destroyed: the process exits by signal */
		printf("region %s %s %p %zu %zu %zu\n", name, hpr_backend_name(hpr_backend_of(r)),
		       hpr_base(r), st.size, st.resident, st.huge_mapped);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
