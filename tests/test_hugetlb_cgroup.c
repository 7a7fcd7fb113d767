/* SPDX-License-Identifier: MIT */
/*
 * The hugetlb cgroup limit, for real: in a child cgroup whose
 * hugetlb.2MB.max (cgroup v2) or hugetlb.2MB.limit_in_bytes (v1) is below
 * the region, hpr_create() is -ENOMEM with a message naming that file --
 * never a SIGBUS at first touch -- a region within the limit works and is
 * charged there, and `hpr probe` shows the limit.
 *
 * It runs in whichever hierarchy has the hugetlb controller: v2 where
 * cgroup.controllers lists it (this CI host, the VM matrix's 1g guest), v1
 * where a cgroup mount has it (the 1node/2node guests). Without either it
 * prints NOTRUN and passes, unless HPR_TEST_REQUIRE names "hugetlb_cgroup".
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h" /* hpr__probe_reset: the cgroup is probed once */

static struct {
	bool v2, enabled_here;
	char parent[800], dir[900];
} cg;

static bool file_has_word(const char *path, const char *w)
{
	char buf[1024];
	FILE *f = fopen(path, "re");
	bool yes = false;

	if (!f)
		return false;
	while (!yes && fscanf(f, "%1023s", buf) == 1)
		yes = !strcmp(buf, w);
	fclose(f);
	return yes;
}

/* Our cgroup's path in the hierarchy with hugetlb (v2: "", v1: "hugetlb"). */
static bool self_path(bool v2, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");
	bool found = false;

	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;

		if (!b)
			continue;
		*b++ = 0;
		b[strcspn(b, "\n")] = 0;
		if (v2 ? !a[1] : !!strstr(a + 1, "hugetlb")) {
			snprintf(out, len, "%s", strcmp(b, "/") ? b : "");
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* The mount of a hierarchy with the hugetlb controller, v2 first. */
static bool find_hierarchy(char *mnt, size_t len)
{
	char line[1024];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;

	ck_assert_ptr_nonnull(f);
	for (int pass = 0; pass < 2 && !found; pass++) {
		rewind(f);
		while (!found && fgets(line, sizeof(line), f)) {
			char point[512], fstype[32], opts[512], ctl[600];
			const char *dash = strstr(line, " - ");

			if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", point) != 1 ||
			    sscanf(dash, " - %31s %*s %511s", fstype, opts) != 2)
				continue;
			snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", point);
			if (pass == 0 && !strcmp(fstype, "cgroup2") &&
			    file_has_word(ctl, "hugetlb")) {
				cg.v2 = found = true;
			} else if (pass == 1 && !strcmp(fstype, "cgroup") &&
				   strstr(opts, "hugetlb")) {
				cg.v2 = false;
				found = true;
			}
			if (found)
				snprintf(mnt, len, "%s", point);
		}
	}
	fclose(f);
	return found;
}

/* Join a fresh child cgroup limited to limit bytes of 2 MiB pages. */
static bool join_limited(size_t limit)
{
	char mnt[512], self[256], v[32], ctl[1000];

	if (!find_hierarchy(mnt, sizeof(mnt))) {
		t_unavailable(T_CAP_HUGETLB_CG,
			      "no cgroup hierarchy has the hugetlb controller "
			      "(neither a v1 mount nor cgroup2's cgroup.controllers)");
		return false;
	}
	ck_assert(self_path(cg.v2, self, sizeof(self)));
	snprintf(cg.parent, sizeof(cg.parent), "%s%s", mnt, self);
	snprintf(cg.dir, sizeof(cg.dir), "%s/hpr-test-%d", cg.parent, (int)getpid());
	snprintf(ctl, sizeof(ctl), "%s/cgroup.subtree_control", cg.parent);
	if (cg.v2 && !file_has_word(ctl, "hugetlb")) {
		int rc = t_write_at(cg.parent, "cgroup.subtree_control", "+hugetlb");

		if (rc) {
			t_unavailable(T_CAP_HUGETLB_CG, "cannot enable hugetlb in %s: %s", ctl,
				      strerror(-rc));
			return false;
		}
		cg.enabled_here = true;
	}
	ck_assert_msg(!mkdir(cg.dir, 0755), "mkdir %s: %s", cg.dir, strerror(errno));
	snprintf(v, sizeof(v), "%zu", limit);
	ck_assert_int_eq(
		t_write_at(cg.dir, cg.v2 ? "hugetlb.2MB.max" : "hugetlb.2MB.limit_in_bytes", v), 0);
	snprintf(v, sizeof(v), "%d", (int)getpid());
	ck_assert_int_eq(t_write_at(cg.dir, "cgroup.procs", v), 0);
	hpr__probe_reset(); /* the library finds its cgroup again */
	printf("hugetlb cgroup v%d: %s\n", cg.v2 ? 2 : 1, cg.dir);
	return true;
}

static void leave(void)
{
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)getpid());
	ck_assert_int_eq(t_write_at(cg.parent, "cgroup.procs", v), 0);
	ck_assert_msg(!rmdir(cg.dir), "rmdir %s: %s", cg.dir, strerror(errno));
	if (cg.enabled_here)
		t_write_at(cg.parent, "cgroup.subtree_control", "-hugetlb");
	hpr__probe_reset();
}

