/* SPDX-License-Identifier: MIT */
/*
 * Backend names, in both directions: hpr_backend_name(), and
 * hpr_backend_from_name() for command lines and config files, which
 * matches hpr_backend_name()'s names so the two can never disagree. A leaf:
 * fork.c's and backend.c's messages use the names too.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

const char *hpr_backend_name(enum hpr_backend b)
{
	switch (b) {
	case HPR_BACKEND_AUTO:
		return "auto";
	case HPR_BACKEND_THP:
		return "thp";
	case HPR_BACKEND_SHMEM:
		return "shmem";
	case HPR_BACKEND_HUGETLB:
		return "hugetlb";
	}
	return "unknown";
}

int hpr_backend_from_name(const char *name, enum hpr_backend *out)
{
	hpr__err_clear();
	if (!name || !out)
		return hpr__fail(-EINVAL, "hpr_backend_from_name: name or out is NULL");
	for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_HUGETLB; b++)
		if (!strcmp(name, hpr_backend_name((enum hpr_backend)b))) {
			*out = (enum hpr_backend)b;
			return 0;
		}
	return hpr__fail(-EINVAL, "unknown backend '%.40s': use auto, thp, shmem or hugetlb", name);
}
