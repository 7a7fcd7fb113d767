/* SPDX-License-Identifier: MIT */
/*
 * A consumer of the installed hpregion, built by tests/consumer/run.sh with
 * nothing but `pkg-config --cflags --libs hpregion` (and again through
 * CMake's find_package). It creates a small THP region (FALLBACK, so it
 * also runs where THP is off), writes and reads it, and reports.
 */
#include <hpregion/hpregion.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
	struct hpr_config c;
	struct hpr_stats st;
	hpr_region *r;
	int rc;

	hpr_config_init(&c);
	c.size = 8u << 20;
	c.backend = HPR_BACKEND_THP;
	c.flags = HPR_F_FALLBACK | HPR_F_PREFAULT;
	c.name = "consumer-c";
	rc = hpr_create(&c, &r);
	if (rc) {
		fprintf(stderr, "consumer-c: hpr_create: %s\n", hpr_strerror(rc));
		return 1;
	}
	memset(hpr_base(r), 0x5a, hpr_size(r));
	for (size_t i = 0; i < hpr_size(r); i += 4096)
		if (((unsigned char *)hpr_base(r))[i] != 0x5a) {
			fprintf(stderr, "consumer-c: bad byte at %zu\n", i);
			return 1;
		}
	rc = hpr_stats(r, &st);
	if (rc) {
		fprintf(stderr, "consumer-c: hpr_stats: %s\n", hpr_strerror(rc));
		return 1;
	}
	printf("consumer-c: hpregion %s, %s region of %zu bytes, %zu huge-mapped\n",
	       hpr_version(), hpr_backend_name(hpr_backend_of(r)), hpr_size(r),
	       st.huge_mapped);
	if (hpr_destroy(r))
		return 1;
	/* an error path through the installed library too */
	c.size = 0;
	if (hpr_create(&c, &r) != -22)
		return 1;
	return 0;
}
