/*
 * agent_watch.c — the guest agent's 'V': a directory watched with
 * inotify (with 'r', its subdirectories too). A watch's 'Y' frames draw
 * on the channel's window like output: a watch nobody acknowledges stops
 * reading its inotify descriptor, the kernel's queue overflows, and that
 * is told.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define EVENT_MAX	(32 + BA_EVENT_PATH)	/* a 'Y' payload, at most */
#define WATCH_MAX	65536	/* inotify watches of one watch channel */
#define SCAN_TURN	1024	/* directory entries a watch scans per turn */
#define WBUF		(16 * 1024)	/* a watch's inotify reads */
/* A watched directory's path, at most: any event's path in it (the
 * directory's, '/', a name) fits in BA_EVENT_PATH. */
#define WDIR_PATH	(BA_EVENT_PATH - 1 - NAME_MAX)
#define WATCH_MASK	(IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | \
			 IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF)

/*
 * A watch: one inotify descriptor, a watch per directory (with 'r', the
 * subdirectories too, found by a scan in bounded steps and added as they
 * are made or moved in). Events are read only while the window has room
 * for them: a host that takes none leaves them in the kernel's queue,
 * which overflows (told as "overflow" once read again).
 */
struct wdir {
	struct wdir *next;	/* in its bucket */
	int wd;
	size_t len;
	char path[];		/* absolute, at most WDIR_PATH bytes */
};

struct watch {
	int recursive;
	int top;		/* the watched directory's wd */
	char *toppath;
	struct wdir **tab;	/* by wd */
	size_t ntab, n;		/* buckets (a power of 2), watches */
	unsigned char *buf;	/* events read, from boff to blen not yet
				 * handled */
	size_t boff, blen;
	char **stack;		/* directories to scan for subdirectories */
	size_t nstack, capstack;
	DIR *sd;		/* the one being scanned, at spath */
	char *spath;
	int rescan;		/* an overflow: known ones are scanned again */
	int ready;		/* "ready" sent: the first scan is done */
};

void
watch_free(struct watch *w)
{
	struct wdir *d, *next;
	size_t i;

	if (w == NULL)
		return;
	for (i = 0; i < w->ntab; i++)
		for (d = w->tab[i]; d != NULL; d = next) {
			next = d->next;
			free(d);
		}
	free(w->tab);
	while (w->nstack > 0)
		free(w->stack[--w->nstack]);
	free(w->stack);
	if (w->sd != NULL)
		closedir(w->sd);
	free(w->spath);
	free(w->toppath);
	free(w->buf);
	free(w);
}

static struct wdir *
wdir_find(const struct watch *w, int wd)
{
	struct wdir *d;

	for (d = w->tab[(unsigned)wd & (w->ntab - 1)]; d != NULL; d = d->next)
		if (d->wd == wd)
			return d;
	return NULL;
}

static int
wdir_add(struct watch *w, int wd, const char *path, size_t len)
{
	struct wdir *d, **tab, *next;
	size_t i, ntab;

	if (w->n >= 2 * w->ntab) {
		ntab = 2 * w->ntab;
		if ((tab = calloc(ntab, sizeof(*tab))) == NULL)
			return -1;
		for (i = 0; i < w->ntab; i++)
			for (d = w->tab[i]; d != NULL; d = next) {
				next = d->next;
				d->next = tab[(unsigned)d->wd & (ntab - 1)];
				tab[(unsigned)d->wd & (ntab - 1)] = d;
			}
		free(w->tab);
		w->tab = tab;
		w->ntab = ntab;
	}
	if ((d = malloc(sizeof(*d) + len + 1)) == NULL)
		return -1;
	d->wd = wd;
	d->len = len;
	memcpy(d->path, path, len + 1);
	d->next = w->tab[(unsigned)wd & (w->ntab - 1)];
	w->tab[(unsigned)wd & (w->ntab - 1)] = d;
	w->n++;
	return 0;
}

