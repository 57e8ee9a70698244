/*
 * test_image.c — vmm_stream_split (vmm/image.c) on streams built here in
 * QEMU 7.2's format: the RAM block's pages land in the image (a page
 * sent again as zero is zeroed, a fill byte fills, CONTINUE runs across
 * sections), every other block's pages and everything after ram's end
 * stay in the stream as they were; streams it does not know are refused
 * with -ENOTSUP or -EPROTO and a reason. A stream split while a writer
 * still adds to it (a capture under way) comes out the same, whatever
 * the writes' pieces; one that ends before its writer says it is
 * complete is refused. vmm_stream_join puts a devices' stream and its
 * image back together: split again, it gives the same two.
 * vmm_punch_zeros punches a RAM file's zero pages out (runs of them, one
 * at its end, none of its data), and leaves what it reads the same.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "tap.h"

#define PG 4096
#define MEM (16 * PG)

struct buf {
	unsigned char *p;
	size_t n, cap;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		if ((b->p = realloc(b->p, b->cap)) == NULL)
			abort();
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void
u8(struct buf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;

	put(b, &c, 1);
}

static void
u32(struct buf *b, uint32_t v)
{
	unsigned char x[4] = { v >> 24, v >> 16, v >> 8, v };

	put(b, x, 4);
}

static void
u64(struct buf *b, uint64_t v)
{
	u32(b, (uint32_t)(v >> 32));
	u32(b, (uint32_t)v);
}

static void
id(struct buf *b, const char *s)
{
	u8(b, (unsigned)strlen(s));
	put(b, s, strlen(s));
}

static void
page(struct buf *b, int c)
{
	unsigned char pg[PG];

	memset(pg, c, sizeof(pg));
	put(b, pg, sizeof(pg));
}

/* a page record: block NULL continues the last one */
static void
rec(struct buf *b, uint64_t off, unsigned flags, const char *block)
{
	u64(b, off | flags | (block == NULL ? 0x20 : 0));
	if (block != NULL)
		id(b, block);
}

static void
footer(struct buf *b, uint32_t sid)
{
	u8(b, 0x7e);
	u32(b, sid);
}

/* header, configuration, ram's START with blocks mem and rom */
static void
head(struct buf *b, uint64_t memlen)
{
	put(b, "QEVM\0\0\0\3", 8);
	u8(b, 0x07);
	u32(b, 7);
	put(b, "microvm", 7);
	u8(b, 0x01);
	u32(b, 2);
	id(b, "ram");
	u32(b, 0);
	u32(b, 4);
	u64(b, (memlen + PG) | 0x04);
	id(b, "mem");
	u64(b, memlen);
	id(b, "rom");
	u64(b, PG);
	u64(b, 0x10);
	footer(b, 2);
}

static const char tail[] = "\x04\0\0\0\x05\x03" "cpu" "device bytes\0"
    "\x06{\"json\":1}";

/* The split's rest into out, its image into img (unless NULL); the
 * three files closed. */
static void
collect(int fi, int fo, int fm, struct buf *out, unsigned char *img,
    uint64_t memlen)
{
	ssize_t n;

	out->n = 0;
	if (lseek(fo, 0, SEEK_SET) != 0)
		abort();
	for (;;) {
		unsigned char t[65536];

		if ((n = read(fo, t, sizeof(t))) <= 0)
			break;
		put(out, t, (size_t)n);
	}
	if (img != NULL && pread(fm, img, memlen, 0) != (ssize_t)memlen)
		abort();
	close(fi);
	close(fo);
	close(fm);
}

static int
run(const struct buf *in, uint64_t memlen, struct buf *out,
    unsigned char *img, char *err, size_t errlen)
{
	int fi, fo, fm, rc;

	fi = memfd_create("in", 0);
	fo = memfd_create("out", 0);
	fm = memfd_create("img", 0);
	if (fi < 0 || fo < 0 || fm < 0 || write(fi, in->p, in->n) !=
	    (ssize_t)in->n || lseek(fi, 0, SEEK_SET) != 0 ||
	    ftruncate(fm, (off_t)memlen) < 0)
		abort();
	rc = vmm_stream_split(fi, -1, fo, fm, memlen, "mem", err, errlen);
	collect(fi, fo, fm, out, img, memlen);
	return rc;
}

/* The same, the stream written meanwhile by a child: upto bytes of it
 * (the rest never), in pieces of piece bytes, then the word that it is
 * complete. */
static int
run_follow(const struct buf *in, size_t upto, size_t piece, uint64_t memlen,
    struct buf *out, unsigned char *img, char *err, size_t errlen)
{
	int fi, fo, fm, d[2], rc, st;
	size_t o, k;
	pid_t pid;

