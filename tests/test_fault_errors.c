/* SPDX-License-Identifier: MIT */
/*
 * Fault-in when the backing memory runs out: a full tmpfs (-ENOSPC) and a
 * memory cgroup limit, each with the first failing offset from
 * hpr_fault_error(). Real mounts, real cgroups (v1 memory controller).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static bool page_resident(const void *p, size_t len)
{
	unsigned char v[512];

	ck_assert_uint_le(len / 4096, sizeof(v));
	ck_assert_int_eq(mincore((void *)p, len, v), 0);
	for (size_t i = 0; i < len / 4096; i++)
		if (!(v[i] & 1))
			return false;
	return true;
}

/* A tmpfs big enough at create, then filled by someone else. */
START_TEST(tmpfs_full)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	unsigned workers = _i ? 4 : 1;
	hpr_region *r = t_region(HPR_BACKEND_SHMEM, dir, 32 * MiB, workers, 0);
	char path[256], *p = hpr_base(r);
	size_t off = 0;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/filler", dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, 0, 0, 40 * MiB), 0);
	rc = hpr_fault_in(r, 0, 32 * MiB);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "size="));
	ck_assert_int_eq(hpr_fault_error(r, &off), -ENOSPC);
	ck_assert_uint_eq(off % (2 * MiB), 0);
	ck_assert_uint_lt(off, 32 * MiB);
	ck_assert_msg(!page_resident(p + off, 2 * MiB), "failing page %#zx is resident",
		      off);
	if (workers == 1) {
		/* in order: 24 MiB fit, the page at 24 MiB is the first to fail */
		ck_assert_uint_eq(off, 24 * MiB);
		ck_assert(page_resident(p, 2 * MiB));
		ck_assert(page_resident(p + 22 * MiB, 2 * MiB));
	}
	/* room again: the same call completes and the error is cleared */
	close(fd);
	ck_assert_int_eq(unlink(path), 0);
	rc = hpr_fault_in(r, 0, 32 * MiB);
	ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_fault_error(r, &off), 0);
	ck_assert_uint_eq(off, (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- memory cgroup (v1) ---- */
static char cg_parent[600], cg_dir[640];

static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, v, strlen(v));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* A child of the memory cgroup this process is in. */
static void cg_make(const char *limit, bool oom_kill_disable)
{
	char line[512], p[700], base[256] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		char *m = strstr(line, ":memory:");

		if (m) {
			snprintf(base, sizeof(base), "%s", m + 8);
			base[strcspn(base, "\n")] = 0;
		}
	}
	fclose(f);
	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) || !*base)
		t_skip("no cgroup v1 memory controller at /sys/fs/cgroup/memory");
	snprintf(cg_parent, sizeof(cg_parent), "/sys/fs/cgroup/memory%.256s",
		 strcmp(base, "/") ? base : "");
	snprintf(cg_dir, sizeof(cg_dir), "%s/hpr-test-%d", cg_parent, (int)getpid());
	if (mkdir(cg_dir, 0755) && errno != EEXIST)
		t_skip("mkdir %s: %s", cg_dir, strerror(errno));
	snprintf(p, sizeof(p), "%s/memory.limit_in_bytes", cg_dir);
	ck_assert_int_eq(write_str(p, limit), 0);
	snprintf(p, sizeof(p), "%s/memory.oom_control", cg_dir);
	ck_assert_int_eq(write_str(p, oom_kill_disable ? "1" : "0"), 0);
}

static void cg_remove(void)
{
	/* the child has exited: the group is empty and can go */
	for (int t = 0; t < 100 && rmdir(cg_dir) && errno == EBUSY; t++)
		usleep(10000);
}

/* An open cgroup.procs of the memory cgroup at dir, or -errno. */
static int cg_procs(const char *dir)
{
	char p[700];
	int fd;

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Move this process into the cgroup whose cgroup.procs is open at fd. */
static int cg_join(int fd)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%d", (int)getpid());

	return write(fd, pid, (size_t)n) == n ? 0 : -errno;
}

#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#ifdef T_ASAN
/* ASan's run-time switch for its fake stacks (detect_stack_use_after_return) */
extern int __asan_option_detect_stack_use_after_return;
#endif

/* Fault in the next 1 MiB of this thread's stack, so that the deeper
 * frames of an error path (hpr_fault_in's message, a sanitizer's
 * instrumentation) find it mapped and charged before the limit is hit. */