static unsigned long long usage(void)
{
	char p[1000];
	unsigned long long v = ~0ULL;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", cg.dir,
		 cg.v2 ? "hugetlb.2MB.current" : "hugetlb.2MB.usage_in_bytes");
	f = fopen(p, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%llu", &v), 1);
	fclose(f);
	return v;
}

#define LIMIT (4 * MiB)

START_TEST(over_limit)
{
	static const unsigned flags[] = { 0, HPR_F_PREFAULT };
	const char *file;
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	t_need_pool_2m(16);
	if (!join_limited(LIMIT))
		return;
	file = cg.v2 ? "hugetlb.2MB.max" : "hugetlb.2MB.limit_in_bytes";
	for (size_t i = 0; i < 2; i++) {
		/* 16 MiB against 4 MiB: refused at create, the pool untouched */
		t_config(&c, HPR_BACKEND_HUGETLB, NULL, 16 * MiB, 0, flags[i]);
		c.page_size = 2 * MiB;
		rc = hpr_create(&c, &r);
		ck_assert_int_eq(rc, -ENOMEM);
		ck_assert_ptr_null(r);
		ck_assert_msg(strstr(hpr_strerror(rc), file) && strstr(hpr_strerror(rc), cg.dir),
			      "the message does not name %s/%s: %s", cg.dir, file,
			      hpr_strerror(rc));
		ck_assert_uint_eq(t_hugetlb_free(2048), 16);
		ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
		ck_assert_uint_eq(usage(), 0);
	}
	/* within the limit: works, and the kernel charges it here */
	r = t_region(HPR_BACKEND_HUGETLB, NULL, LIMIT, 0, HPR_F_PREFAULT);
	ck_assert_uint_eq(usage(), LIMIT);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(usage(), 0);
	leave();
}
END_TEST

START_TEST(probe_shows_limit)
{
	struct hpr_probe_info pi;
	char out[65536], want[1100];
	unsigned i;

	if (!join_limited(LIMIT))
		return;
	ck_assert_int_eq(hpr_probe(&pi), 0);
	for (i = 0; i < pi.nr_hugetlb_sizes; i++)
		if (pi.hugetlb[i].page_size == 2 * MiB)
			break;
	ck_assert_uint_lt(i, pi.nr_hugetlb_sizes);
	ck_assert_int_eq(pi.hugetlb[i].cgroup_limit, (long long)LIMIT); /* room: none used */
	if (t_hpr("probe --json", out, sizeof(out)) < 0) {
		t_unavailable(T_CAP_HUGETLB_CG, "the hpr command was not built (HPR_BUILD_TOOLS)");
	} else {
		snprintf(want, sizeof(want),
			 "{\"page_size\":2097152,\"found\":true,\"version\":%d,\"dir\":\"%s\","
			 "\"limit\":%zu,",
			 cg.v2 ? 2 : 1, cg.dir, LIMIT);
		ck_assert_msg(strstr(out, want), "hpr probe --json lacks %s: %s", want, out);
	}
	leave();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("hugetlb_cgroup");
	TCase *tc = tcase_create("hugetlb_cgroup");

	tcase_add_test(tc, over_limit);
	tcase_add_test(tc, probe_shows_limit);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
