/*
 * test_vmm.c — libvmm pieces that need neither root nor a VM: the /30
 * address pool, MAC derivation, id rules, template loading, the KVM
 * probe's promise to answer (yes or no) within its deadline,
 * sandbox.conf's lines (kv.c), which a VMM's words must not add to, and
 * the ready snapshot key's shape (memory, vCPUs, the disk a create gets).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "nc_link.h"
#include "tap.h"
#include "vmm.h"
#include "backend.h"

static const char *
ip(struct in_addr a, char *buf)
{
	return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static void
test_pool(void)
{
	struct vmm_pool *p;
	struct in_addr base, gw, guest, g2;
	char err[VMM_ERRLEN], b1[INET_ADDRSTRLEN], b2[INET_ADDRSTRLEN];
	int i, idx;

	inet_pton(AF_INET, "10.200.0.0", &base);
	p = vmm_pool_new(base, 16, err, sizeof(err));
	ok(p != NULL, "pool 10.200.0.0/16");
	is_int((long long)vmm_pool_size(p), 16384, "a /16 holds 16384 /30s");
	idx = vmm_pool_alloc(p, &gw, &guest);
	is_int(idx, 0, "first block is 0");
	is_str(ip(gw, b1), "10.200.0.1", "gateway .1");
	is_str(ip(guest, b2), "10.200.0.2", "guest .2");
	idx = vmm_pool_alloc(p, &gw, &guest);
	is_str(ip(guest, b2), "10.200.0.6", "second guest .6");
	vmm_pool_release(p, guest);
	idx = vmm_pool_alloc(p, &gw, &g2);
	is_int(idx, 1, "a released block is reused");
	inet_pton(AF_INET, "10.200.7.10", &guest);
	is_int(vmm_pool_claim(p, guest), (7 * 256 + 8) / 4, "claim by address");
	is_int(vmm_pool_claim(p, guest), -EEXIST, "claim twice: EEXIST");
	inet_pton(AF_INET, "10.201.0.2", &guest);
	is_int(vmm_pool_claim(p, guest), -ERANGE, "claim outside: ERANGE");
	is_int((long long)vmm_pool_used(p), 3, "3 blocks used");
	vmm_pool_free(p);

	inet_pton(AF_INET, "10.200.0.0", &base);
	p = vmm_pool_new(base, 29, err, sizeof(err));
	ok(p != NULL && vmm_pool_size(p) == 2, "/29: two blocks");
	for (i = 0; i < 2; i++)
		vmm_pool_alloc(p, &gw, &guest);
	is_int(vmm_pool_alloc(p, &gw, &guest), -ENOSPC, "full pool: ENOSPC");
	vmm_pool_free(p);

	inet_pton(AF_INET, "10.200.0.1", &base);
	p = vmm_pool_new(base, 16, err, sizeof(err));
	ok(p == NULL && strstr(err, "host bits") != NULL,
	    "host bits refused: %s", err);
	p = vmm_pool_new(base, 31, err, sizeof(err));
	ok(p == NULL, "/31 refused: %s", err);
}

static void
test_mac(void)
{
	uint8_t a[6], b[6], h[6];
	char s[18];

	nc_link_mac_guest("sb-4f2a", a);
	nc_link_mac_guest("sb-4f2a", b);
	nc_link_mac_host("sb-4f2a", h);
	ok(memcmp(a, b, 6) == 0, "guest MAC is deterministic (%s)",
	    nc_link_mac_format(a, s, sizeof(s)));
	ok(a[0] == 0x02, "guest MAC locally administered unicast");
	ok((h[0] & 0x03) == 0x02, "host MAC locally administered unicast (%s)",
	    nc_link_mac_format(h, s, sizeof(s)));
	ok(memcmp(a + 1, h + 1, 5) == 0 && a[0] != h[0],
	    "host and guest differ in the first byte only");
	nc_link_mac_guest("sb-4f2b", b);
	ok(memcmp(a, b, 6) != 0, "another id, another MAC");
	is_str(nc_link_mac_format((const uint8_t[]){ 0x02, 0xab, 0, 1, 0xff,
	    0x10 }, s, sizeof(s)), "02:ab:00:01:ff:10", "MAC format");
}

static void
test_ids(void)
{
	ok(vmm_id_valid("sb-4f2a"), "sb-4f2a valid");
	ok(vmm_id_valid("a"), "a valid");
	ok(!vmm_id_valid(""), "empty invalid");
	ok(!vmm_id_valid("-a"), "leading dash invalid");
	ok(!vmm_id_valid("A"), "upper case invalid");
	ok(!vmm_id_valid("a/b"), "slash invalid");
	ok(!vmm_id_valid("a..b") && !vmm_id_valid(".."), "dots invalid");
	ok(!vmm_id_valid("abcdefghijabcdefghijabcdefghijabcdefghijabcdefghij"),
	    "50 characters invalid");
	is_str(vmm_state_name(VMM_SUSPENDED), "suspended", "state names");
	is_str(vmm_op_name(VMM_OP_RESUME), "resume", "op names");
}

static void
test_template(void)
{
	char dir[] = "/tmp/test_vmm.XXXXXX", path[256], link[256];
	char err[VMM_ERRLEN];
	struct vmm_template t;
	FILE *f;

	if (mkdtemp(dir) == NULL) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/template.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"name\":\"default\",\"kernel\":\"vmlinuz\","
	    "\"initrd\":\"initramfs.cpio.gz\",\"cmdline\":\"console=ttyS0\","
	    "\"ready_line\":\"berth-guest: ready\"}\n");
	fclose(f);
	ok(vmm_template_load(dir, &t, err, sizeof(err)) < 0 &&
	    strstr(err, "vmlinuz") != NULL, "missing kernel named: %s", err);
	snprintf(path, sizeof(path), "%s/vmlinuz", dir);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/initramfs.cpio.gz", dir);
	fclose(fopen(path, "w"));
	if (ok(vmm_template_load(dir, &t, err, sizeof(err)) == 0,
	    "template loads")) {
		snprintf(path, sizeof(path), "%s/vmlinuz", dir);
		is_str(t.kernel, path, "kernel path made absolute");
		is_str(t.ready_line, "berth-guest: ready", "ready line");
		vmm_template_free(&t);
	}
	/* a root overlay needs its image, which must be there */
	snprintf(path, sizeof(path), "%s/template.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"name\":\"debian\",\"kernel\":\"vmlinuz\","
	    "\"root_overlay\":true}\n");
	fclose(f);
	ok(vmm_template_load(dir, &t, err, sizeof(err)) < 0 &&
	    strstr(err, "root_overlay") != NULL, "root_overlay without "
	    "rootfs refused: %s", err);
	f = fopen(path, "w");
	fprintf(f, "{\"name\":\"debian\",\"kernel\":\"vmlinuz\","
	    "\"rootfs\":\"root.img\",\"root_overlay\":true}\n");
	fclose(f);
	ok(vmm_template_load(dir, &t, err, sizeof(err)) < 0 &&
	    strstr(err, "root.img") != NULL, "a missing root image named: %s",
	    err);
	snprintf(path, sizeof(path), "%s/root.img", dir);
	fclose(fopen(path, "w"));
	/* through a link (templates/<name>/current): the real paths */
	snprintf(link, sizeof(link), "%s.link", dir);
	(void)unlink(link);
	if (symlink(dir, link) == 0 &&
	    ok(vmm_template_load(link, &t, err, sizeof(err)) == 0,
	    "overlay template loads: %s", err)) {
		ok(t.root_overlay == 1, "root_overlay read");
		is_str(t.rootfs, path, "rootfs by its real path, not the link's");
		vmm_template_free(&t);
	}
	(void)unlink(link);
	snprintf(path, sizeof(path), "%s/template.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"name\": \n");
	fclose(f);
	ok(vmm_template_load(dir, &t, err, sizeof(err)) < 0 &&
	    strstr(err, "template.json:") != NULL, "bad JSON cites file:line: %s",
	    err);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	if (system(path) != 0)
		diag("cleanup failed");
}

