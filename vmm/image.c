/*
 * image.c — a captured migration stream split into a RAM image and the
 * rest.
 *
 * A fork's capture is a QEMU 7.2 precopy stream that carries the guest's
 * RAM. Loading it costs every fork a copy of that RAM, faulted in page by
 * page (seconds for a 1 GiB guest on a host whose page faults are dear).
 * Split once, the guest's main RAM block becomes an image in a memfd that
 * every fork maps private, copy-on-write, as clones map the ready
 * snapshot's; the rest (the small ROM and firmware blocks, every device)
 * stays a stream of the same format with none of that block's pages, tens
 * of KiB.
 *
 * The stream, as QEMU 7.2 writes it to a file (migration/savevm.c, ram.c):
 *   "QEVM" be32 3, a configuration section (0x07 ...)
 *   0x01 START be32 id, "ram" be32 instance be32 version,
 *        be64 total|MEM_SIZE, per block: len idstr be64 length, be64 EOS
 *   0x02 PART / 0x03 END be32 id, page records up to be64 EOS
 *   (each section then 0x7e be32 id when section footers are on)
 *   0x04 FULL ... devices, 0x00 EOF, a JSON description
 * A page record: be64 offset|flags, the block's idstr unless CONTINUE,
 * then one byte (ZERO: the page is filled with it) or the page (PAGE).
 * Anything else (compression, XBZRLE, RDMA hooks, an unexpected section)
 * is refused: the caller loads the stream whole instead.
 *
 * It runs in a child process (the caller forks): no allocation but mmap,
 * no stdio, nothing but system calls. It may run while QEMU still writes
 * the stream (a fork's capture): at the file's end it waits for more
 * until the writer says the stream is complete (a descriptor that turns
 * readable), so the split ends moments after the capture does.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"

#define PG		4096u
#define F_ZERO		0x02u
#define F_MEMSIZE	0x04u
#define F_PAGE		0x08u
#define F_EOS		0x10u
#define F_CONT		0x20u
#define F_KNOWN		(F_ZERO | F_PAGE | F_EOS | F_CONT)
#define BUF		(1u << 20)
#define RUN		(1u << 20)	/* image writes coalesced up to this */
#define FOLLOW_MS	2		/* a followed stream's end, looked at
					 * again after this */

struct split {
	int in, out, img;
	int done;			/* readable once the stream is
					 * complete; -1: it is */
	uint64_t img_size;
	const char *block;		/* the image's block */
	unsigned char *ib, *ob, *run;	/* BUF, BUF, RUN */
	size_t ipos, ilen, olen;
	uint64_t run_off;
	size_t run_len;
	unsigned char *written;		/* a bit per image page */
	int footers;
	char cur[256];			/* the block pages CONTINUE, across
					 * sections as QEMU's loader keeps it */
	char *err;
	size_t errlen;
};

static int
fail(struct split *s, int e, const char *what)
{
	snprintf(s->err, s->errlen, "%s", what);
	return -e;
}

/* read(2) of the stream; at its end, while it may still grow (*done >=
 * 0), wait for more or for the word that it is complete (then what is
 * there is read once more: 0 is its end). */
static ssize_t
rd_more(int in, void *b, size_t n, int *done)
{
	struct pollfd p;
	ssize_t r;

	for (;;) {
		do
			r = read(in, b, n);
		while (r < 0 && errno == EINTR);
		if (r != 0 || *done < 0)
			return r;
		p.fd = *done;
		p.events = POLLIN;
		if (poll(&p, 1, FOLLOW_MS) > 0)
			*done = -1;
	}
}

static int
rd(struct split *s, void *p, size_t n)
{
	unsigned char *d = p;
	ssize_t r;

	while (n > 0) {
		if (s->ipos == s->ilen) {
			r = rd_more(s->in, s->ib, BUF, &s->done);
			if (r < 0)
				return fail(s, errno, "reading the stream failed");
			if (r == 0)
				return fail(s, EPROTO, "the stream ends early");
			s->ipos = 0;
			s->ilen = (size_t)r;
		}
		size_t k = s->ilen - s->ipos < n ? s->ilen - s->ipos : n;

		if (d != NULL) {
			memcpy(d, s->ib + s->ipos, k);
			d += k;
		}
		s->ipos += k;
		n -= k;
	}
	return 0;
}

static int
peek(struct split *s, unsigned char *c)
{
	int rc;

	if (s->ipos == s->ilen) {
		if ((rc = rd(s, c, 1)) < 0)
			return rc;
		s->ipos--;		/* still in the buffer */
		return 0;
	}
	*c = s->ib[s->ipos];
	return 0;
}

