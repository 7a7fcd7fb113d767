// SPDX-License-Identifier: MIT
// The C++ consumer: the public header must compile as C++ (extern "C",
// no C-only constructs) and link against the installed library.
#include <hpregion/hpregion.h>

#include <cstdio>
#include <cstring>
#include <memory>

namespace {
struct region_deleter {
	void operator()(hpr_region *r) const { hpr_destroy(r); }
};
using region_ptr = std::unique_ptr<hpr_region, region_deleter>;
} // namespace

int main()
{
	hpr_config c;
	hpr_config_init(&c);
	c.size = 8u << 20;
	c.backend = HPR_BACKEND_THP;
	c.flags = HPR_F_FALLBACK | HPR_F_PREFAULT;
	c.name = "consumer-cxx";

	hpr_region *raw = nullptr;
	int rc = hpr_create(&c, &raw);
	if (rc) {
		std::fprintf(stderr, "consumer-cxx: hpr_create: %s\n", hpr_strerror(rc));
		return 1;
	}
	region_ptr r(raw);
	auto *p = static_cast<unsigned char *>(hpr_base(r.get()));
	std::memset(p, 0xa5, hpr_size(r.get()));
	for (size_t i = 0; i < hpr_size(r.get()); i += 4096)
		if (p[i] != 0xa5) {
			std::fprintf(stderr, "consumer-cxx: bad byte at %zu\n", i);
			return 1;
		}
	// "struct": the function hpr_stats() hides the type name in C++
	struct hpr_stats st{};
	if (hpr_stats(r.get(), &st))
		return 1;
	std::printf("consumer-cxx: hpregion %s, %s region of %zu bytes, %zu huge-mapped\n",
		    hpr_version(), hpr_backend_name(hpr_backend_of(r.get())),
		    hpr_size(r.get()), st.huge_mapped);
	return 0;
}
