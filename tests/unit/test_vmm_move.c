/*
 * test_vmm_move.c — a suspended sandbox's files leaving one manager and
 * adopted by another (vmm/export.c), without root or a VM: two managers
 * on temporary state dirs (qemu is /bin/true, taps external), a
 * suspended sandbox laid out as a suspend leaves one, its manifest
 * through JSON and back, and the target's checks: a changed byte, a file
 * too many, a link, another template, a taken id or address, each
 * refused with nothing touched; then the adoption, plain and over a
 * ready snapshot's layer the target lacks (its qcow2 names rewritten).
 * qemu-img makes the qcow2 files; without it those parts are skipped.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "tap.h"
#include "vmm.h"
#include "backend.h"

static char top[] = "/tmp/berth-move-XXXXXX";
static int have_qemu_img;

static void
put(const char *path, const char *text, size_t n)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		diag("%s: %s", path, strerror(errno));
		exit(1);
	}
	if (text != NULL)
		fwrite(text, 1, n, f);
	fclose(f);
}

static void
sh(const char *cmd)
{
	if (system(cmd) != 0)
		diag("failed: %s", cmd);
}

static struct vmm *
manager(struct event_base *base, const char *name, const char *prefix)
{
	struct vmm_config cfg;
	char p[PATH_MAX], err[VMM_ERRLEN];
	static char dirs[3][PATH_MAX];
	static int k;
	struct vmm *m;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(dirs[k], sizeof(dirs[k]), "%s/%s", top, name);
	cfg.state_dir = dirs[k++];
	cfg.backend = "qemu";
	cfg.vmm_binary = "/bin/true";
	cfg.accel = VMM_ACCEL_TCG;
	cfg.external_taps = 1;
	cfg.tap_prefix = prefix;
	cfg.tsc_khz = 2000000;
	cfg.idle_pause_ms = cfg.idle_suspend_ms = VMM_NEVER;
	m = vmm_new(base, &cfg, err, sizeof(err));
	if (m == NULL)
		diag("vmm_new: %s", err);
	(void)p;
	return m;
}

static int
template(const char *name, struct vmm_template *t)
{
	char dir[PATH_MAX], p[PATH_MAX + 32], err[VMM_ERRLEN];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/%s", top, name);
	mkdir(dir, 0755);
	snprintf(p, sizeof(p), "%s/template.json", dir);
	f = fopen(p, "w");
	fprintf(f, "{\"name\":\"minimal\",\"kernel\":\"vmlinuz\","
	    "\"rootfs\":\"root.img\",\"root_overlay\":true,"
	    "\"cmdline\":\"console=ttyS0\",\"agent\":\"berth.agent\"}\n");
	fclose(f);
	snprintf(p, sizeof(p), "%s/vmlinuz", dir);
	put(p, "k", 1);
	snprintf(p, sizeof(p), "%s/root.img", dir);
	f = fopen(p, "w");
	if (f == NULL || ftruncate(fileno(f), 4 << 20) < 0)
		return -1;
	fclose(f);
	if (vmm_template_load(dir, t, err, sizeof(err)) < 0) {
		diag("template: %s", err);
		return -1;
	}
	return 0;
}

static void
flat_done(void *arg, int ok_, const char *why)
{
	*(int *)arg = ok_;
	if (!ok_)
		diag("flatten: %s", why);
}

/* how many of mv's files are the sandbox's own (not its template's) */
static size_t
own(const struct vmm_move *mv)
{
	size_t i, n = 0;

	for (i = 0; i < mv->n; i++)
		n += vmm_move_template_file(mv->f[i].name) < 0;
	return n;
}

/* A suspended sandbox as a suspend leaves it, in m's state dir. */
static void
lay_out(struct vmm *m, const struct vmm_template *t, const char *id,
    const char *ip, const char *ready_key, const char *base)
{
	char d[PATH_MAX], p[PATH_MAX + 64], cmd[3 * PATH_MAX];
	const char *sd = m->state_dir;
	FILE *f;

	snprintf(d, sizeof(d), "%s/%s", sd, id);
	mkdir(d, 0750);
	snprintf(p, sizeof(p), "%s/snap", d);
	mkdir(p, 0750);
	snprintf(p, sizeof(p), "%s/snap/state", d);
	put(p, "QEVM device state of the guest", 30);
	snprintf(p, sizeof(p), "%s/mem", d);
	put(p, "the guest's RAM, all of it....", 30);
	snprintf(cmd, sizeof(cmd), "qemu-img create -q -u -f qcow2 -F %s -b "
	    "%s %s/disk.qcow2 4M", base != NULL ? "qcow2" : "raw",
	    base != NULL ? base : t->rootfs, d);
	if (have_qemu_img)
		sh(cmd);
	else {
		snprintf(p, sizeof(p), "%s/disk.qcow2", d);
		put(p, "QFI\xfb", 4);
	}
	snprintf(p, sizeof(p), "%s/sandbox.conf", d);
	f = fopen(p, "w");
#define KV(k, v) vmm_kv_write(f, k, v)
	KV("id", id); KV("state", "suspended"); KV("pid", "0");
	KV("standby_pid", "0"); KV("tap", "bma0"); KV("guest_ip", ip);
	KV("mem_mib", "256"); KV("vcpus", "1"); KV("disk_mib", "4");
	KV("created_ms", "1"); KV("template", t->name);
	KV("kernel", t->kernel); KV("initrd", ""); KV("rootfs", t->rootfs);
	KV("cmdline", t->cmdline);
	KV("ready_line", t->ready_line ? t->ready_line : "");
	KV("reason", ""); KV("accel", "tcg"); KV("disk_ready", "1");
	KV("jailed", "0"); KV("uid", "0"); KV("agent", t->agent);
	KV("root_overlay", "1"); KV("ready_key", ready_key);
	KV("from_snapshot", ready_key[0] ? "1" : "0"); KV("ram_shared", "0");
	KV("snap_ram", "0"); KV("ram_anon", "0"); KV("cgroup_name", "");
	KV("layered", "0"); KV("layer_gen", "0"); KV("balloon", "0");
	KV("snap_dev", "0");
#undef KV
	fclose(f);
}