	fi = memfd_create("in", 0);
	fo = memfd_create("out", 0);
	fm = memfd_create("img", 0);
	if (fi < 0 || fo < 0 || fm < 0 || pipe(d) < 0 ||
	    ftruncate(fm, (off_t)memlen) < 0 || (pid = fork()) < 0)
		abort();
	if (pid == 0) {
		for (o = 0; o < upto; o += k) {
			k = upto - o < piece ? upto - o : piece;
			if (pwrite(fi, in->p + o, k, (off_t)o) != (ssize_t)k)
				_exit(1);
			/* the reader reaches the end now and then */
			(void)poll(NULL, 0, 1);
		}
		_exit(write(d[1], "", 1) == 1 ? 0 : 1);
	}
	close(d[1]);
	rc = vmm_stream_split(fi, d[0], fo, fm, memlen, "mem", err, errlen);
	if (waitpid(pid, &st, 0) != pid || st != 0)
		abort();
	close(d[0]);
	collect(fi, fo, fm, out, img, memlen);
	return rc;
}

/* join's three files: the devices' stream holding dev, an image of
 * memlen bytes (holes), the output */
static void
join_files(const struct buf *dev, uint64_t memlen, int *fd, int *fm, int *fo)
{
	*fd = memfd_create("dev", 0);
	*fm = memfd_create("img", 0);
	*fo = memfd_create("joined", 0);
	if (*fd < 0 || *fm < 0 || *fo < 0 || write(*fd, dev->p, dev->n) !=
	    (ssize_t)dev->n || lseek(*fd, 0, SEEK_SET) != 0 ||
	    ftruncate(*fm, (off_t)memlen) < 0)
		abort();
}

static int
all(const unsigned char *p, int c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != c)
			return 0;
	return 1;
}

/* vmm_punch_zeros on a file of data pages, written zero pages, a hole
 * and zero pages at its end: only the zero pages go, the content stays */
static void
punch_zeros(void)
{
	char path[] = "/var/tmp/berth-test-punch.XXXXXX", err[256];
	static unsigned char pg[PG], back[PG];
	/* 0 data, 1-3 zero, 4 data, 5-260 a hole, 261 zero, 262 data, 263
	 * 264 zero (the end) */
	const char *kind = "dzzzd";
	uint64_t punched = 1;
	struct stat st0, st1;
	int fd, p[2], rc, same = 1;
	off_t off, nz = 0;

	if ((fd = mkstemp(path)) < 0) {
		ok(0, "a temp file for the punch: %s", strerror(errno));
		return;
	}
	(void)unlink(path);
	for (off = 0; off < 265; off++) {
		char k = off < 5 ? kind[off] : off < 261 ? 'h' :
		    off == 262 ? 'd' : 'z';

		if (k == 'h')
			continue;
		memset(pg, k == 'd' ? (int)('a' + off % 26) : 0, PG);
		if (k == 'd')
			pg[PG - 1] = 0;		/* zero but for one byte */
		if (k == 'z')
			nz++;
		if (pwrite(fd, pg, PG, off * PG) != PG)
			abort();
	}
	(void)fsync(fd);
	(void)fstat(fd, &st0);
	rc = vmm_punch_zeros(fd, &punched, err, sizeof(err));
	if (rc == -EOPNOTSUPP) {
		ok(1, "# SKIP %s cannot punch holes", path);
		close(fd);
		return;
	}
	ok(rc == 0, "vmm_punch_zeros: %d %s", rc, rc ? err : "");
	ok(punched == (uint64_t)nz * PG, "it punched the %lld zero pages "
	    "(%llu bytes)", (long long)nz, (unsigned long long)punched);
	(void)fstat(fd, &st1);
	ok(st1.st_size == st0.st_size && (st0.st_blocks - st1.st_blocks) *
	    512 == nz * PG, "... the file's size kept, %lld KiB fewer "
	    "allocated (%lld -> %lld KiB)", (long long)nz * 4,
	    (long long)st0.st_blocks / 2, (long long)st1.st_blocks / 2);
	ok(lseek(fd, PG, SEEK_HOLE) == PG &&
	    lseek(fd, PG, SEEK_DATA) == 4 * PG,
	    "... the zero run is a hole, the data after it data");
	for (off = 0; off < 265; off++) {
		char k = off < 5 ? kind[off] : off < 261 ? 'h' :
		    off == 262 ? 'd' : 'z';

		memset(pg, k == 'd' ? (int)('a' + off % 26) : 0, PG);
		if (k == 'd')
			pg[PG - 1] = 0;
		if (pread(fd, back, PG, off * PG) != PG ||
		    memcmp(back, pg, PG) != 0)
			same = 0;
	}
	ok(same, "... and every page reads as before");
	rc = vmm_punch_zeros(fd, &punched, err, sizeof(err));
	ok(rc == 0 && punched == 0, "again: nothing to punch (%d, %llu)",
	    rc, (unsigned long long)punched);
	close(fd);
	if (pipe(p) == 0) {
		rc = vmm_punch_zeros(p[0], &punched, err, sizeof(err));
		ok(rc == -EINVAL && strstr(err, "RAM file") != NULL,
		    "a pipe: refused (%d: %s)", rc, err);
		close(p[0]);
		close(p[1]);
	}
}

