/* SPDX-License-Identifier: MIT */
/* libFuzzer target: mountinfo lines and lookups, and the option helpers
 * (hpr__opt_get, hpr__parse_size) on the options they yield. */
#include "parse.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void opts(const char *o)
{
	static const char *const keys[] = { "huge", "size", "pagesize", "mode", "memory", "" };
	char v[32];
	uint64_t b;

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		int rc = hpr__opt_get(o, keys[k], v, sizeof(v));

		if (rc == 1 && strlen(v) >= sizeof(v))
			abort();
		if (rc == 1)
			hpr__parse_size(v, &b);
	}
	hpr__opt_get(o, "size", v, 0);
	hpr__opt_get(o, "size", v, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct hpr__mount m;
	size_t i = 0;

	while (i < size) {
		size_t e = i;

		while (e < size && buf[e] != '\n')
			e++;
		if (!hpr__mountinfo_line(buf + i, e - i, &m)) {
			/* every field is a terminated string within its array */
			if (memchr(m.mnt_point, 0, sizeof(m.mnt_point)) == NULL ||
			    memchr(m.fstype, 0, sizeof(m.fstype)) == NULL ||
			    memchr(m.super_opts, 0, sizeof(m.super_opts)) == NULL)
				abort();
			opts(m.super_opts);
			opts(m.mnt_opts);
			hpr__mountinfo_find(buf, size, m.major, m.minor, m.mnt_point, &m);
		}
		i = e + 1;
	}
	hpr__mountinfo_find(buf, size, 0, 22, "/dev/shm", &m);
	hpr__mountinfo_find(buf, size, 0, 22, NULL, &m);
	return 0;
}
