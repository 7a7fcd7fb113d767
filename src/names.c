/* SPDX-License-Identifier: MIT */
/*
 * Backend names, in both directions: hpr_backend_from_name() for command
 * lines and config files, the inverse of hpr_backend_name() (region.c),
 * whose names it matches so the two can never disagree.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

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
