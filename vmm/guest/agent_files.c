/*
 * agent_files.c — the guest agent's files: put ('w', through a temporary
 * file beside the path), get ('g', ranged, as the window allows), 'l'
 * lists a directory a bounded number of entries a turn, 'm' makes one at
 * once. A listing's 'N' frames draw on the channel's window like output.
 * Also the helpers the other file requests share: a request's path, an
 * errno's HTTP-like code.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LS_TURN		256	/* entries a listing sends per turn */
#define ENTRY_MAX	(64 + NAME_MAX)		/* an 'N' payload, at most */

/* The fields 'p' and 'm' of a file request; 0 when path is usable. */
static int
file_fields(const unsigned char *p, size_t len, char *path, size_t plen,
    unsigned *mode)
{
	size_t off = 0, l;
	const char *s;

	*path = '\0';
	*mode = 0644;
	while (off < len) {
		s = (const char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off)
			return -1;
		off += l + 1;
		if (s[0] == 'p')
			snprintf(path, plen, "%s", s + 1);
		else if (s[0] == 'm')
			*mode = (unsigned)strtoul(s + 1, NULL, 8) & 07777;
	}
	return path[0] == '/' ? 0 : -1;
}

/* 'w': a channel whose 'I' frames go to a temporary file beside path. */
void
file_put(uint32_t id, const unsigned char *p, size_t len)
{
	char path[4096], *slash;
	struct chan *c;
	unsigned mode;

	if (file_fields(p, len, path, sizeof(path), &mode) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if ((c = chan_new(id, CH_PUT)) == NULL) {
		failf(id, "out of memory");
		return;
	}
	slash = strrchr(path, '/');
	c->mode = mode;
	if ((c->path = strdup(path)) == NULL ||
	    asprintf(&c->tmp, "%.*s/.%s.berth-XXXXXX", (int)(slash - path),
	    path, slash + 1) < 0) {
		c->tmp = NULL;
		failf(id, "out of memory");
		chan_end(c);
		return;
	}
	if ((c->fd = mkostemp(c->tmp, O_CLOEXEC)) < 0) {
		failf(id, "%d cannot write %s: %s", errno == ENOENT ? 404 : 400,
		    path, strerror(errno));
		chan_end(c);
	}
}

/* 'I' of a put: written now (a regular file does not keep us waiting
 * long), so each is taken at once; empty: the end. */
void
put_data(struct chan *c, const unsigned char *p, size_t len)
{
	ssize_t n;

	if (len == 0) {
		if (c->ferr == 0 && (fchmod(c->fd, c->mode) < 0 ||
		    fsync(c->fd) < 0))
			c->ferr = errno;
		if (c->ferr == 0 && rename(c->tmp, c->path) < 0)
			c->ferr = errno;
		if (c->ferr != 0) {
			chan_end(c);	/* first: no temporary file to see */
			failf(c->id, "400 cannot write %s: %s", c->path,
			    strerror(c->ferr));
			return;
		}
		close_fd(&c->fd);	/* renamed: chan_end keeps it */
		stdin_ack(c);
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
		return;
	}
	c->iack += len;		/* taken: written, or dropped after an error */
	while (len > 0 && c->ferr == 0) {
		if ((n = write(c->fd, p, len)) < 0) {
			if (errno != EINTR)
				c->ferr = errno;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
}

/* 'g': a channel that sends the file as its window allows (get_step),
 * from 'o' on, at most 'n' bytes. */
void
file_get(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long off = 0, max = UINT64_MAX;
	const char *f[256];
	char path[4096];
	struct stat st;
	struct chan *c;
	int fd;

	if (req_fields(p, len, f) < 0 || req_num(f['o'], &off) < 0 ||
	    req_num(f['n'], &max) < 0) {
		failf(id, "400 malformed get: a field is not terminated, or "
		    "an offset or length not a decimal number");
		return;
	}
	if (f['p'] == NULL || f['p'][0] != '/' ||
	    strlen(f['p']) >= sizeof(path)) {
		failf(id, "400 the path must be absolute");
		return;
	}
	snprintf(path, sizeof(path), "%s", f['p']);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			failf(id, "404 no file %s in the guest", path);
		else
			failf(id, "400 cannot read %s: %s", path,
			    strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		failf(id, "400 %s is not a regular file", path);
		close(fd);
		return;
	}
	if ((c = chan_new(id, CH_GET)) == NULL ||
	    (c->path = strdup(path)) == NULL) {
		failf(id, "out of memory");
		close(fd);
		if (c != NULL)
			chan_end(c);
		return;
	}
	c->fd = fd;
	c->fleft = max;
	/* past what lseek takes is past any end: no bytes */
	if (off > 0 && (off > (unsigned long long)INT64_MAX ||
	    lseek(fd, (off_t)off, SEEK_SET) < 0))
		c->fleft = 0;
}

/*
 * One read of a get, as far as its credit goes. A regular file is always
 * readable: serve() calls this every turn while the channel has credit
 * (and does not sleep meanwhile), never while it has none.
 */
void
get_step(struct chan *c)
{
	char buf[BA_CHUNK];
	size_t want = BA_WINDOW - c->unacked;
	ssize_t n;

	if (c->fleft == 0) {
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
		return;
	}
	if (want == 0)
		return;
	if (want > sizeof(buf))
		want = sizeof(buf);
	if (want > c->fleft)
		want = (size_t)c->fleft;
	n = read(c->fd, buf, want);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0) {
		failf(c->id, "500 reading %s: %s", c->path, strerror(errno));
		chan_end(c);
	} else if (n == 0) {
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
	} else {
		(void)chan_send(c, BA_STDOUT, buf, (size_t)n);
		c->unacked += (size_t)n;
		c->fleft -= (uint64_t)n;
	}
}

/* The HTTP-like code of a failure: 404 a path is absent, 409 it is in
 * the way (exists, not empty, busy), 400 otherwise the request's fault,
 * 500 the guest's (out of space, I/O errors, ...). */
int
err_code(int e)
{
	switch (e) {
	case ENOENT:
		return 404;
	case EEXIST:
	case ENOTEMPTY:
	case EBUSY:
	case ETXTBSY:
		return 409;
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case ENAMETOOLONG:
	case ELOOP:
	case EACCES:
	case EPERM:
	case EROFS:
	case EXDEV:
	case EMLINK:
		return 400;
	default:
		return 500;
	}
}

/* An absolute path field into buf without its trailing slashes ("/"
 * stays); -1 when absent, relative or too long. */
int
req_path(const char *s, char *buf, size_t len)
{
	size_t n;

	if (s == NULL || s[0] != '/' || (n = strlen(s)) >= len)
		return -1;
	memcpy(buf, s, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	return 0;
}

static long long
mtime_ms(const struct stat *st)
{
	long long ms = (long long)st->st_mtim.tv_sec * 1000 +
	    st->st_mtim.tv_nsec / 1000000;

	return ms < 0 ? 0 : ms;
}

static const char *
file_type(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "link" :
	    S_ISFIFO(m) ? "fifo" : S_ISSOCK(m) ? "socket" : S_ISCHR(m) ?
	    "char" : S_ISBLK(m) ? "block" : "other";
}

/* 'l': a channel that sends the directory's entries as its window
 * allows (ls_step). */
void
ls_start(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long max = UINT64_MAX;
	const char *f[256];
	char path[4096];
	struct chan *c;
	DIR *d;
	int fd, e;

	if (req_fields(p, len, f) < 0 || req_num(f['n'], &max) < 0 ||
	    max == 0) {
		failf(id, "400 malformed list: a field is not terminated, or "
		    "'n' is not a number of at least 1");
		return;
	}
	if (req_path(f['p'], path, sizeof(path)) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
	    O_NONBLOCK)) < 0 || (d = fdopendir(fd)) == NULL) {
		e = errno;
		if (fd >= 0)
			close(fd);
		if (e == ENOENT)
			failf(id, "404 no directory %s in the guest", path);
		else if (e == ENOTDIR)
			failf(id, "400 %s is not a directory", path);
		else
			failf(id, "%d cannot list %s: %s", err_code(e), path,
			    strerror(e));
		return;
	}
	if ((c = chan_new(id, CH_LS)) == NULL) {
		failf(id, "out of memory");
		closedir(d);
		return;
	}
	c->dir = d;
	c->nleft = max;
}

/* Whether ls_step has something to do now (serve() does not sleep). */
int
ls_due(const struct chan *c)
{
	return c->nleft == 0 || BA_WINDOW - c->unacked >= ENTRY_MAX;
}

/*
 * A listing's next entries, 'N' each: at most LS_TURN a turn (a huge
 * directory does not hold the other channels up), only while the window
 * has room for the largest entry. Done (or at its max), 'X'.
 */
void
ls_step(struct chan *c)
{
	char buf[ENTRY_MAX];
	struct dirent *e;
	struct stat st;
	size_t nlen;
	int i, n;

	for (i = 0; i < LS_TURN && c->nleft > 0; i++) {
		if (BA_WINDOW - c->unacked < ENTRY_MAX)
			return;		/* waits for credit ('A') */
		errno = 0;
		if ((e = readdir(c->dir)) == NULL) {
			if (errno != 0) {
				failf(c->id, "500 reading the directory: %s",
				    strerror(errno));
				chan_end(c);
				return;
			}
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(c->dir), e->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;	/* gone meanwhile */
			memset(&st, 0, sizeof(st));	/* "other 0 0 0" */
		}
		n = snprintf(buf, sizeof(buf), "%s %o %llu %lld ",
		    file_type(st.st_mode), (unsigned)(st.st_mode & 07777),
		    (unsigned long long)st.st_size, mtime_ms(&st));
		nlen = strlen(e->d_name);
		(void)port_frame(BA_ENTRY, c->id, buf, (size_t)n, e->d_name,
		    nlen);
		c->unacked += (size_t)n + nlen;
		c->nleft--;
	}
	if (i < LS_TURN || c->nleft == 0) {
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
	}
}

/* A new directory with exactly mode (whatever the umask): made 0700,
 * then given its mode through a descriptor (not a path a link could
 * replace meanwhile). 0, or -1 with errno. */
static int
mkdir_mode(const char *path, unsigned mode)
{
	int fd, e;

	if (mkdir(path, 0700) < 0)
		return -1;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return -1;
	if (fchmod(fd, mode) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

/* mkdir_mode, where an existing directory (or a link to one) is no
 * error: 0, or -1 with errno (EEXIST: it exists, not a directory). */
static int
mkdir_exist(const char *path, unsigned mode)
{
	struct stat st;

	if (mkdir_mode(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -1;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	errno = EEXIST;
	return -1;
}

/* 'm': done here (a few system calls), answered at once. With 'r',
 * like mkdir -p: the parents made are 0755, the directory mode. */
void
fs_mkdir(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long mode = 0755;
	const char *f[256];
	char path[4096], *s, *end;
	int e;

	if (req_fields(p, len, f) < 0) {
		failf(id, "400 malformed mkdir: a field is not terminated");
		return;
	}
	if (f['m'] != NULL) {
		errno = 0;
		mode = strtoull(f['m'], &end, 8);
		if (!isdigit((unsigned char)f['m'][0]) || *end != '\0' ||
		    errno != 0 || mode > 07777) {
			failf(id, "400 the mode must be octal, at most 7777");
			return;
		}
	}
	if (req_path(f['p'], path, sizeof(path)) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if (f['r'] != NULL) {
		for (s = strchr(path + 1, '/'); s != NULL;
		    s = strchr(s + 1, '/')) {
			*s = '\0';
			if (mkdir_exist(path, 0755) < 0) {
				e = errno;
				if (e == EEXIST || e == ENOTDIR)
					failf(id, "400 %s is not a directory",
					    path);
				else
					failf(id, "%d cannot make %s: %s",
					    err_code(e), path, strerror(e));
				return;
			}
			*s = '/';
		}
		if (mkdir_exist(path, (unsigned)mode) < 0) {
			e = errno;
			if (e == EEXIST)
				failf(id, "409 %s exists, not a directory",
				    path);
			else
				failf(id, "%d cannot make %s: %s",
				    err_code(e), path, strerror(e));
			return;
		}
	} else if (mkdir_mode(path, (unsigned)mode) < 0) {
		e = errno;
		if (e == EEXIST)
			failf(id, "409 %s exists", path);
		else if (e == ENOENT)
			failf(id, "404 a parent of %s is missing", path);
		else if (e == ENOTDIR)
			failf(id, "400 a parent of %s is not a directory",
			    path);
		else
			failf(id, "%d cannot make %s: %s", err_code(e), path,
			    strerror(e));
		return;
	}
	(void)port_frame(BA_EXIT, id, "exit 0", 6, NULL, 0);
}
