/* Issue 15 soak, finding 22 (docs/soak.md). Build: gcc -O1 -o unmap_race unmap_race.c -Iinclude build/libhpregion.a -luring -lnuma -lpthread
 * Two threads race hugetlb creates for a short pool (one passes the pool
 * check but fails the mmap reservation) while two threads create, touch
 * and destroy THP regions. A SIGSEGV on a THP region that hpr_fault_in
 * just populated means someone unmapped it. Run as root under
 * flock /run/hpregion.lock; sets and restores the 2 MiB pool. */
#define _GNU_SOURCE
#include <hpregion/hpregion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static volatile int stop;
static long creates_failed, creates_ok, thp_rounds;
static void *hugetlb_thread(void *a)
{
	(void)a;
	while (!stop) {
		struct hpr_config c;
		hpr_region *r;
		hpr_config_init(&c);
		c.size = 6 << 20;
		c.backend = HPR_BACKEND_HUGETLB;
		c.workers = 1;
		if (hpr_create(&c, &r) == 0) {
			__atomic_fetch_add(&creates_ok, 1, 0);
			hpr_destroy(r);
		} else
			__atomic_fetch_add(&creates_failed, 1, 0);
	}
	return NULL;
}
static void *thp_thread(void *a)
{
	(void)a;
	while (!stop) {
		struct hpr_config c;
		hpr_region *r;
		hpr_config_init(&c);
		c.size = 8 << 20;
		c.backend = HPR_BACKEND_THP;
		c.workers = 1;
		c.flags = HPR_F_FALLBACK;
		if (hpr_create(&c, &r))
			continue;
		if (!hpr_fault_in(r, 0, c.size)) {
			volatile char *p = hpr_base(r);
			for (size_t i = 0; i < c.size; i += 4096)
				(void)p[i]; /* SIGSEGV here: the mapping is gone */
		}
		hpr_destroy(r);
		__atomic_fetch_add(&thp_rounds, 1, 0);
	}
	return NULL;
}
static void wr(const char *p, const char *v) { FILE *f = fopen(p, "w"); if (f) { fputs(v, f); fclose(f); } }
int main(void)
{
	pthread_t t[4];
	char old[32] = "0";
	FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "r");
	if (f) { if (!fgets(old, sizeof(old), f)) strcpy(old, "0"); fclose(f); }
	wr("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "4");
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, i < 2 ? hugetlb_thread : thp_thread, NULL);
	sleep(20);
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	wr("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", old);
	printf("hugetlb creates ok %ld failed %ld, thp rounds %ld, no SIGSEGV\n", creates_ok,
	       creates_failed, thp_rounds);
	return 0;
}