/* Copy what the target needs of mv into dir (what the fleet channel
 * does), by the files' names. */
static void
ship(const struct vmm_move *mv, const int *need, const char *dir)
{
	char cmd[3 * PATH_MAX];
	size_t i;

	snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s/snap", dir, dir);
	sh(cmd);
	for (i = 0; i < mv->n; i++) {
		if (!need[i])
			continue;
		snprintf(cmd, sizeof(cmd), "cp %s %s/%s", mv->f[i].path, dir,
		    mv->f[i].name);
		sh(cmd);
	}
}

static int __attribute__((format(printf, 1, 2)))
exists(const char *fmt, ...)
{
	char p[PATH_MAX];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	return lstat(p, &st) == 0;
}

#define SHA "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
/* a manifest's start, of sandbox id */
#define HEAD_(id) "{\"id\":\"" id "\",\"template\":\"minimal\"," \
	"\"template_sha256\":\"" SHA "\","

static void
test_json(void)
{
	struct vmm_move mv, back;
	char err[VMM_ERRLEN], *s, bad[2048];
	static const char sha[] = "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff";

	memset(&mv, 0, sizeof(mv));
	snprintf(mv.id, sizeof(mv.id), "mv1");
	snprintf(mv.tpl, sizeof(mv.tpl), "minimal");
	snprintf(mv.tpl_sha256, sizeof(mv.tpl_sha256), "%s", sha);
	snprintf(mv.ready_key, sizeof(mv.ready_key), "0123456789abcdef");
	mv.mem_mib = 256;
	mv.vcpus = 1;
	mv.disk_mib = 1024;
	mv.n = 2;
	snprintf(mv.f[0].name, sizeof(mv.f[0].name), "snap/state");
	mv.f[0].size = 12345;
	snprintf(mv.f[0].sha256, sizeof(mv.f[0].sha256), "%s", sha);
	snprintf(mv.f[1].name, sizeof(mv.f[1].name), "base.qcow2");
	mv.f[1].size = 7;
	mv.f[1].shared = 1;
	snprintf(mv.f[1].sha256, sizeof(mv.f[1].sha256), "%s", sha);
	s = vmm_move_json(&mv);
	ok(s != NULL, "a manifest as JSON");
	ok(vmm_move_parse(s, strlen(s), &back, err, sizeof(err)) == 0 &&
	    back.n == 2 && strcmp(back.f[1].name, "base.qcow2") == 0 &&
	    back.f[1].shared && back.f[0].size == 12345 &&
	    strcmp(back.ready_key, mv.ready_key) == 0 && back.mem_mib == 256,
	    "... and back (%s)", err);
	ok(vmm_move_parse(s, strlen(s) - 1, &back, err, sizeof(err)) ==
	    -EINVAL, "cut short: refused (%s)", err);
	free(s);
#define REFUSED(text, what) do { \
	snprintf(bad, sizeof(bad), HEAD_("mv1") \
	    "\"ready_key\":\"\",\"mem_mib\":256,\"vcpus\":1,\"disk_mib\":4," \
	    "\"files\":[%s]}", text); \
	ok(vmm_move_parse(bad, strlen(bad), &back, err, sizeof(err)) == \
	    -EINVAL, what " (%s)", err); } while (0)