static int
oflush(struct split *s)
{
	size_t o = 0;
	ssize_t w;

	while (o < s->olen) {
		if ((w = write(s->out, s->ob + o, s->olen - o)) < 0) {
			if (errno == EINTR)
				continue;
			return fail(s, errno, "writing the device stream failed");
		}
		o += (size_t)w;
	}
	s->olen = 0;
	return 0;
}

static int
wr(struct split *s, const void *p, size_t n)
{
	const unsigned char *q = p;
	int rc;

	while (n > 0) {
		if (s->olen == BUF && (rc = oflush(s)) < 0)
			return rc;
		size_t k = BUF - s->olen < n ? BUF - s->olen : n;

		memcpy(s->ob + s->olen, q, k);
		s->olen += k;
		q += k;
		n -= k;
	}
	return 0;
}

static int
rd8(struct split *s, unsigned char *v)
{
	return rd(s, v, 1);
}

static int
rd32(struct split *s, uint32_t *v)
{
	unsigned char b[4];
	int rc;

	if ((rc = rd(s, b, 4)) < 0)
		return rc;
	*v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	    (uint32_t)b[2] << 8 | b[3];
	return 0;
}

static int
rd64(struct split *s, uint64_t *v)
{
	uint32_t hi, lo;
	int rc;

	if ((rc = rd32(s, &hi)) < 0 || (rc = rd32(s, &lo)) < 0)
		return rc;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

static int
wr32(struct split *s, uint32_t v)
{
	unsigned char b[4] = { v >> 24, v >> 16, v >> 8, v };

	return wr(s, b, 4);
}

static int
wr64(struct split *s, uint64_t v)
{
	int rc;

	if ((rc = wr32(s, (uint32_t)(v >> 32))) < 0)
		return rc;
	return wr32(s, (uint32_t)v);
}

/* a length-prefixed id string, read (and copied out when out != NULL) */
static int
rdid(struct split *s, char id[256], int copy)
{
	unsigned char l;
	int rc;

	if ((rc = rd8(s, &l)) < 0 || (rc = rd(s, id, l)) < 0)
		return rc;
	id[l] = '\0';
	if (copy && ((rc = wr(s, &l, 1)) < 0 || (rc = wr(s, id, l)) < 0))
		return rc;
	return 0;
}

static int
run_flush(struct split *s)
{
	size_t o = 0;
	ssize_t w;

	while (o < s->run_len) {
		if ((w = pwrite(s->img, s->run + o, s->run_len - o,
		    (off_t)(s->run_off + o))) < 0) {
			if (errno == EINTR)
				continue;
			return fail(s, errno, "writing the RAM image failed");
		}
		o += (size_t)w;
	}
	s->run_len = 0;
	return 0;
}

/* one page of the image's block: its bytes, or a fill */
static int
img_page(struct split *s, uint64_t off, int fill, int is_page)
{
	uint64_t pg = off / PG;
	unsigned char *dst;
	int rc;

	if (off % PG != 0 || off + PG > s->img_size)
		return fail(s, EPROTO, "a page outside the RAM block");
	if (!is_page && fill == 0 &&
	    !(s->written[pg / 8] & (1u << (pg % 8)))) {
		return 0;	/* never written: the image reads zero */
	}
	if (s->run_len > 0 && (s->run_off + s->run_len != off ||
	    s->run_len == RUN) && (rc = run_flush(s)) < 0)
		return rc;
	if (s->run_len == 0)
		s->run_off = off;
	dst = s->run + s->run_len;
	if (is_page) {
		if ((rc = rd(s, dst, PG)) < 0)
			return rc;
	} else
		memset(dst, fill, PG);
	s->run_len += PG;
	s->written[pg / 8] |= (unsigned char)(1u << (pg % 8));
	return 0;
}

/* One START/PART/END section's page records, after its id: the image's
 * pages to the image, the others to the output (each with its block's
 * name: nothing CONTINUEs across what was taken out). */
static int
pages(struct split *s, unsigned char type, uint32_t sid)
{
	char *cur = s->cur, id[256];
	uint64_t h, off;
	unsigned flags;
	unsigned char fill = 0, ft[5];
	int rc, any = 0, mine;

	for (;;) {
		if ((rc = rd64(s, &h)) < 0)
			return rc;
		flags = (unsigned)(h & (PG - 1));
		off = h & ~(uint64_t)(PG - 1);
		if (flags & ~F_KNOWN)
			return fail(s, ENOTSUP, "a page record this split does "
			    "not know (compression, XBZRLE or RDMA)");
		if (flags & F_EOS)
			break;
		if (!(flags & F_CONT)) {
			if ((rc = rdid(s, id, 0)) < 0)
				return rc;
			memcpy(cur, id, sizeof(s->cur));
		} else if (cur[0] == '\0')
			return fail(s, EPROTO, "a page record continues no block");
		mine = strcmp(cur, s->block) == 0;
		if (flags & F_ZERO) {
			if ((rc = rd8(s, &fill)) < 0)
				return rc;
		} else if (!(flags & F_PAGE))
			return fail(s, EPROTO, "a page record with no page");
		if (mine) {
			if ((rc = img_page(s, off, fill, (flags & F_PAGE) != 0)) < 0)
				return rc;
			continue;
		}
		if (!any) {
			any = 1;
			if ((rc = wr(s, &type, 1)) < 0 || (rc = wr32(s, sid)) < 0)
				return rc;
		}
		{
			unsigned char l = (unsigned char)strlen(cur);

			if ((rc = wr64(s, off | (flags & ~F_CONT))) < 0 ||
			    (rc = wr(s, &l, 1)) < 0 || (rc = wr(s, cur, l)) < 0)
				return rc;
		}
		if (flags & F_ZERO)
			rc = wr(s, &fill, 1);
		else {
			unsigned char pg[PG];

			if ((rc = rd(s, pg, PG)) == 0)
				rc = wr(s, pg, PG);
		}
		if (rc < 0)
			return rc;
	}
	/* an END is written even with no page of its own: the loader
	 * expects the section; an empty PART is left out */
	if (!any && type == 0x03) {
		any = 1;
		if ((rc = wr(s, &type, 1)) < 0 || (rc = wr32(s, sid)) < 0)
			return rc;
	}
	if (any && (rc = wr64(s, F_EOS)) < 0)
		return rc;
	if (s->footers) {
		if ((rc = rd(s, ft, 5)) < 0)
			return rc;
		if (ft[0] != 0x7e)
			return fail(s, EPROTO, "a section without its footer");
		if (any && (rc = wr(s, ft, 5)) < 0)
			return rc;
	}
	return 0;
}

/* s for a split or a join, and its buffers: in, out, run, then the
 * image's page bitmap (a split's) */
static int
split_init(struct split *s, int in, int done, int out, int img,
    uint64_t img_size, const char *block, int bitmap, char *err,
    size_t errlen, size_t *mapped)
{
	memset(s, 0, sizeof(*s));
	s->in = in;
	s->done = done;
	s->out = out;
	s->img = img;
	s->img_size = img_size;
	s->block = block;
	s->err = err;
	s->errlen = errlen;
	*mapped = 2 * BUF + RUN + (bitmap ? (size_t)((img_size / PG + 7) / 8) :
	    0);
	s->ib = mmap(NULL, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (s->ib == MAP_FAILED)
		return fail(s, errno, "no memory for the split's buffers");
	s->ob = s->ib + BUF;
	s->run = s->ob + BUF;
	s->written = s->run + RUN;
	return 0;
}

/* The stream's header and configuration section, copied; up to the
 * first section. */
static int
head(struct split *s)
{
	unsigned char c, hdr[8];
	char id[256];
	uint32_t u32;
	int rc;

	if ((rc = rd(s, hdr, 8)) < 0)
		return rc;
	if (memcmp(hdr, "QEVM\0\0\0\3", 8) != 0)
		return fail(s, EPROTO, "not a QEMU migration stream of version 3");
	if ((rc = wr(s, hdr, 8)) < 0)
		return rc;
	/* the configuration section: the machine's name, and subsections
	 * this split does not read: copied up to the first section */
	if ((rc = peek(s, &c)) < 0)
		return rc;
	if (c != 0x07)
		return 0;
	(void)rd8(s, &c);
	if ((rc = rd32(s, &u32)) < 0 || u32 > 255 || (rc = rd(s, id, u32)) < 0)
		return rc < 0 ? rc : fail(s, EPROTO, "a bad configuration section");
	if ((rc = wr(s, &c, 1)) < 0 || (rc = wr32(s, u32)) < 0 ||
	    (rc = wr(s, id, u32)) < 0 || (rc = peek(s, &c)) < 0)
		return rc;
	if (c == 0x05)
		return fail(s, ENOTSUP, "a configuration with subsections");
	return 0;
}

/* ram's START section after its type byte, copied: *sid its id; the
 * image's block must be in its list, of the image's size. */
static int
ram_start(struct split *s, uint32_t *sid)
{
	unsigned char c, l;
	char id[256];
	uint32_t inst, ver;
	uint64_t total, len;
	int rc, found = 0;

	if ((rc = rd32(s, sid)) < 0 || (rc = rdid(s, id, 0)) < 0 ||
	    (rc = rd32(s, &inst)) < 0 || (rc = rd32(s, &ver)) < 0)
		return rc;
	if (strcmp(id, "ram") != 0)
		return fail(s, ENOTSUP, "an iterative section other than ram");
	c = 0x01;
	l = 3;
	if ((rc = wr(s, &c, 1)) < 0 || (rc = wr32(s, *sid)) < 0 ||
	    (rc = wr(s, &l, 1)) < 0 || (rc = wr(s, "ram", 3)) < 0 ||
	    (rc = wr32(s, inst)) < 0 || (rc = wr32(s, ver)) < 0)
		return rc;
	/* the block list, copied as it is */
	if ((rc = rd64(s, &total)) < 0)
		return rc;
	if (!(total & F_MEMSIZE))
		return fail(s, EPROTO, "ram's set-up without the RAM size");
	if ((rc = wr64(s, total)) < 0)
		return rc;
	total &= ~(uint64_t)(PG - 1);
	while (total > 0) {
		if ((rc = rdid(s, id, 1)) < 0 || (rc = rd64(s, &len)) < 0 ||
		    (rc = wr64(s, len)) < 0)
			return rc;
		if (len > total)
			return fail(s, EPROTO, "RAM blocks larger than the RAM");
		if (strcmp(id, s->block) == 0) {
			if (len != s->img_size)
				return fail(s, EPROTO, "the RAM block's size is "
				    "not the image's");
			found = 1;
		}
		total -= len;
	}
	if (!found)
		return fail(s, EPROTO, "no RAM block of that name");
	if ((rc = rd64(s, &len)) < 0)
		return rc;
	if (len != F_EOS)
		return fail(s, ENOTSUP, "ram's set-up carries more than the "
		    "block list (postcopy or x-ignore-shared)");
	if ((rc = wr64(s, len)) < 0 || (rc = peek(s, &c)) < 0)
		return rc;
	s->footers = c == 0x7e;
	if (s->footers) {
		unsigned char ft[5];

		if ((rc = rd(s, ft, 5)) < 0 || (rc = wr(s, ft, 5)) < 0)
			return rc;
	}
	return 0;
}

/* The rest of the stream (devices, the end, the description), copied as
 * it is. */
static int
copy_rest(struct split *s)
{
	ssize_t r;
	int rc;

	if ((rc = wr(s, s->ib + s->ipos, s->ilen - s->ipos)) < 0)
		return rc;
	s->ipos = s->ilen;
	for (;;) {
		if ((rc = oflush(s)) < 0)
			return rc;
		if ((r = rd_more(s->in, s->ob, BUF, &s->done)) < 0)
			return fail(s, errno, "reading the stream failed");
		if (r == 0)
			return 0;
		s->olen = (size_t)r;
	}
}

int
vmm_stream_split(int in, int done, int out, int img, uint64_t img_size,
    const char *block, char *err, size_t errlen)
{
	struct split s;
	unsigned char c;
	uint32_t sid, ram_sid = 0;
	size_t mapped;
	int rc, started = 0;

	if ((rc = split_init(&s, in, done, out, img, img_size, block, 1, err,
	    errlen, &mapped)) < 0)
		return rc;
	if ((rc = head(&s)) < 0)
		goto out;
	for (;;) {
		if ((rc = rd8(&s, &c)) < 0)
			goto out;
		if (c == 0x01) {		/* START */
			if (started) {
				rc = fail(&s, ENOTSUP, "a second iterative "
				    "section");
				goto out;
			}
			if ((rc = ram_start(&s, &ram_sid)) < 0)
				goto out;
			started = 1;
		} else if (c == 0x02 || c == 0x03) {	/* PART, END */
			if (!started || (rc = rd32(&s, &sid)) < 0 ||
			    sid != ram_sid) {
				if (rc == 0)
					rc = fail(&s, ENOTSUP, "a section this "
					    "split does not know");
				goto out;
			}
			if ((rc = pages(&s, c, sid)) < 0)
				goto out;
			if (c == 0x03)
				break;
		} else {
			rc = fail(&s, ENOTSUP, "a section before ram's end "
			    "this split does not know");
			goto out;
		}
	}
	if ((rc = run_flush(&s)) < 0)
		goto out;
	rc = copy_rest(&s);
out:
	munmap(s.ib, mapped);
	return rc;
}

/*
 * The inverse: a split's devices' stream (in) and its RAM image (img)
 * joined into one stream that carries the RAM again (out), as a fork's
 * capture or a checkpoint needs it. The image's pages go into one PART
 * section of ram right after its START, each page that is neither a
 * hole nor all zero (what the loader then does not write stays zero:
 * a fork's anonymous memory, a checkpoint's split image); the rest is
 * copied as it is (the split named the block in every record of it, so
 * nothing there CONTINUEs from the pages put in).
 */
int
vmm_stream_join(int in, int out, int img, uint64_t img_size,
    const char *block, char *err, size_t errlen)
{
	static const unsigned char zero[PG];
	struct split s;
	unsigned char c, l = (unsigned char)strlen(block);
	uint32_t sid;
	uint64_t off, end, p, k;
	size_t mapped, i;
	off_t d, h;
	ssize_t r;
	int rc, any = 0;

	if ((rc = split_init(&s, in, -1, out, img, img_size, block, 0, err,
	    errlen, &mapped)) < 0)
		return rc;
	if ((rc = head(&s)) < 0 || (rc = rd8(&s, &c)) < 0)
		goto out;
	if (c != 0x01) {
		rc = fail(&s, EPROTO, "the devices' stream does not begin with "
		    "ram");
		goto out;
	}
	if ((rc = ram_start(&s, &sid)) < 0)
		goto out;
	for (off = 0; off < img_size; off = end) {
		/* the image's data, hole by hole (a file system that cannot
		 * say: all of it is read) */
		if ((d = lseek(img, (off_t)off, SEEK_DATA)) < 0) {
			if (errno == ENXIO)
				break;
			d = (off_t)off;
			h = (off_t)img_size;
		} else if ((h = lseek(img, d, SEEK_HOLE)) < 0)
			h = (off_t)img_size;
		off = (uint64_t)d & ~(uint64_t)(PG - 1);
		end = (uint64_t)h < img_size ? (uint64_t)h : img_size;
		for (p = off; p < end; p += k) {
			k = end - p < RUN ? end - p : RUN;
			if ((r = pread(img, s.run, (size_t)k, (off_t)p)) < 0) {
				rc = fail(&s, errno, "reading the RAM image "
				    "failed");
				goto out;
			}
			if ((uint64_t)r < k)
				memset(s.run + r, 0, (size_t)(k - (uint64_t)r));
			for (i = 0; i < k; i += PG) {
				if (memcmp(s.run + i, zero, PG) == 0)
					continue;
				c = 0x02;
				if ((!any && ((rc = wr(&s, &c, 1)) < 0 ||
				    (rc = wr32(&s, sid)) < 0)) ||
				    (rc = wr64(&s, (p + i) | F_PAGE |
				    (any ? F_CONT : 0))) < 0 ||
				    (!any && ((rc = wr(&s, &l, 1)) < 0 ||
				    (rc = wr(&s, block, l)) < 0)) ||
				    (rc = wr(&s, s.run + i, PG)) < 0)
					goto out;
				any = 1;
			}
		}
	}
	if (any) {
		c = 0x7e;
		if ((rc = wr64(&s, F_EOS)) < 0 || (s.footers &&
		    ((rc = wr(&s, &c, 1)) < 0 || (rc = wr32(&s, sid)) < 0)))
			goto out;
	}
	rc = copy_rest(&s);
out:
	munmap(s.ib, mapped);
	return rc;
}

/* ---- the split as the manager runs it: a child, watched ---- */

#define KEEP	5

/* In the child: every descriptor but these (-1: none) and 0-2 closed. */
static void
keep_only(const int *fds)
{
	int k[KEEP], i, j, t;
	unsigned lo = 3;

	memcpy(k, fds, sizeof(k));
	for (i = 1; i < KEEP; i++)
		for (j = i; j > 0 && k[j - 1] > k[j]; j--) {
			t = k[j];
			k[j] = k[j - 1];
			k[j - 1] = t;
		}
	for (i = 0; i < KEEP; i++) {
		if (k[i] < (int)lo)
			continue;
		if ((unsigned)k[i] > lo)
			(void)close_range(lo, (unsigned)k[i] - 1, 0);
		lo = (unsigned)k[i] + 1;
	}
	(void)close_range(lo, ~0U, 0);
}

struct vmm_split {
	vmm_split_cb cb;
	void *arg;
	int img, errfd;
	int done_w;			/* a followed stream's: its word */
	int seal;			/* the image is our memfd */
	pid_t pid;
	uint64_t t0;
	struct vmm_child *watch;
};

static void
split_free(struct vmm_split *x)
{
	if (x->errfd >= 0)
		close(x->errfd);
	if (x->done_w >= 0)
		close(x->done_w);
	if (x->img >= 0)
		close(x->img);
	free(x);
}

static void
split_exited(pid_t pid, int status, void *arg)
{
	struct vmm_split *x = arg;
	char why[VMM_ERRLEN] = "", st[64];
	ssize_t n;
	int img;

	(void)pid;
	if (status != 0) {
		if ((n = read(x->errfd, why, sizeof(why) - 1)) <= 0) {
			vmm_status_text(status, st, sizeof(st));
			snprintf(why, sizeof(why), "the split %s", st);
		} else
			why[n] = '\0';
	} else if (x->seal && fcntl(x->img, F_ADD_SEALS, F_SEAL_SHRINK |
	    F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		snprintf(why, sizeof(why), "sealing the image: %s",
		    strerror(errno));
	img = why[0] == '\0' ? x->img : -1;
	if (img >= 0)
		x->img = -1;		/* the callback's */
	x->cb(x->arg, img, why, vmm_now_ms() - x->t0);
	split_free(x);
}

/* A child's start: default signals, gone with the manager (a followed
 * stream waits on the manager's word), and nothing of the manager's but
 * fds (a pipe's write end, a QMP socket, a console held here would keep
 * its reader from seeing the end while this runs). */
static void
child_begin(const int fds[KEEP])
{
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		(void)signal(sig, SIG_DFL);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	keep_only(fds);
}

/* A child's failure: why to the manager. */
static void __attribute__((noreturn))
child_fail(int errw, const char *why)
{
	(void)!write(errw, why, strlen(why));
	_exit(1);
}

static void
close_all(const int *fd, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
}

/* A split or join, its callback's; NULL with err. */
static struct vmm_split *
split_new(vmm_split_cb cb, void *arg, char *err, size_t errlen)
{
	struct vmm_split *x;

	if ((x = calloc(1, sizeof(*x))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	x->cb = cb;
	x->arg = arg;
	x->errfd = x->done_w = x->img = -1;
	x->t0 = vmm_now_ms();
	return x;
}

/* The child x->pid watched from the loop; else it is ended and reaped,
 * its output (made) removed: -1 with err. */
static int
split_watch(struct vmm *m, struct vmm_split *x, const char *made, char *err,
    size_t errlen)
{
	if ((x->watch = vmm_child_watch(m->base, x->pid, split_exited, x, err,
	    errlen)) != NULL)
		return 0;
	(void)kill(x->pid, SIGKILL);
	while (waitpid(x->pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (made != NULL)
		(void)unlink(made);
	return -1;
}

/* The child: the stream (a followed one opened once QEMU has made it),
 * the image allocated whole, the split; its why to errw. */
static void __attribute__((noreturn))
split_child(const char *stream, int in, int done, int out, int img,
    off_t size, int errw)
{
	struct pollfd p;
	char why[VMM_ERRLEN];
	struct statfs fs;
	int fds[KEEP] = { in, done, out, img, errw };

	child_begin(fds);
	while (in < 0) {
		if ((in = open(stream, O_RDONLY | O_CLOEXEC)) >= 0)
			break;
		if (errno != ENOENT || done < 0) {
			snprintf(why, sizeof(why), "%s: %s", stream,
			    strerror(errno));
			goto fail;
		}
		p.fd = done;
		p.events = POLLIN;
		if (poll(&p, 1, FOLLOW_MS) > 0)
			done = -1;	/* complete: there, or never made */
	}
	/* A memfd's holes allocated too, here (the manager's), as the
	 * ready snapshot's are (ready.c): a capture reads all of a guest's
	 * RAM, and a read through a private mapping of a shmem hole
	 * allocates a page charged to the reader (a fork was OOM-killed
	 * restoring its checkpoint). First: the split's writes then
	 * allocate nothing, and for a followed stream it is done while
	 * QEMU writes. Not a standby's RAM file on disk: its holes read
	 * as clean page cache through qemu's shared mapping, and they are
	 * what keeps a suspended sandbox's RAM image as small as what its
	 * guest used (the stream's zero pages are never written). */
	if (fstatfs(img, &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	    fallocate(img, 0, 0, size) < 0) {
		snprintf(why, sizeof(why), "allocating the image: %s",
		    strerror(errno));
		goto fail;
	}
	if (vmm_stream_split(in, done, out, img, (uint64_t)size, "mem", why,
	    sizeof(why)) < 0)
		goto fail;
	if (fsync(out) < 0) {
		snprintf(why, sizeof(why), "the devices' stream: %s",
		    strerror(errno));
		goto fail;
	}
	/* a standby's RAM file becomes the snapshot's RAM (qemu.c) */
	if (fstatfs(img, &fs) == 0 && fs.f_type != TMPFS_MAGIC &&
	    fsync(img) < 0) {
		snprintf(why, sizeof(why), "the RAM image: %s", strerror(errno));
		goto fail;
	}
	_exit(0);
fail:
	child_fail(errw, why);
}

struct vmm_split *
vmm_split_start(struct vmm *m, const char *stream, const char *dev,
    unsigned mem_mib, int follow, int img, vmm_split_cb cb, void *arg,
    char *err, size_t errlen)
{
	struct vmm_split *x;
	int p[2] = { -1, -1 }, d[2] = { -1, -1 }, in = -1, out = -1, e;
	off_t size = (off_t)mem_mib << 20;

	if ((x = split_new(cb, arg, err, errlen)) == NULL)
		return NULL;
	(void)unlink(dev);
	x->seal = img < 0;
	if ((x->img = img >= 0 ? fcntl(img, F_DUPFD_CLOEXEC, 3) :
	    memfd_create("berth-image", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0 ||
	    (x->seal && ftruncate(x->img, size) < 0) ||
	    pipe2(p, O_CLOEXEC) < 0 ||
	    (follow && pipe2(d, O_CLOEXEC) < 0) ||
	    (!follow && (in = open(stream, O_RDONLY | O_CLOEXEC)) < 0) ||
	    (out = open(dev, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0400)) < 0 || (x->pid = fork()) < 0) {
		e = errno;
		snprintf(err, errlen, "splitting %s: %s", stream, strerror(e));
		goto fail;
	}
	if (x->pid == 0)
		split_child(stream, in, d[0], out, x->img, size, p[1]);
	close(p[1]);
	p[1] = -1;
	if (d[0] >= 0)
		close(d[0]);
	if (in >= 0)
		close(in);
	close(out);
	x->errfd = p[0];
	x->done_w = d[1];
	if (split_watch(m, x, dev, err, errlen) < 0) {
		split_free(x);
		return NULL;
	}
	return x;
fail:
	{
		int fds[] = { p[0], p[1], d[0], d[1], in, out };

		close_all(fds, sizeof(fds) / sizeof(fds[0]));
	}
	(void)unlink(dev);
	split_free(x);
	return NULL;
}

/* The join's child: its why to errw. */
static void __attribute__((noreturn))
join_child(int in, int out, int img, off_t size, int errw)
{
	char why[VMM_ERRLEN];
	int fds[KEEP] = { in, out, img, errw, -1 };

	child_begin(fds);
	if (vmm_stream_join(in, out, img, (uint64_t)size, "mem", why,
	    sizeof(why)) < 0)
		child_fail(errw, why);
	if (fsync(out) < 0) {
		snprintf(why, sizeof(why), "the joined stream: %s",
		    strerror(errno));
		child_fail(errw, why);
	}
	_exit(0);
}

struct vmm_split *
vmm_join_start(struct vmm *m, const char *dev, const char *img,
    const char *stream, unsigned mem_mib, vmm_split_cb cb, void *arg,
    char *err, size_t errlen)
{
	struct vmm_split *x, *ret = NULL;
	struct stat st;
	int p[2] = { -1, -1 }, in = -1, im = -1, out = -1;

	if ((x = split_new(cb, arg, err, errlen)) == NULL)
		return NULL;
	/* the RAM file is in the VMM's jail: a regular file, or nothing
	 * (no link followed, no FIFO's open waited on) */
	if ((in = open(dev, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (im = open(img, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) < 0 || fstat(im, &st) < 0 ||
	    (!S_ISREG(st.st_mode) && (errno = EINVAL)) ||
	    pipe2(p, O_CLOEXEC) < 0 ||
	    (out = open(stream, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0400)) < 0 || (x->pid = fork()) < 0) {
		snprintf(err, errlen, "joining %s and %s: %s", dev, img,
		    strerror(errno));
		if (out >= 0)
			(void)unlink(stream);
		goto fail;
	}
	if (x->pid == 0)
		join_child(in, out, im, (off_t)mem_mib << 20, p[1]);
	x->errfd = p[0];
	p[0] = -1;
	if (split_watch(m, x, stream, err, errlen) == 0)
		ret = x;
fail:
	{
		int fds[] = { p[0], p[1], in, im, out };

		close_all(fds, sizeof(fds) / sizeof(fds[0]));
	}
	if (ret == NULL)
		split_free(x);
	return ret;
}

/* ---- a RAM file's zero pages punched out ---- */

int
vmm_punch_zeros(int fd, uint64_t *punched, char *err, size_t errlen)
{
	static const unsigned char zero[4096];
	unsigned char *buf;
	struct stat st;
	off_t off = 0, data, hole, run = -1, p;
	ssize_t n, i;
	int e = 0;

	*punched = 0;
	if (fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && (errno = EINVAL))) {
		e = errno;
		snprintf(err, errlen, "the RAM file: %s", strerror(e));
		return -e;
	}
	if ((buf = malloc(1u << 20)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while (off < st.st_size && e == 0) {
		if ((data = lseek(fd, off, SEEK_DATA)) < 0) {
			if (errno != ENXIO)	/* ENXIO: only a hole left */
				e = errno;
			break;
		}
		if ((hole = lseek(fd, data, SEEK_HOLE)) < 0)
			hole = st.st_size;
		for (p = data & ~(off_t)4095; p < hole && e == 0; p += n) {
			n = pread(fd, buf, (size_t)(hole - p) < (1u << 20) ?
			    (size_t)(hole - p) : (1u << 20), p);
			if (n <= 0) {
				e = n < 0 ? errno : 0;
				break;		/* 0: it ends sooner */
			}
			for (i = 0; i < n && e == 0; i += 4096) {
				if (n - i >= 4096 &&
				    memcmp(buf + i, zero, 4096) == 0) {
					if (run < 0)
						run = p + i;
					continue;
				}
				if (run >= 0 && fallocate(fd,
				    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				    run, p + i - run) < 0)
					e = errno;
				else if (run >= 0)
					*punched += (uint64_t)(p + i - run);
				run = -1;
			}
		}
		if (run >= 0 && e == 0) {
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE |
			    FALLOC_FL_KEEP_SIZE, run, p - run) < 0)
				e = errno;
			else
				*punched += (uint64_t)(p - run);
		}
		run = -1;
		off = hole;
	}
	free(buf);
	if (e != 0) {
		snprintf(err, errlen, "punching out its zero pages: %s",
		    strerror(e));
		return -e;
	}
	return 0;
}

/* The sparsing child: its why to errw. */
static void __attribute__((noreturn))
sparse_child(int img, int how, int errw)
{
	char why[VMM_ERRLEN];
	uint64_t punched;
	int fds[KEEP] = { img, errw, -1, -1, -1 }, rc;

	child_begin(fds);
	/* a file system that cannot punch holes keeps them: it is synced */
	if ((how & VMM_SPARSE_PUNCH) && (rc = vmm_punch_zeros(img, &punched,
	    why, sizeof(why))) < 0 && rc != -EOPNOTSUPP)
		child_fail(errw, why);
	if ((how & VMM_SPARSE_SYNC) && fdatasync(img) < 0) {
		snprintf(why, sizeof(why), "flushing it: %s", strerror(errno));
		child_fail(errw, why);
	}
	_exit(0);
}

struct vmm_split *
vmm_sparse_start(struct vmm *m, const char *path, int how, vmm_split_cb cb,
    void *arg, char *err, size_t errlen)
{
	struct vmm_split *x, *ret = NULL;
	struct stat st;
	int p[2] = { -1, -1 }, img = -1;

	if ((x = split_new(cb, arg, err, errlen)) == NULL)
		return NULL;
	/* in the VMM's jail: a regular file, no link followed */
	if ((img = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) < 0 || fstat(img, &st) < 0 ||
	    (!S_ISREG(st.st_mode) && (errno = EINVAL)) ||
	    pipe2(p, O_CLOEXEC) < 0 || (x->pid = fork()) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (x->pid == 0)
		sparse_child(img, how, p[1]);
	x->errfd = p[0];
	p[0] = -1;
	if (split_watch(m, x, NULL, err, errlen) == 0)
		ret = x;
fail:
	{
		int fds[] = { p[0], p[1], img };

		close_all(fds, sizeof(fds) / sizeof(fds[0]));
	}
	if (ret == NULL)
		split_free(x);
	return ret;
}

void
vmm_split_written(struct vmm_split *x)
{
	static const char c = 1;

	if (x->done_w >= 0) {
		(void)!write(x->done_w, &c, 1);
		close(x->done_w);
		x->done_w = -1;
	}
}

void
vmm_split_cancel(struct vmm_split *x)
{
	vmm_child_unwatch(x->watch);
	(void)kill(x->pid, SIGKILL);
	while (waitpid(x->pid, NULL, 0) < 0 && errno == EINTR)
		;
	split_free(x);
}
