/* SPDX-License-Identifier: MIT */
/*
 * A client built against the hpregion 0.1 header (tests/abi/hpregion-0.1.h,
 * include/hpregion/hpregion.h as of e490a55), run against the library under
 * test: tests/abi.sh. It uses every struct that carries a version -- the
 * config, the stats and the probe -- and checks that the library fills them
 * as 0.1 did and writes not one byte past the 0.1 structs.
 * Prints what failed and exits 1; 0 when all is well.
 */
#include <hpregion/hpregion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;

#define CHECK(cond, ...)                                   \
	do {                                               \
		if (!(cond)) {                             \
			printf("old_client: %s: ", #cond); \
			printf(__VA_ARGS__);               \
			printf("\n");                      \
			failed = 1;                        \
		}                                          \
	} while (0)

#define CANARY 0xa5

static int canary_intact(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != CANARY)
			return 0;
	return 1;
}

int main(void)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	struct {
		struct hpr_stats st;
		unsigned char after[512];
	} s;
	struct {
		struct hpr_probe_info pi;
		unsigned char after[512];
	} p;
	size_t off = 0;
	int rc;

	memset(&p, CANARY, sizeof(p));
	rc = hpr_probe(&p.pi);
	CHECK(rc == 0, "hpr_probe: %s", hpr_strerror(rc));
	CHECK(canary_intact(p.after, sizeof(p.after)), "hpr_probe wrote past the 0.1 struct");
	CHECK(p.pi.kernel_major >= 5, "kernel_major %d", p.pi.kernel_major);
	CHECK(p.pi.thp_enabled >= HPR_THP_ALWAYS && p.pi.thp_enabled <= HPR_THP_UNKNOWN,
	      "thp_enabled %d", p.pi.thp_enabled);
	CHECK(p.pi.nr_hugetlb_sizes <= 4, "nr_hugetlb_sizes %u", p.pi.nr_hugetlb_sizes);

	hpr_config_init(&c);
	c.size = 4u << 20;
	c.backend = HPR_BACKEND_THP;
	c.flags = HPR_F_FALLBACK | HPR_F_PREFAULT;
	c.name = "abi-0.1";
	rc = hpr_create(&c, &r);
	CHECK(rc == 0, "hpr_create: %s", hpr_strerror(rc));
	if (rc)
		return 1;
	CHECK(hpr_size(r) == c.size, "hpr_size %zu", hpr_size(r));
	memset(hpr_base(r), 1, c.size);

	memset(&s, CANARY, sizeof(s));
	rc = hpr_stats(r, &s.st);
	CHECK(rc == 0, "hpr_stats: %s", hpr_strerror(rc));
	CHECK(canary_intact(s.after, sizeof(s.after)), "hpr_stats wrote past the 0.1 struct");
	CHECK(s.st.size == c.size, "stats.size %zu", s.st.size);
	CHECK(s.st.backend == HPR_BACKEND_THP, "stats.backend %d", (int)s.st.backend);
	CHECK(s.st.requested == HPR_BACKEND_THP, "stats.requested %d", s.st.requested);
	CHECK(s.st.resident == c.size, "stats.resident %zu", s.st.resident);
	CHECK(s.st.pages_total == c.size / s.st.page_size, "stats.pages_total %zu",
	      s.st.pages_total);
	CHECK(s.st.pages_present == s.st.pages_total, "stats.pages_present %zu",
	      s.st.pages_present);
	for (size_t i = 0; i < sizeof(s.st.reserved_) / sizeof(s.st.reserved_[0]); i++)
		CHECK(s.st.reserved_[i] == 0, "stats.reserved_[%zu] %llu", i,
		      (unsigned long long)s.st.reserved_[i]);

	rc = hpr_fault_error(r, &off);
	CHECK(rc == 0 && off == (size_t)-1, "hpr_fault_error %d off %zu", rc, off);
	CHECK(!strcmp(hpr_backend_name(HPR_BACKEND_HUGETLB), "hugetlb"), "backend name");
	CHECK(hpr_destroy(r) == 0, "hpr_destroy");

	/* a 0.1 client's bad input is still refused the 0.1 way */
	hpr_config_init(&c);
	c.size = 4u << 20;
	c.flags = 1u << 31;
	r = NULL;
	rc = hpr_create(&c, &r);
	CHECK(rc == -EINVAL && r == NULL, "unknown flag: %d", rc);
	CHECK(hpr_stats(NULL, &s.st) == -EINVAL, "hpr_stats(NULL)");
	CHECK(hpr_probe(NULL) == -EINVAL, "hpr_probe(NULL)");

	if (!failed)
		printf("old_client: the 0.1 header's client works against %s\n", hpr_version());
	return failed;
}