int
main(void)
{
	struct buf in = { 0 }, want = { 0 }, out = { 0 };
	static unsigned char img[MEM];
	char err[256];
	int rc;
	size_t i;

	punch_zeros();

	/* ---- a stream in three iterations ---- */
	head(&in, MEM);
	head(&want, MEM);
	/* PART 1: mem 0 'A', mem 1 'B' (continued), rom 0 'R', mem 2 zero
	 * (never written), mem 5..7 'C' (a run) */
	u8(&in, 0x02);
	u32(&in, 2);
	rec(&in, 0, 0x08, "mem");
	page(&in, 'A');
	rec(&in, PG, 0x08, NULL);
	page(&in, 'B');
	rec(&in, 0, 0x08, "rom");
	page(&in, 'R');
	rec(&in, 2 * PG, 0x02, "mem");
	u8(&in, 0);
	for (i = 5; i < 8; i++) {
		rec(&in, i * PG, 0x08, NULL);
		page(&in, 'C');
	}
	u64(&in, 0x10);
	footer(&in, 2);
	u8(&want, 0x02);
	u32(&want, 2);
	rec(&want, 0, 0x08, "rom");
	page(&want, 'R');
	u64(&want, 0x10);
	footer(&want, 2);
	/* PART 2: mem 0 sent again as zero (continuing mem across the
	 * section), mem 3 filled with 0x55, mem 6 'D' */
	u8(&in, 0x02);
	u32(&in, 2);
	rec(&in, 0, 0x02, NULL);
	u8(&in, 0);
	rec(&in, 3 * PG, 0x02, "mem");
	u8(&in, 0x55);
	rec(&in, 6 * PG, 0x08, NULL);
	page(&in, 'D');
	u64(&in, 0x10);
	footer(&in, 2);
	/* END: rom 0 zero, continuing rom */
	u8(&in, 0x03);
	u32(&in, 2);
	rec(&in, 0, 0x02, "rom");
	u8(&in, 0);
	u64(&in, 0x10);
	footer(&in, 2);
	u8(&want, 0x03);
	u32(&want, 2);
	rec(&want, 0, 0x02, "rom");
	u8(&want, 0);
	u64(&want, 0x10);
	footer(&want, 2);
	put(&in, tail, sizeof(tail) - 1);
	put(&want, tail, sizeof(tail) - 1);

	rc = run(&in, MEM, &out, img, err, sizeof(err));
	is_int(rc, 0, "a stream of three iterations split%s%s",
	    rc ? ": " : "", rc ? err : "");
	ok(out.n == want.n && memcmp(out.p, want.p, want.n) == 0,
	    "the rest: header, block list, rom's pages, devices as they were "
	    "(%zu bytes, want %zu)", out.n, want.n);
	ok(all(img, 0, PG), "mem page 0: written, then sent as zero: zero");
	ok(all(img + PG, 'B', PG), "mem page 1 (CONTINUE): its bytes");
	ok(all(img + 2 * PG, 0, PG), "mem page 2 (zero, never written): zero");
	ok(all(img + 3 * PG, 0x55, PG), "mem page 3: the fill byte");
	ok(all(img + 5 * PG, 'C', PG) && all(img + 7 * PG, 'C', PG),
	    "mem pages 5 and 7 (one run): their bytes");
	ok(all(img + 6 * PG, 'D', PG), "mem page 6, sent again: the later "
	    "bytes");
	ok(all(img + 8 * PG, 0, MEM - 8 * PG), "the rest of mem: zero");

	/* ---- joined again: the devices' stream and the image ---- */
	{
		static unsigned char img2[MEM];
		struct buf joined = { 0 }, dev2 = { 0 }, bad = { 0 };
		int fd, fm, fo;

		/* the image as a sparse file: pages 0 and 2 holes */
		join_files(&out, MEM, &fd, &fm, &fo);
		for (i = 0; i < MEM; i += PG)
			if (!all(img + i, 0, PG) &&
			    pwrite(fm, img + i, PG, (off_t)i) != PG)
				abort();
		rc = vmm_stream_join(fd, fo, fm, MEM, "mem", err, sizeof(err));
		is_int(rc, 0, "the devices' stream and the image joined%s%s",
		    rc ? ": " : "", rc ? err : "");
		collect(fd, fo, fm, &joined, NULL, 0);
		/* 5 pages not zero (1, 3, 5, 6, 7): their records and one
		 * PART's framing more than the devices' stream */
		is_int((long long)joined.n, (long long)(out.n + 5 * (8 + PG) +
		    4 + 5 + 8 + 5), "... one PART with the five pages that are "
		    "not zero (%zu bytes)", joined.n);
		rc = run(&joined, MEM, &dev2, img2, err, sizeof(err));
		is_int(rc, 0, "... that stream splits again%s%s", rc ? ": " :
		    "", rc ? err : "");
		ok(dev2.n == out.n && memcmp(dev2.p, out.p, out.n) == 0,
		    "... into the same devices' stream");
		ok(memcmp(img2, img, MEM) == 0, "... and the same image");

		/* a stream whose first section is not ram's START */
		put(&bad, "QEVM\0\0\0\3", 8);
		put(&bad, tail, sizeof(tail) - 1);
		join_files(&bad, MEM, &fd, &fm, &fo);
		rc = vmm_stream_join(fd, fo, fm, MEM, "mem", err, sizeof(err));
		ok(rc == -EPROTO && strstr(err, "ram") != NULL,
		    "a devices' stream that does not begin with ram: refused "
		    "(%s)", err);
		close(fd);
		close(fm);
		close(fo);
		free(joined.p);
		free(dev2.p);
		free(bad.p);
	}

	/* ---- the same stream, split as it is written ---- */
	{
		static unsigned char img2[MEM];
		struct buf out2 = { 0 };
		size_t pieces[] = { 97, 1000, PG + 7, in.n };

		for (i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
			memset(img2, 0xee, sizeof(img2));
			rc = run_follow(&in, in.n, pieces[i], MEM, &out2, img2,
			    err, sizeof(err));
			ok(rc == 0 && out2.n == out.n && memcmp(out2.p, out.p,
			    out.n) == 0 && memcmp(img2, img, MEM) == 0,
			    "split as it is written in pieces of %zu bytes: "
			    "the same image and rest%s%s", pieces[i],
			    rc ? ": " : "", rc ? err : "");
		}
		rc = run_follow(&in, in.n / 2, 4096, MEM, &out2, NULL, err,
		    sizeof(err));
		ok(rc == -EPROTO && strstr(err, "ends early") != NULL,
		    "a stream said complete half written: refused (%s)", err);
		free(out2.p);
	}

	/* ---- streams it does not take ---- */
	in.n = 0;
	head(&in, MEM);
	u8(&in, 0x02);
	u32(&in, 2);
	rec(&in, 0, 0x100, "mem");	/* a compressed page */
	rc = run(&in, MEM, &out, NULL, err, sizeof(err));
	ok(rc == -ENOTSUP && strstr(err, "compression") != NULL,
	    "a compressed page: -ENOTSUP, saying so (%d: %s)", rc, err);

	in.n = 0;
	head(&in, MEM);
	u8(&in, 0x02);
	u32(&in, 2);
	rec(&in, 0, 0x08, "mem");
	page(&in, 'A');
	in.n -= 100;			/* cut inside the page */
	rc = run(&in, MEM, &out, NULL, err, sizeof(err));
	ok(rc == -EPROTO && strstr(err, "ends early") != NULL,
	    "a stream cut short: -EPROTO, saying so (%d: %s)", rc, err);

	in.n = 0;
	head(&in, MEM);
	rc = run(&in, 2 * MEM, &out, NULL, err, sizeof(err));
	ok(rc == -EPROTO && strstr(err, "size") != NULL,
	    "a RAM block of another size than the image: refused (%d: %s)",
	    rc, err);

	in.n = 0;
	head(&in, MEM);
	u8(&in, 0x02);
	u32(&in, 2);
	rec(&in, MEM, 0x08, "mem");	/* one page past the block */
	page(&in, 'A');
	rc = run(&in, MEM, &out, NULL, err, sizeof(err));
	ok(rc == -EPROTO && strstr(err, "outside") != NULL,
	    "a page outside the block: refused (%d: %s)", rc, err);

	in.n = 0;
	put(&in, "QEVM\0\0\0\2", 8);
	rc = run(&in, MEM, &out, NULL, err, sizeof(err));
	ok(rc == -EPROTO && strstr(err, "version 3") != NULL,
	    "not a version 3 stream: refused (%d: %s)", rc, err);

	in.n = 0;
	head(&in, MEM);
	u8(&in, 0x02);
	u32(&in, 2);
	rec(&in, 0, 0x08, NULL);	/* CONTINUE with no block before */
	page(&in, 'A');
	rc = run(&in, MEM, &out, NULL, err, sizeof(err));
	ok(rc == -EPROTO && strstr(err, "continues no block") != NULL,
	    "CONTINUE before any block: refused (%d: %s)", rc, err);

	free(in.p);
	free(want.p);
	free(out.p);
	return done_testing();
}