static __attribute__((noinline)) void stack_prefault(void)
{
	volatile char pad[1 << 20];

	for (size_t i = 0; i < sizeof(pad); i += 4096)
		pad[i] = 1;
}

/*
 * Child: fault 256 MiB of THP against a 64 MiB limit and report rc and the
 * failing offset through the pipe. Only the populate runs inside the
 * limited cgroup: the region is made before joining and the child leaves
 * (back to its parent's group, which keeps the charges already made: v1
 * does not move charges by default) as soon as hpr_fault_in returns. At the
 * limit with the OOM killer off, any page fault of user space waits for
 * memory that never comes; outside the populate that would be the test's
 * own memory (or a sanitizer runtime's), not the library's behaviour.
 */
static void cg_child(int wfd)
{
	struct hpr_config c;
	hpr_region *r;
	long res[2];
	size_t off = 0;
	int rc, in_fd, out_fd;

	t_config(&c, HPR_BACKEND_THP, NULL, 256 * MiB, 1, HPR_F_FALLBACK);
	rc = hpr_create(&c, &r);
	if (rc)
		_exit(4);
	stack_prefault();
#ifdef T_ASAN
	/* ASan's fake stacks hand out frames from fresh pages call after call
	 * (seen: the child waiting in mem_cgroup_oom_synchronize from
	 * __asan_stack_malloc_4); at the limit that waits for ever. This
	 * child uses the real stack, already faulted above. */
	__asan_option_detect_stack_use_after_return = 0;
#endif
	/* both opened before the limit: at it, with the OOM killer off, even
	 * open() fails (its struct file is charged too: -ENOMEM) */
	in_fd = cg_procs(cg_dir);
	out_fd = cg_procs(cg_parent);
	if (in_fd < 0 || out_fd < 0 || cg_join(in_fd))
		_exit(3);
	rc = hpr_fault_in(r, 0, hpr_size(r));
	if (cg_join(out_fd))
		_exit(6);
	hpr_fault_error(r, &off);
	res[0] = rc;
	res[1] = (long)off;
	hpr_destroy(r);
	if (write(wfd, res, sizeof(res)) != sizeof(res))
		_exit(5);
	_exit(0);
}

static int cg_run(long res[2], int *status)
{
	int pfd[2];
	pid_t pid;
	ssize_t n;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		close(pfd[0]);
		cg_child(pfd[1]);
	}
	close(pfd[1]);
	n = read(pfd[0], res, 2 * sizeof(long));
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, status, 0), pid);
	cg_remove();
	return n == 2 * sizeof(long) ? 0 : -1;
}

/*
 * With the OOM killer on (the default) a populate past memory.limit_in_bytes
 * is answered by the kernel's memcg OOM killer: the child dies of SIGKILL
 * and no library can turn that into an error (6.x: the THP charge fails
 * quietly, the 4 KiB fallback charge then invokes the OOM killer from the
 * GUP fault). What the test can and does check: that is what happens, and
 * nothing else (no SIGBUS, no hang).
 */
START_TEST(cgroup_oom_kill)
{
	long res[2] = { 0, 0 };
	int status = 0;

	cg_make("64M", false);
	if (cg_run(res, &status) == 0) {
		/* the kernel reported it instead: it must be ENOMEM */
		ck_assert_int_eq(res[0], -ENOMEM);
		printf("cgroup_oom_kill: the kernel reported ENOMEM\n");
	} else {
		printf("cgroup_oom_kill: the child was OOM-killed\n");
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			      "child status %#x, want the memcg OOM kill", status);
	}
}
END_TEST

/*
 * With memory.oom_control = 1 the charge from a GUP fault (not a user
 * fault) fails instead of waiting for the OOM killer, and populate returns
 * ENOMEM: the library reports -ENOMEM with the first failing offset.
 */
START_TEST(cgroup_enomem)
{
	long res[2] = { 0, 0 };
	int status = 0;

	cg_make("64M", true);
	ck_assert_msg(cg_run(res, &status) == 0, "child died: status %#x", status);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x",
		      status);
	ck_assert_int_eq(res[0], -ENOMEM);
	ck_assert_uint_eq((size_t)res[1] % (2 * MiB), 0);
	ck_assert_uint_lt((size_t)res[1], 64 * MiB);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fault_errors");
	TCase *tc = tcase_create("errors");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, tmpfs_full, 0, 2);
	tcase_add_test(tc, cgroup_oom_kill);
	tcase_add_test(tc, cgroup_enomem);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