static void
test_kvm_probe(void)
{
	struct timespec a, b;
	char why[256];
	long ms;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &a);
	r = vmm_kvm_probe(800, why, sizeof(why));
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	ok(r == 0 || r == 1, "KVM probe gives a definite answer: %s (%s)",
	    r ? "KVM" : "TCG", why);
	/* its deadline is 800 ms; a loaded machine may be slower than that
	 * to fork and reap, so the bound only rules out a hang */
	ok(ms < 10000, "KVM probe answered in %ld ms (bounded: < 10 s)", ms);
	if (getenv("BERTH_EXPECT_TCG") != NULL)
		is_int(r, 0, "KVM probe chooses TCG here (BERTH_EXPECT_TCG)");
}

struct kv_seen {
	char keys[8][32], vals[8][256];
	int n;
};

static int
kv_collect(const char *k, const char *v, void *arg)
{
	struct kv_seen *ks = arg;

	if (ks->n < 8) {
		snprintf(ks->keys[ks->n], sizeof(ks->keys[0]), "%s", k);
		snprintf(ks->vals[ks->n++], sizeof(ks->vals[0]), "%s", v);
	}
	return 0;
}

/* Reads text as sandbox.conf: vmm_kv_read's result, err in err. */
static int
kv_parse(const char *text, struct kv_seen *ks, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int rc;

	memset(ks, 0, sizeof(*ks));
	err[0] = '\0';
	rc = vmm_kv_read(f, kv_collect, ks, err, errlen);
	fclose(f);
	return rc;
}

