/* SPDX-License-Identifier: MIT */
/*
 * Opening a directory that root is about to mount over, so that nobody
 * else can choose where the mount lands (hpr mount). The path is walked
 * one component at a time with openat(O_PATH | O_NOFOLLOW) from the
 * previous component's fd, creating missing components with mkdirat(), and
 * the caller acts on the final fd, never on the path again: a component
 * swapped for a symlink after the walk cannot redirect it.
 *
 * Unless the caller allows an unsafe path, the walk also refuses
 *  - a component that is a symlink (DIR -> /etc would put the mount on /etc);
 *  - a component owned by someone other than root or the caller;
 *  - a parent directory that others may write without the sticky bit
 *    (they could rename DIR away and put something else in its place
 *    before the next run; /tmp's mode 1777 is fine: the sticky bit keeps
 *    them from renaming entries that are not theirs).
 * A relative DIR is checked from the current directory down.
 */
#define _GNU_SOURCE
#include "hpr.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *owner_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
	return buf;
}

/* Is the component (path up to end) acceptable? 0, or fail()'s 1. */
static int check_component(const char *path, size_t end, const struct stat *st, bool last,
			   bool unsafe)
{
	char who[64];

	if (!S_ISDIR(st->st_mode))
		return fail("%.*s is not a directory", (int)end, path);
	if (unsafe)
		return 0;
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return fail("%.*s is owned by %s: another user decides what is there, so "
			    "the mount could land elsewhere. Use a directory owned by root, "
			    "or pass --unsafe-path if you trust that user",
			    (int)end, path, owner_name(st->st_uid, who, sizeof(who)));
	if (!last && (st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
		return fail("%.*s is writable by %s (mode %04o, no sticky bit): others could "
			    "replace what is under it. Use a path whose parents only root can "
			    "write, or pass --unsafe-path",
			    (int)end, path, st->st_mode & S_IWOTH ? "everyone" : "its group",
			    (unsigned)(st->st_mode & 07777));
	return 0;
}

static void safedir_init(struct safedir *d)
{
	memset(d, 0, sizeof(*d));
	d->fd = -1;
}

/* Remove what the walk made, deepest first; close everything. */
void safedir_undo(struct safedir *d)
{
	for (int i = d->n - 1; i >= 0; i--) {
		if (d->made[i] && i > 0)
			unlinkat(d->fds[i - 1], d->names[i], AT_REMOVEDIR);
	}
	safedir_close(d);
}

void safedir_close(struct safedir *d)
{
	for (int i = 0; i < d->n; i++) {
		if (d->fds[i] >= 0)
			close(d->fds[i]);
		free(d->names[i]);
	}
	d->n = 0;
	d->fd = -1;
}

/* Append a component fd; the last one is d->fd. */
static int push(struct safedir *d, int fd, const char *name, size_t len, bool made)
{
	if (d->n >= SAFEDIR_MAX_DEPTH) {
		close(fd);
		return fail("the path has more than %d components", SAFEDIR_MAX_DEPTH);
	}
	d->fds[d->n] = fd;
	d->names[d->n] = strndup(name, len);
	d->made[d->n] = made;
	d->n++;
	d->fd = fd;
	return 0;
}

int safedir_open(struct safedir *d, const char *path, bool unsafe)
{
	size_t n = strlen(path), i = 0;
	struct stat st;
	int fd, rc;

	safedir_init(d);
	fd = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail("cannot open %s: %s", path[0] == '/' ? "/" : ".", strerror(errno));
	if ((rc = push(d, fd, "", 0, false)))
		return rc;
	if (fstat(fd, &st) || check_component(path[0] == '/' ? "/" : ".", 1, &st, false, unsafe))
		goto bad;
	while (i < n) {
		size_t s, e;
		char name[256];
		bool made = false, last;

		while (i < n && path[i] == '/')
			i++;
		s = i;
		while (i < n && path[i] != '/')
			i++;
		e = i;
		if (e == s)
			break;
		while (i < n && path[i] == '/')
			i++;
		last = i >= n;
		if (e - s >= sizeof(name)) {
			fail("%.*s: name too long", (int)e, path);
			goto bad;
		}
		memcpy(name, path + s, e - s);
		name[e - s] = '\0';
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			fail("%s: '..' in the path is not followed; give the path without it",
			     path);
			goto bad;
		}
		fd = openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			if (!mkdirat(d->fd, name, 0755)) {
				made = true;
			} else if (errno != EEXIST) {
				int e2 = errno;

				if (e2 == EACCES || e2 == EPERM || e2 == EROFS)
					fail("cannot create %s: %s (mounting needs root anyway: "
					     "run it as root)",
					     path, strerror(e2));
				else
					fail("cannot create %s: %s", path, strerror(e2));
				goto bad;
			}
			fd = openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0) {
			fail("cannot open %.*s: %s", (int)e, path, strerror(errno));
			goto bad;
		}
		if (fstat(fd, &st)) {
			fail("cannot stat %.*s: %s", (int)e, path, strerror(errno));
			close(fd);
			goto bad;
		}
		if (S_ISLNK(st.st_mode)) {
			char to[4096];
			ssize_t l = readlinkat(fd, "", to, sizeof(to) - 1);

			close(fd);
			to[l > 0 ? l : 0] = '\0';
			if (!unsafe) {
				fail("%.*s is a symlink (to %s): refusing to follow it as root "
				     "(whoever can change it chooses where the mount lands). Give "
				     "the real directory, or pass --unsafe-path",
				     (int)e, path, to);
				goto bad;
			}
			fd = openat(d->fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &st)) {
				fail("cannot open %.*s: %s", (int)e, path, strerror(errno));
				if (fd >= 0)
					close(fd);
				goto bad;
			}
		}
		if (push(d, fd, name, strlen(name), made))
			goto bad;
		if (check_component(path, e, &st, last, unsafe))
			goto bad;
	}
	return 0;
bad:
	safedir_undo(d);
	return 1;
}
