/* SPDX-License-Identifier: MIT */
/*
 * Named anonymous VMAs: a THP region's VMA carries "[anon:hpr:NAME]" in
 * /proc/self/maps and smaps (PR_SET_VMA_ANON_NAME, Linux 5.17 with
 * CONFIG_ANON_VMA_NAME), and `hpr stat PID` lists the region by that name.
 *
 * Kernels built without CONFIG_ANON_VMA_NAME (this CI host's, Debian 12's
 * 6.1 and 6.12) cannot name them: there the suite checks that the library's
 * probe and hpr stat say so, prints NOTRUN and passes, unless
 * HPR_TEST_REQUIRE names "anon_names" (tests/vm/run.sh sets it in a guest
 * whose kernel config has CONFIG_ANON_VMA_NAME=y).
 */
#include "common.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* Ask the kernel directly, not the library's probe. */
static bool kernel_names_vmas(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool ok;

	ck_assert_ptr_ne(p, MAP_FAILED);
	ok = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, 4096UL, "t") == 0;
	ck_assert(ok || errno == EINVAL);
	munmap(p, 4096);
	return ok;
}

/* The name of the VMA that holds addr in /proc/self/{maps,smaps}. */
static void vma_name(const char *file, const void *addr, char *out, size_t len)
{
	FILE *f = fopen(file, "re");
	char line[512];

	ck_assert_ptr_nonnull(f);
	*out = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		int n = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &a, &b, &n) < 2 || !n)
			continue;
		if ((uintptr_t)addr >= a && (uintptr_t)addr < b) {
			snprintf(out, len, "%s", line + n);
			out[strcspn(out, "\n")] = 0;
			break;
		}
	}
	fclose(f);
}

START_TEST(thp_region_named)
{
	struct hpr_probe_info pi;
	struct hpr_config c;
	hpr_region *r = NULL;
	char name[256], args[64], out[16384];
	bool can = kernel_names_vmas();
	int rc;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert(pi.have_anon_vma_name == can);
	snprintf(args, sizeof(args), "stat %d --json", (int)getpid());
	if (!can) {
		/* what there is to check: the tools say so */
		if (t_hpr(args, out, sizeof(out)) >= 0)
			ck_assert_msg(strstr(out, "\"anon_vma_names\":false"), "hpr stat: %s", out);
		t_unavailable(T_CAP_ANON_NAMES,
			      "this kernel cannot name anonymous VMAs (PR_SET_VMA_ANON_NAME "
			      "is EINVAL: built without CONFIG_ANON_VMA_NAME)");
		return;
	}
	t_config(&c, HPR_BACKEND_THP, NULL, 8 * MiB, 0, HPR_F_PREFAULT);
	c.name = "vmaname";
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	vma_name("/proc/self/maps", hpr_base(r), name, sizeof(name));
	ck_assert_msg(!strcmp(name, "[anon:hpr:vmaname]"), "maps names the VMA '%s'", name);
	vma_name("/proc/self/smaps", (char *)hpr_base(r) + hpr_size(r) - 1, name, sizeof(name));
	ck_assert_msg(!strcmp(name, "[anon:hpr:vmaname]"), "smaps names the VMA '%s'", name);

	rc = t_hpr(args, out, sizeof(out));
	if (rc < 0) {
		t_unavailable(T_CAP_ANON_NAMES, "the hpr command was not built (HPR_BUILD_TOOLS)");
	} else {
		ck_assert_msg(rc == 0, "hpr %s exited %d", args, rc);
		ck_assert_msg(strstr(out, "\"anon_vma_names\":true"), "hpr stat: %s", out);
		ck_assert_msg(strstr(out,
				     "\"name\":\"vmaname\",\"backend\":\"thp\",\"kind\":\"anon\""),
			      "hpr stat does not list the THP region by name: %s", out);
	}
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("vma_names");
	TCase *tc = tcase_create("vma_names");

	tcase_add_test(tc, thp_region_named);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, 0)