static void
test_kv(void)
{
	static const char evil[] = "host-qmp\nreason\\\ntap=evil0\nkernel=/x "
	    "\x1b[31m\t=\r";
	char *buf = NULL, err[256], big[20000], clean[16];
	size_t len = 0;
	struct kv_seen ks;
	FILE *f;

	/* a value with newlines, '=', backslashes and control bytes */
	f = open_memstream(&buf, &len);
	ok(vmm_kv_write(f, "reason", evil) == 0 &&
	    vmm_kv_write(f, "tap", "b0") == 0, "write");
	fclose(f);
	is_int(kv_parse(buf, &ks, err, sizeof(err)), 0, "read back");
	ok(ks.n == 2 && strcmp(ks.keys[0], "reason") == 0 &&
	    strcmp(ks.vals[0], evil) == 0, "the value whole, not a line more");
	ok(ks.n == 2 && strcmp(ks.keys[1], "tap") == 0 &&
	    strcmp(ks.vals[1], "b0") == 0, "the real tap kept");
	free(buf);
	is_int(kv_parse("tap=b0\nid=x\ntap=evil0\n", &ks, err, sizeof(err)),
	    -EINVAL, "a key twice: the file refused");
	ok(strstr(err, "'tap' a second time") != NULL, "... saying so: %s", err);
	is_int(kv_parse("tap=b\\q\n", &ks, err, sizeof(err)), -EINVAL,
	    "a broken escape refused");
	is_int(kv_parse("tap=b\\x00\n", &ks, err, sizeof(err)), -EINVAL,
	    "an escaped NUL refused");
	is_int(kv_parse("just words\n", &ks, err, sizeof(err)), -EINVAL,
	    "a line without '=' refused");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "cmdline=", 8);
	is_int(kv_parse(big, &ks, err, sizeof(err)), -EINVAL,
	    "a line no value fits in refused (a split could add a key)");
	vmm_text_clean(clean, sizeof(clean), "panic\x1b[2J\nnow more text");
	is_str(clean, "panic?[2J?now m", "a VMM's text: bounded, no control "
	    "bytes");
}

/* The ready snapshot's key names its shape: memory, vCPUs and the disk
 * as a create gets it (vmm_disk_effective: 0 the manager's default, a
 * root overlay's at least its image), so a create without a disk and
 * one with the default's share it, as do a --disk below the image and
 * the image's, and a larger disk has its own. */