/* Forgets wd (the kernel dropped it); with rmfd >= 0, drops it there
 * too. */
static void
wdir_del(struct watch *w, int wd, int rmfd)
{
	struct wdir **dp, *d;

	for (dp = &w->tab[(unsigned)wd & (w->ntab - 1)]; (d = *dp) != NULL;
	    dp = &d->next)
		if (d->wd == wd) {
			*dp = d->next;
			if (rmfd >= 0)
				(void)inotify_rm_watch(rmfd, wd);
			free(d);
			w->n--;
			return;
		}
}

/* A directory moved away: its watches and its subdirectories' go (their
 * paths are wrong now; where it went, if watched, it is watched anew). */
static void
watch_forget(struct chan *c, const char *path)
{
	struct watch *w = c->w;
	struct wdir *d, *next;
	size_t i, len = strlen(path);

	for (i = 0; i < w->ntab; i++)
		for (d = w->tab[i]; d != NULL; d = next) {
			next = d->next;
			if (d->wd != w->top && d->len >= len &&
			    memcmp(d->path, path, len) == 0 &&
			    (d->path[len] == '\0' || d->path[len] == '/'))
				wdir_del(w, d->wd, c->fd);
		}
}

static void
scan_push(struct watch *w, const char *path)
{
	char **s, *p;
	size_t cap;

	if (w->nstack == w->capstack) {
		cap = w->capstack ? 2 * w->capstack : 64;
		if ((s = realloc(w->stack, cap * sizeof(*s))) == NULL)
			return;		/* not scanned: out of memory */
		w->stack = s;
		w->capstack = cap;
	}
	if ((p = strdup(path)) != NULL)
		w->stack[w->nstack++] = p;
}

/* dir + '/' + name into buf (of BA_EVENT_PATH + 1 bytes at least); -1
 * when too long. */