#define F(n, sh_) "{\"name\":\"" n "\",\"size\":1,\"sha256\":\"" sh_ \
	"\",\"shared\":false}"
	snprintf(bad, sizeof(bad), HEAD_("mv1")
	    "\"ready_key\":\"\",\"mem_mib\":256,\"vcpus\":1,\"disk_mib\":4,"
	    "\"files\":[" F("mem", "%s") "]}", sha);
	ok(vmm_move_parse(bad, strlen(bad), &back, err, sizeof(err)) == 0,
	    "one file, no ready key: taken (%s)", err);
	snprintf(bad, sizeof(bad), HEAD_("mv1")
	    "\"ready_key\":\"\",\"mem_mib\":256,\"vcpus\":1,\"disk_mib\":4,"
	    "\"files\":[" F("mem", "") "]}");
	ok(vmm_move_parse(bad, strlen(bad), &back, err, sizeof(err)) == 0 &&
	    back.f[0].sha256[0] == '\0', "no sha256 yet (a move's begin): "
	    "taken (%s)", err);
	REFUSED(F("../../etc/passwd", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff"), "a path: refused");
	REFUSED(F("mem", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff") ","
	    F("mem", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff"), "a name twice: refused");
	REFUSED(F("mem", "0011"), "a short sha256: refused");
	REFUSED(F("mem", "00112233445566778899AABBCCDDEEFF"
	    "00112233445566778899aabbccddeeff"), "upper-case hex: refused");
	REFUSED(F("base.qcow2", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff"), "a base not shared, no "
	    "ready key: refused");
	REFUSED("", "no file: refused");
	REFUSED(F("mem", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff") ","
	    F("tpl.rootfs", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff"), "a template's image without "
	    "its template.json and kernel: refused");
	REFUSED(F("mem", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff") ","
	    "{\"name\":\"tpl.json\",\"size\":70000,\"sha256\":\"\","
	    "\"shared\":false},"
	    F("tpl.kernel", "00112233445566778899aabbccddeeff"
	    "00112233445566778899aabbccddeeff"), "a template.json past 64 KiB: "
	    "refused");
	snprintf(bad, sizeof(bad), HEAD_("../x")
	    "\"ready_key\":\"\",\"mem_mib\":256,\"vcpus\":1,\"disk_mib\":4,"
	    "\"files\":[" F("mem", "%s") "]}", sha);
	ok(vmm_move_parse(bad, strlen(bad), &back, err, sizeof(err)) ==
	    -EINVAL, "a bad id: refused (%s)", err);
	snprintf(bad, sizeof(bad), HEAD_("mv1")
	    "\"ready_key\":\"\",\"mem_mib\":256,\"vcpus\":1,\"disk_mib\":4,"
	    "\"more\":1,\"files\":[" F("mem", "%s") "]}", sha);
	ok(vmm_move_parse(bad, strlen(bad), &back, err, sizeof(err)) ==
	    -EINVAL, "a key it does not know: refused (%s)", err);
	snprintf(bad, sizeof(bad), "{\"id\":\"mv1\",\"template\":\"minimal\","
	    "\"template_sha256\":\"\",\"ready_key\":\"\",\"mem_mib\":256,"
	    "\"vcpus\":1,\"disk_mib\":4,\"files\":[" F("mem", "%s") "]}", sha);
	ok(vmm_move_parse(bad, strlen(bad), &back, err, sizeof(err)) ==
	    -EINVAL, "no template version: refused (%s)", err);
#undef F
#undef REFUSED
}

/* ---- the sparse form ---- */

struct form {
	unsigned char *p;
	size_t len, cap;
};

static void
form_add(void *arg, const void *p, size_t len)
{
	struct form *f = arg;

	if (f->len + len > f->cap) {
		f->cap = (f->len + len) * 2;
		f->p = realloc(f->p, f->cap);
	}
	memcpy(f->p + f->len, p, len);
	f->len += len;
}

/* path's whole sparse form into f; its windows counted */
static int
form_of(const char *path, struct form *f, int *windows)
{
	static unsigned char buf[VMM_SPARSE_WIN];
	char err[256];
	uint64_t pos = 0;
	struct stat st;
	int fd, rc;

	f->len = 0;
	*windows = 0;
	if ((fd = open(path, O_RDONLY)) < 0 || fstat(fd, &st) < 0)
		return -1;
	while ((rc = vmm_sparse_next(fd, (uint64_t)st.st_size, &pos, buf,
	    form_add, f, err, sizeof(err))) > 0)
		(*windows)++;
	close(fd);
	if (rc < 0)
		diag("sparse: %s", err);
	return rc;
}

/* form written back to path (size bytes), piece bytes at a time */
static int
unform(const struct form *f, const char *path, uint64_t size, size_t piece,
    char *err, size_t errlen)
{
	struct vmm_sparse_wr w;
	size_t at, n;
	int fd, rc = 0;

	(void)unlink(path);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0)
		return -errno;
	vmm_sparse_wr_init(&w, fd, size);
	for (at = 0; rc == 0 && at < f->len; at += n) {
		n = f->len - at < piece ? f->len - at : piece;
		rc = vmm_sparse_write(&w, f->p + at, n, err, errlen);
	}
	if (rc == 0)
		rc = vmm_sparse_finish(&w, err, errlen);
	close(fd);
	return rc;
}

static void
be64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

/* f's first record, then one at off of len bytes: refused */
static void
bad_form(const struct form *f, const char *what, uint64_t off, uint64_t len,
    const char *path, uint64_t size)
{
	static unsigned char blk[VMM_SPARSE_BLK];
	struct form bad = { 0 };
	unsigned char hdr[VMM_SPARSE_HDR];
	char err[256] = "";
	uint64_t at;

	form_add(&bad, f->p, VMM_SPARSE_HDR + VMM_SPARSE_BLK);
	be64(hdr, off);
	be64(hdr + 8, len);
	form_add(&bad, hdr, sizeof(hdr));
	for (at = 0; at < len && at < 2 * VMM_SPARSE_WIN; at += sizeof(blk))
		form_add(&bad, blk, sizeof(blk));
	ok(unform(&bad, path, size, 4096, err, sizeof(err)) == -EINVAL,
	    "%s: refused (%s)", what, err);
	free(bad.p);
}

static void
test_sparse(void)
{
	char a[PATH_MAX], b[PATH_MAX], cmd[3 * PATH_MAX], err[256];
	const uint64_t size = 3 * VMM_SPARSE_WIN + 5000;
	unsigned char blk[VMM_SPARSE_BLK];
	struct form f = { 0 }, g = { 0 }, bad = { 0 };
	int fd, wins = 0, wins2 = 0, nrec = 0;
	struct stat st;
	size_t at;

	ok(vmm_move_sparse("mem") && vmm_move_sparse("disk.raw") &&
	    !vmm_move_sparse("disk.qcow2") && !vmm_move_sparse("snap/state"),
	    "mem and disk.raw go sparse, the others whole");
	snprintf(a, sizeof(a), "%s/sparse-a", top);
	snprintf(b, sizeof(b), "%s/sparse-b", top);
	if ((fd = open(a, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0 ||
	    ftruncate(fd, (off_t)size) < 0) {
		ok(0, "a sparse file");
		return;
	}
	memset(blk, 'a', sizeof(blk));
	/* a block of data; a block of zeros written (data, not a hole); two
	 * blocks across the first window's end; a byte in the short tail;
	 * the third window a hole */
	(void)pwrite(fd, blk, sizeof(blk), 0);
	memset(blk, 0, sizeof(blk));
	(void)pwrite(fd, blk, sizeof(blk), 2 * VMM_SPARSE_BLK);
	memset(blk, 'b', sizeof(blk));
	(void)pwrite(fd, blk, sizeof(blk), VMM_SPARSE_WIN - VMM_SPARSE_BLK);
	(void)pwrite(fd, blk, sizeof(blk), VMM_SPARSE_WIN);
	(void)pwrite(fd, "z", 1, (off_t)size - 1);
	close(fd);

	ok(form_of(a, &f, &wins) == 0, "its sparse form");
	for (at = 0; at + VMM_SPARSE_HDR <= f.len; nrec++) {
		uint64_t len = 0;
		int i;

		for (i = 8; i < 16; i++)
			len = len << 8 | f.p[at + (size_t)i];
		at += VMM_SPARSE_HDR + len;
	}
	/* 'a' at 0; 'b' ending window 0; 'b' starting window 1; the tail's
	 * short block (the zeros written are no record) */
	ok(at == f.len && nrec == 4, "4 records: a run cut at a window's "
	    "end, written zeros not sent (%d records, %zu bytes)", nrec, f.len);
	ok(f.len == 3 * VMM_SPARSE_BLK + (5000 - 4096) + 4 * VMM_SPARSE_HDR,
	    "... %zu bytes for a file of %llu", f.len,
	    (unsigned long long)size);
	ok(wins == 3, "the hole's window skipped unread (%d windows read)",
	    wins);
	ok(unform(&f, b, size, 7, err, sizeof(err)) == 0, "written back "
	    "7 bytes at a time (%s)", err);
	snprintf(cmd, sizeof(cmd), "cmp -s %s %s", a, b);
	ok(system(cmd) == 0, "... the same bytes");
	ok(stat(b, &st) == 0 && (uint64_t)st.st_size == size &&
	    (uint64_t)st.st_blocks * 512 < size / 2, "... its size, holes "
	    "kept (%lld bytes on disk)", (long long)st.st_blocks * 512);
	ok(form_of(b, &g, &wins2) == 0 && g.len == f.len &&
	    memcmp(f.p, g.p, f.len) == 0, "the form is the bytes': the same "
	    "from the copy, whose zeros are holes");
	ok(unform(&f, b, size, VMM_SPARSE_WIN * 2, err, sizeof(err)) == 0 &&
	    system(cmd) == 0, "written back in one piece");

	/* forms that are not one: each refused, naming the record */
	bad_form(&f, "a record before the last one's end", 0,
	    VMM_SPARSE_BLK, b, size);
	bad_form(&f, "a record across a window's end", VMM_SPARSE_WIN -
	    VMM_SPARSE_BLK, 2 * VMM_SPARSE_BLK, b, size);
	bad_form(&f, "a record past the file's end", size - 1 +
	    VMM_SPARSE_BLK, 1, b, size);
	bad_form(&f, "an empty record", 2 * VMM_SPARSE_BLK, 0, b, size);
	bad_form(&f, "a record not at a block", 2 * VMM_SPARSE_BLK + 1, 10,
	    b, size);
	bad.len = 0;
	form_add(&bad, f.p, VMM_SPARSE_HDR + 100);
	ok(unform(&bad, b, size, 4096, err, sizeof(err)) == -EINVAL,
	    "a form cut short: refused at its end (%s)", err);
	bad.len = 0;
	form_add(&bad, f.p, 9);
	ok(unform(&bad, b, size, 4096, err, sizeof(err)) == -EINVAL,
	    "... in a record's head too");

	/* nothing but zeros, and nothing */
	snprintf(cmd, sizeof(cmd), "truncate -s 0 %s && truncate -s 2M %s",
	    a, a);
	sh(cmd);
	ok(form_of(a, &f, &wins) == 0 && f.len == 0, "a file of zeros: an "
	    "empty form");
	ok(unform(&f, b, 2 * VMM_SPARSE_WIN, 4096, err, sizeof(err)) == 0 &&
	    stat(b, &st) == 0 && st.st_size == 2 * VMM_SPARSE_WIN,
	    "... written back: its size");
	free(f.p);
	free(g.p);
	free(bad.p);
}

static void
test_qcow2(void)
{
	char p[PATH_MAX], cmd[3 * PATH_MAX], err[VMM_ERRLEN], got[PATH_MAX];
	char files[4][PATH_MAX], longname[2048];

	if (!have_qemu_img) {
		ok(1, "# SKIP no qemu-img");
		return;
	}
	char o[PATH_MAX], l[PATH_MAX], r[PATH_MAX];

	snprintf(o, sizeof(o), "%s/old-root.img", top);
	snprintf(l, sizeof(l), "%s/q/much/longer/path/than/before/root.img",
	    top);
	snprintf(r, sizeof(r), "%s/r.img", top);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/q/much/longer/path/than/before"
	    " && touch %s %s %s", top, o, l, r);
	sh(cmd);
	snprintf(p, sizeof(p), "%s/q.qcow2", top);
	snprintf(cmd, sizeof(cmd), "qemu-img create -q -u -f qcow2 -F raw -b "
	    "%s %s 4M", o, p);
	sh(cmd);
	ok(vmm_qcow2_set_backing(p, l, 1, err, sizeof(err)) == 0,
	    "dry: room for a longer name (%s)", err);
	ok(vmm_chain(p, files, 4, err, sizeof(err)) == 2 &&
	    strcmp(files[1], o) == 0, "dry: nothing written");
	ok(vmm_qcow2_set_backing(p, l, 0, err, sizeof(err)) == 0,
	    "a longer name written (%s)", err);
	ok(vmm_chain(p, files, 4, err, sizeof(err)) == 2 &&
	    strcmp(files[1], l) == 0, "the header names it");
	ok(vmm_qcow2_set_backing(p, r, 0, err, sizeof(err)) == 0 &&
	    vmm_chain(p, files, 4, err, sizeof(err)) == 2 &&
	    strcmp(files[1], r) == 0, "a shorter one too");
	snprintf(cmd, sizeof(cmd), "qemu-img info %s 2>&1 | grep -q "
	    "'backing file: %s'", p, r);
	ok(system(cmd) == 0, "qemu-img reads what was written");
	memset(longname, 'x', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = '\0';
	ok(vmm_qcow2_set_backing(p, longname, 0, err, sizeof(err)) < 0,
	    "a name past what qcow2 allows: refused (%s)", err);
	snprintf(got, sizeof(got), "%s/vmlinuz-nope", top);
	put(got, "not qcow2 at all", 16);
	ok(vmm_qcow2_set_backing(got, "/x", 1, err, sizeof(err)) == -EINVAL,
	    "not qcow2: refused (%s)", err);
}

static void
test_move(struct event_base *base)
{
	struct vmm *a, *b;
	struct vmm_template ta, tb;
	struct vmm_sandbox *sb, *got;
	struct vmm_move mv;
	struct vmm_info info;
	int need[VMM_MOVE_FILES], rc;
	char err[VMM_ERRLEN], dir[PATH_MAX], p[PATH_MAX + 64], cmd[4 * PATH_MAX];
	char key[VMM_READY_KEY], files[4][PATH_MAX], rd[PATH_MAX];
	char ip[INET_ADDRSTRLEN];
	size_t i;

	a = manager(base, "a", "bma");
	b = manager(base, "b", "bmb");
	if (!ok(a != NULL && b != NULL, "two managers") ||
	    !ok(template("tpl-a", &ta) == 0 && template("tpl-b", &tb) == 0,
	    "the template on each host, at paths of its own"))
		return;
	lay_out(a, &ta, "mv1", "10.200.0.6", "", NULL);
	ok(vmm_adopt_all(a, err, sizeof(err)) == 1, "a has it (%s)", err);
	sb = vmm_sandbox_find(a, "mv1");
	if (!ok(sb != NULL && vmm_sandbox_state(sb) == VMM_SUSPENDED,
	    "suspended"))
		return;
	rc = vmm_move_export(sb, &mv, 1, err, sizeof(err));
	ok(rc == 0 && own(&mv) == 4, "exported: %zu files of its own (%s)",
	    own(&mv), err);
	/* and its template version's, named by content, for a target that
	 * lacks it; libvmm never asks for those (its caller does) */
	{
		int j = -1, k = -1, r = -1, x = 0;
		char tid[65] = "";

		for (i = 0; i < mv.n; i++) {
			if (strcmp(mv.f[i].name, "tpl.json") == 0)
				j = (int)i;
			else if (strcmp(mv.f[i].name, "tpl.kernel") == 0)
				k = (int)i;
			else if (strcmp(mv.f[i].name, "tpl.rootfs") == 0)
				r = (int)i;
			else if (strcmp(mv.f[i].name, "tpl.initrd") == 0)
				x = 1;
		}
		ok(j >= 0 && k >= 0 && r >= 0 && !x && mv.f[r].size == 4 << 20 &&
		    strlen(mv.f[j].sha256) == 64 && strcmp(mv.f[r].path,
		    ta.rootfs) == 0, "its template's files listed: template."
		    "json, kernel, image (no initramfs: it has none)");
		ok(vmm_move_sparse("tpl.rootfs") && vmm_move_sparse("tpl.kernel") &&
		    !vmm_move_sparse("tpl.json") &&
		    vmm_move_template_file("tpl.rootfs") == 3 &&
		    vmm_move_template_file("mem") == -1, "its files go as "
		    "their sparse form, as the version is named");
		ok(vmm_move_template_id(&ta, tid, err, sizeof(err)) == 0 &&
		    strcmp(tid, mv.tpl_sha256) == 0, "the manifest names the "
		    "version");
	}
	for (i = 0; i < mv.n; i++)
		diag("%s %llu %.12s %s", mv.f[i].name,
		    (unsigned long long)mv.f[i].size, mv.f[i].sha256,
		    mv.f[i].path);
	ok(vmm_sandbox_resume(sb, NULL, NULL, err, sizeof(err)) == -EBUSY,
	    "moving: a wake is refused (%s)", err);
	ok(vmm_move_export(sb, &mv, 0, err, sizeof(err)) == -EBUSY,
	    "a second export too (%s)", err);
	ok(vmm_move_export(sb, &mv, 1, err, sizeof(err)) == -EBUSY, "...");
	vmm_move_end(sb);
	ok(vmm_move_export(sb, &mv, 1, err, sizeof(err)) == 0, "after the "
	    "move's end, again (%s)", err);
	ok(vmm_move_needs(b, &mv, need, err, sizeof(err)) == 0 && need[0] &&
	    need[1] && need[2] && need[3] && !need[4] && !need[5],
	    "b needs them all, but the template's (its caller's to ask)");
	snprintf(dir, sizeof(dir), "%s/.move/mv1", b->state_dir);

	/* refusals: nothing of b's touched */
	ship(&mv, need, dir);
	snprintf(cmd, sizeof(cmd), "printf X | dd of=%s/mem bs=1 seek=3 "
	    "conv=notrunc 2>/dev/null", dir);
	sh(cmd);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EINVAL && strstr(err, "sha256") != NULL, "a changed byte: "
	    "refused (%s)", err);
	ok(!exists("%s/%s", b->state_dir, "mv1") && vmm_sandbox_find(b,
	    "mv1") == NULL && exists("%s/%s", dir, "sandbox.conf"),
	    "... nothing moved, nothing made");
	ship(&mv, need, dir);
	snprintf(p, sizeof(p), "%s/extra", dir);
	put(p, "x", 1);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EINVAL, "a file not in the manifest: refused (%s)", err);
	ship(&mv, need, dir);
	snprintf(p, sizeof(p), "%s/mem", dir);
	unlink(p);
	snprintf(cmd, sizeof(cmd), "%s/mem", sb->dir);
	(void)symlink(cmd, p);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) < 0,
	    "a link in a file's place: refused (%s)", err);
	ship(&mv, need, dir);
	mv.mem_mib = 512;
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EINVAL, "a manifest that is not sandbox.conf: refused (%s)",
	    err);
	mv.mem_mib = 256;
	free((char *)tb.cmdline);
	tb.cmdline = strdup("console=ttyS0 another=version");
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EINVAL, "another version of the template: refused (%s)", err);
	vmm_template_free(&tb);
	template("tpl-b", &tb);
	snprintf(p, sizeof(p), "printf X | dd of=%s bs=1 seek=9 conv=notrunc "
	    "2>/dev/null", tb.rootfs);
	sh(p);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EINVAL && strstr(err, "another version") != NULL, "the same "
	    "name and command line, an image with other bytes: refused (%s)",
	    err);
	snprintf(p, sizeof(p), "printf '\\000' | dd of=%s bs=1 seek=9 "
	    "conv=notrunc 2>/dev/null", tb.rootfs);
	sh(p);
	lay_out(b, &tb, "other", "10.200.0.6", "", NULL);
	ok(vmm_adopt_all(b, err, sizeof(err)) == 1, "b holds a sandbox at "
	    "that address");
	err[0] = '\0';
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) == 0 &&
	    got != NULL, "its address taken here: adopted all the same (%s)",
	    err);
	if (got != NULL) {
		vmm_sandbox_info(got, &info);
		inet_ntop(AF_INET, &info.guest_ip, ip, sizeof(ip));
		snprintf(p, sizeof(p), "grep -q '^readdress=1$' %s/mv1/"
		    "sandbox.conf", b->state_dir);
		ok(strcmp(ip, "10.200.0.2") == 0 && system(p) == 0 &&
		    strcmp(info.tap, "bmb0") == 0, "... with b's next free "
		    "address, %s (tap %s), which its restore gives its guest",
		    ip, info.tap);
		vmm_sandbox_delete(got, NULL, NULL, err, sizeof(err));
	} else
		ok(0, "... with b's next free address");
	got = vmm_sandbox_find(b, "other");
	vmm_sandbox_delete(got, NULL, NULL, err, sizeof(err));
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ship(&mv, need, dir);

	/* the adoption */
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) == 0 &&
	    got != NULL, "b adopts it (%s)", err);
	if (got != NULL) {
		vmm_sandbox_info(got, &info);
		ok(info.state == VMM_SUSPENDED && strcmp(info.tap, "bmb1") ==
		    0, "suspended, its tap b's (%s)", info.tap);
		ok(exists("%s/%s", b->state_dir, "mv1/snap/state") &&
		    exists("%s/%s", b->state_dir, "mv1/mem") &&
		    exists("%s/%s", b->state_dir, "mv1/disk.qcow2") &&
		    !exists("%s/%s", dir, "mem") &&
		    !exists("%s/%s", dir, "sandbox.conf"), "its files moved "
		    "into place");
		snprintf(p, sizeof(p), "grep -q '^rootfs=%s$' %s/mv1/"
		    "sandbox.conf", tb.rootfs, b->state_dir);
		ok(system(p) == 0, "its template's files b's");
	}
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EEXIST, "twice: refused (%s)", err);
	/* the source deletes its copy once the target has it */
	vmm_sandbox_delete(sb, NULL, NULL, err, sizeof(err));
	event_base_loop(base, EVLOOP_NONBLOCK);

	/* over a ready snapshot's layer b does not have (its own of that
	 * key would hold other bytes) */
	/* a stopped one: its disk and sandbox.conf go, no snapshot; it
	 * arrives stopped (it boots there when started) */
	lay_out(a, &ta, "mvs", "10.200.0.30", "", NULL);
	snprintf(cmd, sizeof(cmd), "cd %s/mvs && rm -r snap mem && sed -i "
	    "'s/^state=suspended$/state=stopped/' sandbox.conf", a->state_dir);
	sh(cmd);
	ok(vmm_adopt_all(a, err, sizeof(err)) == 1, "a has a stopped one (%s)",
	    err);
	sb = vmm_sandbox_find(a, "mvs");
	ok(sb != NULL && vmm_sandbox_state(sb) == VMM_STOPPED &&
	    vmm_move_export(sb, &mv, 1, err, sizeof(err)) == 0 && own(&mv) == 2 &&
	    vmm_move_index(&mv, "snap/state") < 0 &&
	    vmm_move_index(&mv, "mem") < 0 &&
	    vmm_move_index(&mv, "disk.qcow2") >= 0, "a stopped one exports: "
	    "sandbox.conf and its disk, no snapshot (%s)", err);
	ok(vmm_move_needs(b, &mv, need, err, sizeof(err)) == 0, "b needs "
	    "them");
	snprintf(dir, sizeof(dir), "%s/.move/mvs", b->state_dir);
	ship(&mv, need, dir);
	/* a suspended one's sandbox.conf without its snapshot: refused */
	snprintf(cmd, sizeof(cmd), "sed -i 's/^state=stopped$/state=suspended/' "
	    "%s/sandbox.conf && sha256sum %s/sandbox.conf", dir, dir);
	{
		FILE *pp = popen(cmd, "r");
		int k = vmm_move_index(&mv, "sandbox.conf");
		struct stat st;

		/* the manifest says what came: only sandbox.conf is wrong */
		snprintf(p, sizeof(p), "%s/sandbox.conf", dir);
		if (pp == NULL || k < 0 || fscanf(pp, "%64s", mv.f[k].sha256) !=
		    1 || stat(p, &st) < 0)
			diag("sha256sum %s failed", p);
		else
			mv.f[k].size = (uint64_t)st.st_size;
		if (pp != NULL)
			pclose(pp);
	}
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) ==
	    -EINVAL && strstr(err, "suspended, but no snap/state") != NULL,
	    "suspended without its snapshot: refused (%s)", err);
	vmm_move_end(sb);
	ok(vmm_move_export(sb, &mv, 1, err, sizeof(err)) == 0, "exported "
	    "again (%s)", err);
	ship(&mv, need, dir);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) == 0 &&
	    got != NULL && vmm_sandbox_state(got) == VMM_STOPPED &&
	    exists("%s/mvs/disk.qcow2", b->state_dir) &&
	    !exists("%s/mvs/snap/state", b->state_dir), "b adopts it, "
	    "stopped, its disk in place (%s)", err);
	vmm_move_end(sb);

	if (!have_qemu_img) {
		ok(1, "# SKIP no qemu-img");
		return;
	}
	snprintf(key, sizeof(key), "0123456789abcdef");
	snprintf(rd, sizeof(rd), "%s/.ready/%s", a->state_dir, key);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && qemu-img create -q -u -f "
	    "qcow2 -F raw -b %s %s/disk.qcow2 4M", rd, ta.rootfs, rd);
	sh(cmd);
	snprintf(p, sizeof(p), "%s/disk.qcow2", rd);
	lay_out(a, &ta, "mv2", "10.200.0.10", key, p);
	ok(vmm_adopt_all(a, err, sizeof(err)) == 1, "a has one over a ready "
	    "snapshot (%s)", err);
	sb = vmm_sandbox_find(a, "mv2");
	ok(sb != NULL && vmm_move_export(sb, &mv, 1, err, sizeof(err)) == 0 &&
	    own(&mv) == 5 && strcmp(mv.f[4].name, "base.qcow2") == 0 &&
	    mv.f[4].shared, "exported with its base, shared (%s)", err);
	ok(vmm_move_needs(b, &mv, need, err, sizeof(err)) == 0 && need[4],
	    "b needs the base");
	snprintf(dir, sizeof(dir), "%s/.move/mv2", b->state_dir);
	ship(&mv, need, dir);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) == 0,
	    "b adopts it (%s)", err);
	snprintf(p, sizeof(p), "%s/mv2/disk.qcow2", b->state_dir);
	rc = vmm_chain(p, files, 4, err, sizeof(err));
	ok(rc == 3 && strstr(files[1], "/.layers/moved-") != NULL &&
	    strncmp(files[1], b->state_dir, strlen(b->state_dir)) == 0 &&
	    strcmp(files[2], tb.rootfs) == 0, "its chain: its top, the base "
	    "in b's .layers, b's image (%d: %s %s)", rc, rc > 1 ? files[1] :
	    "", rc > 2 ? files[2] : "");
	snprintf(p, sizeof(p), "grep -q '^layered=1$' %s/mv2/sandbox.conf && "
	    "grep -q '^ready_key=$' %s/mv2/sandbox.conf", b->state_dir,
	    b->state_dir);
	ok(system(p) == 0, "layered, no ready key of b's");
	vmm_layers_gc(b);
	ok(exists("%s", files[1]), "the layers' collection keeps the "
	    "base it stands on");

	/* another one over the same base: b has it now, it is not sent */
	snprintf(p, sizeof(p), "%s/disk.qcow2", rd);
	lay_out(a, &ta, "mv3", "10.200.0.14", key, p);
	ok(vmm_adopt_all(a, err, sizeof(err)) == 1, "a has another one over "
	    "that ready snapshot");
	sb = vmm_sandbox_find(a, "mv3");
	ok(sb != NULL && vmm_move_export(sb, &mv, 0, err, sizeof(err)) == 0 &&
	    own(&mv) == 5 && strlen(mv.f[4].sha256) == 64, "exported without "
	    "hashing its own files, its base named by its sha256 (%s)", err);
	ok(vmm_move_needs(b, &mv, need, err, sizeof(err)) == 0 && !need[4] &&
	    need[0] && need[1], "b does not need the base again");
	vmm_move_end(sb);
	ok(vmm_move_export(sb, &mv, 1, err, sizeof(err)) == 0, "hashed "
	    "(what the sender does as it sends)");
	snprintf(dir, sizeof(dir), "%s/.move/mv3", b->state_dir);
	ship(&mv, need, dir);
	ok(vmm_move_adopt(b, dir, &mv, &tb, &got, err, sizeof(err)) == 0,
	    "b adopts it without its base (%s)", err);
	snprintf(p, sizeof(p), "%s/mv3/disk.qcow2", b->state_dir);
	{
		static char f3[4][PATH_MAX];

		rc = vmm_chain(p, f3, 4, err, sizeof(err));
		ok(rc == 3 && strcmp(f3[1], files[1]) == 0, "over the base "
		    "mv2 stands on (%s)", rc == 3 ? f3[1] : err);
	}

	/* mv2 moves on from b, over the base a move brought: named as a
	 * made it (its sha256 there), its bytes b's (its header names b's
	 * image); a, whose layer it is, is not sent it back; c lacks it */
	{
		struct vmm_template tc;
		struct vmm *c;
		uint64_t sz;
		char orig[65] = "";

		snprintf(p, sizeof(p), "%s/disk.qcow2", rd);
		(void)vmm_move_sha256(p, &sz, orig, err, sizeof(err));
		sb = vmm_sandbox_find(b, "mv2");
		ok(sb != NULL && vmm_move_export(sb, &mv, 1, err,
		    sizeof(err)) == 0 && own(&mv) == 5 &&
		    strcmp(mv.f[4].path, files[1]) == 0, "a sandbox over a "
		    "moved base moves on, with it (%s)", err);
		ok(strcmp(mv.base_id, orig) == 0 && strcmp(mv.f[4].sha256,
		    orig) != 0 && strcmp(mv.ready_key, key) == 0, "... named "
		    "as a made it, with a's key");
		ok(vmm_move_needs(a, &mv, need, err, sizeof(err)) == 0 &&
		    !need[4] && need[1], "a is not sent its own layer back");
		c = manager(base, "c", "bmc");
		if (ok(c != NULL && template("tpl-c", &tc) == 0, "a third "
		    "host")) {
			ok(vmm_move_needs(c, &mv, need, err, sizeof(err)) ==
			    0 && need[4], "c needs it");
			snprintf(dir, sizeof(dir), "%s/.move/mv2", c->state_dir);
			ship(&mv, need, dir);
			ok(vmm_move_adopt(c, dir, &mv, &tc, &got, err,
			    sizeof(err)) == 0, "c adopts it (%s)", err);
			snprintf(p, sizeof(p), "%s/mv2/disk.qcow2",
			    c->state_dir);
			rc = vmm_chain(p, files, 4, err, sizeof(err));
			ok(rc == 3 && strstr(files[1], orig) != NULL &&
			    strncmp(files[1], c->state_dir,
			    strlen(c->state_dir)) == 0 && strcmp(files[2],
			    tc.rootfs) == 0, "... over the base in c's .layers, "
			    "still named as a made it (%s)", rc > 1 ? files[1] :
			    err);
			snprintf(p, sizeof(p), "grep -q '^layered=1$' "
			    "%s/mv2/sandbox.conf && grep -q '^moved_key=%s$' "
			    "%s/mv2/sandbox.conf", c->state_dir, key,
			    c->state_dir);
			ok(system(p) == 0, "... layered, a's key kept as its "
			    "base's");
			vmm_template_free(&tc);
			vmm_free(c);
		}
		vmm_move_end(sb);
	}

	/* A fork's source stands on a frozen layer (bytes of its own) over
	 * a's ready layer, its top disk.1.qcow2: refused by an export,
	 * flattened first (its top rebased onto the ready layer), then it
	 * exports as one made from the ready snapshot. */
	{
		char lay[PATH_MAX], top5[PATH_MAX];
		static char f5[4][PATH_MAX];
		int flat = -1;

		snprintf(lay, sizeof(lay), "%s/.layers", a->state_dir);
		mkdir(lay, 0711);
		snprintf(lay, sizeof(lay), "%s/.layers/f5.qcow2", a->state_dir);
		snprintf(cmd, sizeof(cmd), "qemu-img create -q -u -f qcow2 -F "
		    "qcow2 -b %s/disk.qcow2 %s 4M && qemu-io -f qcow2 -c "
		    "'write -P 0x5a 0 64k' %s >/dev/null", rd, lay, lay);
		sh(cmd);
		lay_out(a, &ta, "mv5", "10.200.0.18", key, lay);
		snprintf(cmd, sizeof(cmd), "cd %s/mv5 && mv disk.qcow2 "
		    "disk.1.qcow2 && sed -i 's/^layered=0$/layered=1/; "
		    "s/^layer_gen=0$/layer_gen=1/' sandbox.conf", a->state_dir);
		sh(cmd);
		ok(vmm_adopt_all(a, err, sizeof(err)) == 1, "a has a fork's "
		    "source over a frozen layer (%s)", err);
		sb = vmm_sandbox_find(a, "mv5");
		ok(sb != NULL && vmm_move_export(sb, &mv, 1, err,
		    sizeof(err)) == -ENOTSUP, "its export alone: refused (%s)",
		    err);
		ok(sb != NULL && (rc = vmm_move_flatten(sb, flat_done, &flat,
		    err, sizeof(err))) == 1, "flattened first: started (%d %s)",
		    rc, err);
		ok(vmm_sandbox_resume(sb, NULL, NULL, err, sizeof(err)) ==
		    -EBUSY, "... moving meanwhile: a wake is refused");
		while (flat < 0 && event_base_loop(base, EVLOOP_ONCE) == 0)
			;
		ok(flat == 1, "... and done");
		snprintf(top5, sizeof(top5), "%s/mv5/disk.qcow2", a->state_dir);
		rc = vmm_chain(top5, f5, 4, err, sizeof(err));
		snprintf(p, sizeof(p), "%s/disk.qcow2", rd);
		ok(rc == 3 && strcmp(f5[1], p) == 0 && !exists("%s/mv5/"
		    "disk.1.qcow2", a->state_dir), "its top is disk.qcow2 over "
		    "the ready layer (%d: %s)", rc, rc > 1 ? f5[1] : err);
		snprintf(cmd, sizeof(cmd), "qemu-io -r -f qcow2 -c 'read -P "
		    "0x5a 0 64k' %s | grep -q 'verification failed'", top5);
		ok(system(cmd) != 0, "... holding the frozen layer's bytes");
		snprintf(p, sizeof(p), "grep -q '^layer_gen=0$' %s/mv5/"
		    "sandbox.conf && grep -q '^layered=0$' %s/mv5/sandbox.conf "
		    "&& grep -q '^ready_key=%s$' %s/mv5/sandbox.conf",
		    a->state_dir, a->state_dir, key, a->state_dir);
		ok(system(p) == 0, "... as one made from the ready snapshot");
		ok(!exists("%s", lay), "the frozen layer, used by none now, "
		    "goes");
		ok(vmm_move_export(sb, &mv, 1, err, sizeof(err)) == 0 &&
		    own(&mv) == 5 && strcmp(mv.f[4].name, "base.qcow2") == 0,
		    "then it exports, with its base (%s)", err);
		vmm_move_end(sb);
	}
	vmm_template_free(&ta);
	vmm_template_free(&tb);
	vmm_free(a);
	vmm_free(b);
}

int
main(void)
{
	struct event_base *base;
	char cmd[PATH_MAX];

	if (mkdtemp(top) == NULL || (base = event_base_new()) == NULL) {
		skip_all("mkdtemp");
		return 0;
	}
	have_qemu_img = system("qemu-img --version >/dev/null 2>&1") == 0;
	test_json();
	test_sparse();
	test_qcow2();
	test_move(base);
	event_base_free(base);
	if (tap_failed == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
		sh(cmd);
	} else
		diag("left %s", top);
	return done_testing();
}
