/* SPDX-License-Identifier: MIT */
/* Snapshot save/load: being written (issue 5); not yet available. */
#include "internal.h"
#include <errno.h>

int hpr_save(hpr_region *r, int fd, unsigned flags)
{
	(void)r; (void)fd; (void)flags;
	return hpr__fail(-ENOSYS, "hpr_save is not implemented in this build yet");
}

int hpr_load(hpr_region *r, int fd, unsigned flags, size_t *changed)
{
	(void)r; (void)fd; (void)flags;
	if (changed)
		*changed = 0;
	return hpr__fail(-ENOSYS, "hpr_load is not implemented in this build yet");
}
