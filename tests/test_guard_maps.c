/* SPDX-License-Identifier: MIT */
/*
 * Guard mode (HPR_F_GUARD) and vm.max_map_count (issue 15, suspect 6).
 * Guard mode makes released pages PROT_NONE, so every released run that
 * does not reach an end of the region splits its VMA in three, and so does
 * faulting in a page in the middle of a released run. Once the process
 * holds vm.max_map_count mappings the kernel refuses the split and
 * mprotect returns ENOMEM, which read as "out of memory".
 *
 * The test fills this process's own mappings up to the limit (a PROT_NONE
 * reservation with every other page made readable: nothing system-wide is
 * changed), leaves a little headroom, and then releases and faults in
 * guarded pages until the kernel refuses. The call must fail cleanly with
 * a message that names vm.max_map_count and what to do, leave the page
 * where it was (contents intact, still usable), and work again once
 * mappings are freed.
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGES 16

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static char *filler;
static size_t filler_pages, filler_split;

/* Split a PROT_NONE reservation page by page until the kernel refuses
 * (the map count is at vm.max_map_count), then merge `headroom` splits
 * back so exactly 2 * headroom mappings can still be made. */
static void fill_maps(size_t headroom)
{
	long max = read_long("/proc/sys/vm/max_map_count");

	ck_assert_int_gt(max, 0);
	filler_pages = 2 * (size_t)max + 8;
	filler = mmap(NULL, filler_pages * 4096, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_ptr_ne(filler, MAP_FAILED);
	for (filler_split = 0;; filler_split++) {
		size_t pg = 2 * filler_split + 1;

		ck_assert_uint_lt(pg + 1, filler_pages);
		if (mprotect(filler + pg * 4096, 4096, PROT_READ)) {
			ck_assert_int_eq(errno, ENOMEM);
			break;
		}
	}
	for (size_t i = 0; i < headroom; i++) {
		filler_split--;
		ck_assert_int_eq(mprotect(filler + (2 * filler_split + 1) * 4096, 4096, PROT_NONE),
				 0);
	}
}

static void free_maps(void)
{
	ck_assert_int_eq(munmap(filler, filler_pages * 4096), 0);
}

static void check_message(int rc, const char *call)
{
	const char *msg = hpr_strerror(rc);

	printf("%s: %d: %s\n", call, rc, msg);
	ck_assert_msg(rc == -ENOMEM, "%s at the map count limit: %d (%s)", call, rc, msg);
	ck_assert_msg(strstr(msg, "max_map_count"),
		      "%s: the message does not say what happened: \"%s\"", call, msg);
}

START_TEST(release_at_map_limit)
{
	hpr_region *r =
		t_region(HPR_BACKEND_THP, NULL, PAGES * 2 * MiB, 1, HPR_F_GUARD | HPR_F_FALLBACK);
	size_t ps = hpr_page_size(r);
	char *b = hpr_base(r);
	int rc = 0;
	size_t i;

	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0);
	memset(b, 0x77, hpr_size(r));
	fill_maps(1); /* room for one split */
	/* pages 1, 3, 5 ...: each release splits the region's VMA */
	for (i = 1; i < PAGES - 1; i += 2) {
		rc = hpr_release_lazy(r, i * ps, ps);
		if (rc)
			break;
	}
	ck_assert_msg(rc, "released %zu separate pages at the map count limit", i / 2 + 1);
	check_message(rc, "hpr_release_lazy");
	/* the page that failed was not released: still mapped, data intact */
	for (size_t off = 0; off < ps; off += 4096)
		ck_assert_int_eq(b[i * ps + off], 0x77);
	b[i * ps] = 0x11;
	free_maps();
	ck_assert_int_eq(hpr_release_lazy(r, i * ps, ps), 0);
	hpr_destroy(r);
}
END_TEST

START_TEST(fault_in_at_map_limit)
{
	hpr_region *r =
		t_region(HPR_BACKEND_THP, NULL, PAGES * 2 * MiB, 1, HPR_F_GUARD | HPR_F_FALLBACK);
	size_t ps = hpr_page_size(r);
	char *b = hpr_base(r);
	int rc;

	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0);
	/* one released run in the middle: [2, 12) is PROT_NONE */
	ck_assert_int_eq(hpr_release_lazy(r, 2 * ps, 10 * ps), 0);
	fill_maps(0);
	/* making page 6 accessible again splits the run */
	rc = hpr_fault_in(r, 6 * ps, ps);
	check_message(rc, "hpr_fault_in");
	free_maps();
	ck_assert_int_eq(hpr_fault_in(r, 6 * ps, ps), 0);
	memset(b + 6 * ps, 0x22, ps);
	ck_assert_int_eq(b[6 * ps + ps - 1], 0x22);
	hpr_destroy(r);
}
END_TEST

static Suite *guard_suite(void)
{
	Suite *s = suite_create("guard_maps");
	TCase *tc = tcase_create("max_map_count");

	tcase_add_test(tc, release_at_map_limit);
	tcase_add_test(tc, fault_in_at_map_limit);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(guard_suite, 0)