static int
path_join(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir,
	    name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* 'Y' "<event> <dir> <cookie> <path>". */
static void
watch_send(struct chan *c, const char *ev, int dir, uint32_t cookie,
    const char *path)
{
	char head[64];
	size_t plen = strlen(path);
	int n;

	n = snprintf(head, sizeof(head), "%s %d %u ", ev, dir, cookie);
	(void)port_frame(BA_EVENT, c->id, head, (size_t)n, path, plen);
	c->unacked += (size_t)n + plen;
}

/*
 * A watch on the directory path (sub: a subdirectory found, not followed
 * if a link). A new one is scanned for subdirectories (recursive); a
 * known one only in a rescan and at its own path (a bind mount of a
 * directory above is not a loop). 0, or -1 when it is not watched (the
 * caller says "unwatched"); one gone meanwhile is no failure.
 */
static int
watch_add(struct chan *c, const char *path, int sub)
{
	struct watch *w = c->w;
	struct wdir *d;
	size_t len = strlen(path);
	int wd;

	if (len > WDIR_PATH || w->n >= WATCH_MAX)
		return -1;
	if ((wd = inotify_add_watch(c->fd, path, WATCH_MASK | IN_ONLYDIR |
	    (sub ? IN_DONT_FOLLOW : 0))) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	if ((d = wdir_find(w, wd)) != NULL) {
		if (w->rescan && w->recursive && d->len == len &&
		    memcmp(d->path, path, len) == 0)
			scan_push(w, path);
		return 0;
	}
	if (wdir_add(w, wd, path, len) < 0) {
		(void)inotify_rm_watch(c->fd, wd);
		return -1;
	}
	if (w->recursive)
		scan_push(w, path);
	return 0;
}

/* 'V': a channel that sends the directory's events (watch_step). */
void
watch_start(uint32_t id, const unsigned char *p, size_t len)
{
	const char *f[256];
	char path[4096];
	struct watch *w;
	struct stat st;
	struct chan *c;
	int fd, wd;

	if (req_fields(p, len, f) < 0) {
		failf(id, "400 malformed watch: a field is not terminated");
		return;
	}
	if (req_path(f['p'], path, sizeof(path)) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if (strlen(path) > WDIR_PATH) {
		failf(id, "400 the path is too long to watch (%d bytes at "
		    "most)", WDIR_PATH);
		return;
	}
	if (stat(path, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			failf(id, "404 no directory %s in the guest", path);
		else
			failf(id, "%d cannot watch %s: %s", err_code(errno),
			    path, strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		failf(id, "400 %s is not a directory", path);
		return;
	}
	if ((fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		failf(id, "%d no inotify: %s", errno == EMFILE ||
		    errno == ENFILE ? 429 : 500, strerror(errno));
		return;
	}
	if ((wd = inotify_add_watch(fd, path, WATCH_MASK | IN_ONLYDIR)) < 0) {
		failf(id, "%d cannot watch %s: %s", errno == ENOSPC ? 429 :
		    err_code(errno), path, errno == ENOSPC ?
		    "out of inotify watches" : strerror(errno));
		close(fd);
		return;
	}
	if ((c = chan_new(id, CH_WATCH)) == NULL ||
	    (c->w = w = calloc(1, sizeof(*w))) == NULL ||
	    (w->tab = calloc(64, sizeof(*w->tab))) == NULL ||
	    (w->buf = malloc(WBUF)) == NULL ||
	    (w->toppath = strdup(path)) == NULL) {
		failf(id, "out of memory");
		close(fd);
		if (c != NULL)
			chan_end(c);
		return;
	}
	c->fd = fd;
	w->ntab = 64;
	w->top = wd;
	w->recursive = f['r'] != NULL;
	if (wdir_add(w, wd, path, strlen(path)) < 0) {
		failf(id, "out of memory");
		chan_end(c);
		return;
	}
	if (w->recursive)
		scan_push(w, path);
}

/* One inotify event of a watch: its 'Y' frames (two at most). */
static void
watch_event(struct chan *c, const struct inotify_event *ev)
{
	struct watch *w = c->w;
	char path[BA_EVENT_PATH + 1];
	const char *what;
	struct wdir *d;
	uint32_t m = ev->mask;
	int isdir = (m & IN_ISDIR) != 0, unwatched = 0;

	if (m & IN_Q_OVERFLOW) {
		watch_send(c, "overflow", 1, 0, w->toppath);
		if (w->recursive) {
			/* the directories made meanwhile are looked for */
			w->rescan = 1;
			scan_push(w, w->toppath);
		}
		return;
	}
	if ((d = wdir_find(w, ev->wd)) == NULL)
		return;		/* dropped meanwhile */
	if (ev->len == 0 || ev->name[0] == '\0') {
		/* the watched directory's own: only the top one's are
		 * told (a subdirectory's are its parent's, with its name) */
		if (ev->wd == w->top && (m & (IN_DELETE_SELF | IN_IGNORED |
		    IN_UNMOUNT))) {
			watch_send(c, "delete_self", 1, 0, w->toppath);
			(void)chan_send(c, BA_EXIT, "exit 0", 6);
			chan_end(c);
		} else if (ev->wd == w->top && (m & IN_ATTRIB))
			watch_send(c, "attrib", 1, 0, w->toppath);
		else if (m & IN_IGNORED)
			wdir_del(w, ev->wd, -1);
		return;
	}
	if (path_join(path, sizeof(path), d->path, ev->name) < 0)
		return;		/* cannot be: d->path is short enough */
	if (m & IN_CREATE)
		what = "create";
	else if (m & IN_MODIFY)
		what = "modify";
	else if (m & IN_ATTRIB)
		what = "attrib";
	else if (m & IN_DELETE)
		what = "delete";
	else if (m & IN_MOVED_FROM)
		what = "move_from";
	else if (m & IN_MOVED_TO)
		what = "move_to";
	else
		return;
	if (isdir && w->recursive) {
		/* a new directory is watched before its event goes: the
		 * host may rely on its events from then on */
		if (m & IN_MOVED_FROM)
			watch_forget(c, path);
		else if (m & (IN_CREATE | IN_MOVED_TO))
			unwatched = watch_add(c, path, 1) < 0;
	}
	watch_send(c, what, isdir, m & (IN_MOVED_FROM | IN_MOVED_TO) ?
	    ev->cookie : 0, path);
	if (unwatched)
		watch_send(c, "unwatched", 1, 0, path);
}

/* Reads a watch's inotify descriptor (serve() polls it only while its
 * buffer is handled and the window has room). */
void
watch_read(struct chan *c)
{
	struct watch *w = c->w;
	ssize_t n;

	if (w->boff < w->blen)
		return;
	n = read(c->fd, w->buf, WBUF);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		failf(c->id, "500 reading inotify: %s", n < 0 ?
		    strerror(errno) : "end of file");
		chan_end(c);
		return;
	}
	w->boff = 0;
	w->blen = (size_t)n;
}

/* One entry of a scan for subdirectories to watch; 0 when there is no
 * more to scan. */
static int
watch_scan_one(struct chan *c)
{
	struct watch *w = c->w;
	char path[BA_EVENT_PATH + 1];
	struct dirent *e;
	struct stat st;
	int fd;

	if (w->sd == NULL) {
		if (w->nstack == 0) {
			w->rescan = 0;
			return 0;
		}
		w->spath = w->stack[--w->nstack];
		fd = open(w->spath, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
		    O_NONBLOCK | (strcmp(w->spath, w->toppath) != 0 ?
		    O_NOFOLLOW : 0));
		if (fd < 0 || (w->sd = fdopendir(fd)) == NULL) {
			if (fd >= 0)
				close(fd);
			free(w->spath);
			w->spath = NULL;
		}
		return 1;
	}
	if ((e = readdir(w->sd)) == NULL) {
		closedir(w->sd);
		w->sd = NULL;
		free(w->spath);
		w->spath = NULL;
		return 1;
	}
	if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
		return 1;
	if (e->d_type != DT_DIR && (e->d_type != DT_UNKNOWN ||
	    fstatat(dirfd(w->sd), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode)))
		return 1;
	if (path_join(path, sizeof(path), w->spath, e->d_name) == 0 &&
	    watch_add(c, path, 1) < 0)
		watch_send(c, "unwatched", 1, 0, path);
	return 1;
}

static int
watch_room(const struct chan *c, size_t frames)
{
	return BA_WINDOW - c->unacked >= frames * EVENT_MAX;
}

/* Whether watch_step has something to do now (serve() does not sleep);
 * reading inotify is for the poll. */
int
watch_due(const struct chan *c)
{
	const struct watch *w = c->w;

	return (w->boff < w->blen && watch_room(c, 2)) ||
	    ((w->sd != NULL || w->nstack > 0 || !w->ready) &&
	    watch_room(c, 1));
}

/* Whether serve() polls the watch's inotify descriptor: its buffer
 * handled and room in the window for what a read brings. */
int
watch_polls(const struct chan *c)
{
	return c->w->boff == c->w->blen && watch_room(c, 2);
}

/* The events read, then the scan, as the window allows (bounded a
 * turn); once the first scan is done, "ready". */
void
watch_step(struct chan *c)
{
	struct watch *w = c->w;
	const struct inotify_event *ev;
	int i;

	while (!c->dead && w->boff < w->blen && watch_room(c, 2)) {
		ev = (const struct inotify_event *)(const void *)(w->buf +
		    w->boff);
		w->boff += sizeof(*ev) + ev->len;
		watch_event(c, ev);
	}
	for (i = 0; i < SCAN_TURN && !c->dead && watch_room(c, 1); i++)
		if (!watch_scan_one(c))
			break;
	if (!c->dead && !w->ready && w->sd == NULL && w->nstack == 0 &&
	    watch_room(c, 1)) {
		/* every directory found is watched: what happens from now
		 * on is told */
		w->ready = 1;
		watch_send(c, "ready", 1, 0, w->toppath);
	}
}