static void
test_ready_key(void)
{
	char dir[] = "/tmp/test_vmm_rk.XXXXXX", p[256], err[VMM_ERRLEN];
	char k0[VMM_READY_KEY], k1[VMM_READY_KEY], k2[VMM_READY_KEY];
	char k3[VMM_READY_KEY], k4[VMM_READY_KEY], k5[VMM_READY_KEY];
	struct event_base *base;
	struct vmm_template t;
	struct vmm_config cfg;
	struct vmm *m;
	FILE *f;

	if (mkdtemp(dir) == NULL || (base = event_base_new()) == NULL) {
		ok(0, "mkdtemp, event base");
		return;
	}
	snprintf(p, sizeof(p), "%s/template.json", dir);
	f = fopen(p, "w");
	fprintf(f, "{\"name\":\"debian\",\"kernel\":\"vmlinuz\","
	    "\"rootfs\":\"root.img\",\"root_overlay\":true,"
	    "\"agent\":\"berth.agent\"}\n");
	fclose(f);
	snprintf(p, sizeof(p), "%s/vmlinuz", dir);
	fclose(fopen(p, "w"));
	snprintf(p, sizeof(p), "%s/root.img", dir);	/* 1.5 MiB: 2 */
	f = fopen(p, "w");
	if (f == NULL || ftruncate(fileno(f), 3 << 19) < 0) {
		ok(0, "root.img");
		return;
	}
	fclose(f);
	memset(&cfg, 0, sizeof(cfg));
	snprintf(p, sizeof(p), "%s/st", dir);
	cfg.state_dir = p;
	cfg.backend = "qemu";
	cfg.vmm_binary = "/bin/true";
	cfg.accel = VMM_ACCEL_TCG;
	cfg.external_taps = 1;
	cfg.disk_mib = 8;		/* larger than the image */
	cfg.tsc_khz = 2000000;
	m = vmm_new(base, &cfg, err, sizeof(err));
	if (m != NULL)
		snprintf(err, sizeof(err), "loaded");
	if (!ok(m != NULL, "a manager (%s)", m != NULL ? "qemu" : err) ||
	    !ok(vmm_template_load(dir, &t, err, sizeof(err)) == 0,
	    "a root overlay template (%s)", err)) {
		if (m != NULL)
			vmm_free(m);
		event_base_free(base);
		return;
	}
	is_int(vmm_disk_effective(m, &t, 0), 8, "no disk: the manager's "
	    "default (above the image)");
	is_int(vmm_disk_effective(m, &t, 1), 2, "a --disk below the image: "
	    "the image's size");
	is_int(vmm_disk_effective(m, &t, 16384), 16384, "a larger --disk: it");
	t.root_overlay = 0;
	is_int(vmm_disk_effective(m, &t, 1), 1, "no root overlay: as asked");
	t.root_overlay = 1;
	vmm_ready_key(m, &t, 0, 0, 0, k0);
	vmm_ready_key(m, &t, 0, 0, 8, k1);
	vmm_ready_key(m, &t, 0, 0, 1, k2);
	vmm_ready_key(m, &t, 0, 0, 2, k3);
	ok(strlen(k0) == VMM_READY_KEY - 1, "a key: %s", k0);
	ok(strcmp(k0, k1) == 0, "no disk and the default's (what berthd's "
	    "API gives a create without --disk): one key");
	ok(strcmp(k2, k3) == 0, "a --disk below the image and the image's: "
	    "one key");
	ok(strcmp(k0, k2) != 0, "... not the default's");
	vmm_ready_key(m, &t, 0, 0, 16384, k3);
	vmm_ready_key(m, &t, 2048, 0, 16384, k4);
	vmm_ready_key(m, &t, 0, 0, 4096, k5);
	ok(strcmp(k0, k3) != 0 && strcmp(k3, k5) != 0, "a larger disk: a key "
	    "of its own, one per size");
	ok(strcmp(k3, k4) != 0, "memory is the shape's too");
	vmm_ready_key(m, &t, 2048, 0, 16384, k5);
	is_str(k5, k4, "the same shape: the same key");
	vmm_template_free(&t);
	vmm_free(m);
	event_base_free(base);
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	if (system(p) != 0)
		diag("could not remove %s", dir);
}

int
main(void)
{
	test_pool();
	test_mac();
	test_ids();
	test_template();
	test_kvm_probe();
	test_kv();
	test_ready_key();
	return done_testing();
}
