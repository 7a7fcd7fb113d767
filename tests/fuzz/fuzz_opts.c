/* SPDX-License-Identifier: MIT */
/* libFuzzer target: hpr__opt_get and hpr__parse_size on NUL-terminated
 * copies of the input; the part before the first '\n' is the key. */
#include "parse.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *nl, v[16];
	uint64_t b;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (!hpr__parse_size(s, &b) && b && strspn(s, "0123456789") == 0)
		abort(); /* a size must start with a digit */
	nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		if (hpr__opt_get(nl + 1, s, v, sizeof(v)) == 1 && strlen(v) >= sizeof(v))
			abort();
		hpr__parse_size(nl + 1, &b);
	}
	free(s);
	return 0;
}
