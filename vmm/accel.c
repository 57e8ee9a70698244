/*
 * accel.c — which accelerator a fresh boot uses, decided by the real
 * thing. /dev/kvm existing, and even the long-mode probe passing
 * (kvm_probe.c, run as root), prove too little: on the build machines
 * qemu then fails as the unprivileged VM user ("Permission denied"),
 * aborts under -cpu host ("failed to set MSR 0x10a"), or the kernel hangs
 * after "Probing EDD". So with `accel auto`, once the probe has not ruled
 * KVM out, the first fresh boot of a template is KVM's trial: the real
 * template, the real command line, as the user and groups the VMs run as,
 * with a short deadline (kvm_trial_ms). Its ready line proves KVM; a
 * qemu that dies or misses the deadline falls back to TCG (the backend
 * boots the same sandbox again under TCG) with an event. The verdict is
 * cached in <state_dir>/accel.cache, keyed by the VMM binary, the
 * template's files and the VM user, so it is taken once per host and
 * taken again when qemu, the kernel or the template change.
 *
 * How it talks to the manager: the qemu backend asks here (boot,
 * verdict) and this file calls up into vmm.c only as a backend does
 * (vmm_emit for the verdict's event, vmm_accel_name). vmm.c never calls
 * in here: the accelerator's name is vmm.c's, beside the state's and the
 * operation's, so the two files do not depend on each other.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"

#define ACCEL_CACHE "accel.cache"
#define ACCEL_CACHE_MAX 64	/* lines kept (templates x binaries) */

/* argv[0] as execvp would find it. */
void
vmm_exe_path(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH"), *p, *e;
	char cand[PATH_MAX];

	snprintf(buf, len, "%s", name);
	if (strchr(name, '/') != NULL || path == NULL)
		return;
	for (p = path; *p != '\0'; p = *e ? e + 1 : e) {
		e = strchrnul(p, ':');
		if (snprintf(cand, sizeof(cand), "%.*s/%s", (int)(e - p),
		    e > p ? p : ".", name) >= (int)sizeof(cand))
			continue;
		if (access(cand, X_OK) == 0) {
			snprintf(buf, len, "%s", cand);
			return;
		}
	}
}

/* " name=path:size:mtime" appended at *off (a missing file still has a
 * place in the key, so adding it later changes the key). */
static void
key_file(char *key, size_t len, size_t *off, const char *name,
    const char *path)
{
	struct stat st;
	int n;

	if (path == NULL || *off >= len)
		return;
	if (stat(path, &st) == 0)
		n = snprintf(key + *off, len - *off, " %s=%s:%lld:%lld.%09ld",
		    name, path, (long long)st.st_size,
		    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	else
		n = snprintf(key + *off, len - *off, " %s=%s:-", name, path);
	if (n > 0)
		*off += (size_t)n;
}

static void
accel_key(const struct vmm *m, const struct vmm_template *t, char *key,
    size_t len)
{
	char exe[PATH_MAX];
	size_t off = 0;
	int n;

	vmm_exe_path(m->vmm_binary, exe, sizeof(exe));
	n = snprintf(key, len, "v1 uid=%u:%u", (unsigned)m->cfg.vmm_uid,
	    (unsigned)m->cfg.vmm_gid);
	off = n > 0 ? (size_t)n : 0;
	key_file(key, len, &off, "vmm", exe);
	key_file(key, len, &off, "kernel", t->kernel);
	key_file(key, len, &off, "initrd", t->initrd);
	key_file(key, len, &off, "rootfs", t->rootfs);
	/* a tab or newline in a path would break the line format */
	for (n = 0; key[n] != '\0'; n++)
		if (key[n] == '\t' || key[n] == '\n')
			key[n] = '?';
}

/* The cached verdict for key: VMM_ACCEL_AUTO when there is none. Lines
 * are "accel<TAB>key<TAB>why". */
static enum vmm_accel
cache_get(const struct vmm *m, const char *key, char *why, size_t whylen)
{
	char path[PATH_MAX], line[4096], *k, *w, *nl;
	enum vmm_accel a = VMM_ACCEL_AUTO;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", m->state_dir, ACCEL_CACHE);
	if ((f = fopen(path, "re")) == NULL)
		return VMM_ACCEL_AUTO;
	while (fgets(line, sizeof(line), f) != NULL) {
		if ((nl = strchr(line, '\n')) != NULL)
			*nl = '\0';
		if ((k = strchr(line, '\t')) == NULL)
			continue;
		*k++ = '\0';
		if ((w = strchr(k, '\t')) == NULL)
			continue;
		*w++ = '\0';
		if (strcmp(k, key) != 0)
			continue;
		if (strcmp(line, "kvm") == 0)
			a = VMM_ACCEL_KVM;
		else if (strcmp(line, "tcg") == 0)
			a = VMM_ACCEL_TCG;
		else
			continue;
		snprintf(why, whylen, "%s", w);
	}
	fclose(f);
	return a;
}

/* Replace key's line (atomically: a new file renamed over the old). A
 * cache that cannot be written only means the next start decides again. */
static void
cache_put(const struct vmm *m, const char *key, enum vmm_accel a,
    const char *why)
{
	char path[PATH_MAX], tmp[PATH_MAX], line[4096], *k, *t, *nl;
	char *lines[ACCEL_CACHE_MAX];
	size_t n = 0, i;
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", m->state_dir, ACCEL_CACHE);
	snprintf(tmp, sizeof(tmp), "%s/.%s.new", m->state_dir, ACCEL_CACHE);
	if ((f = fopen(path, "re")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL &&
		    n < ACCEL_CACHE_MAX - 1) {
			if ((nl = strchr(line, '\n')) != NULL)
				*nl = '\0';
			if ((k = strchr(line, '\t')) == NULL ||
			    (t = strchr(k + 1, '\t')) == NULL)
				continue;
			if ((size_t)(t - k - 1) == strlen(key) &&
			    strncmp(k + 1, key, strlen(key)) == 0)
				continue;
			if ((lines[n] = strdup(line)) != NULL)
				n++;
		}
		fclose(f);
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	    0644);
	if (fd >= 0 && (f = fdopen(fd, "w")) == NULL)
		close(fd);
	if (fd >= 0 && f != NULL) {
		for (i = 0; i < n; i++)
			fprintf(f, "%s\n", lines[i]);
		fprintf(f, "%s\t%s\t", vmm_accel_name(a), key);
		for (; *why != '\0'; why++)
			fputc(*why == '\t' || *why == '\n' ? ' ' : *why, f);
		fputc('\n', f);
		if (fclose(f) == 0)
			(void)rename(tmp, path);
		else
			(void)unlink(tmp);
	}
	for (i = 0; i < n; i++)
		free(lines[i]);
}

/* The cached verdict for template t (AUTO: none), also made the
 * manager's current answer for vmm_accel(). */
static enum vmm_accel
verdict(struct vmm *m, const struct vmm_template *t)
{
	char key[4 * PATH_MAX], why[VMM_ERRLEN - 64];
	enum vmm_accel a;

	accel_key(m, t, key, sizeof(key));
	if ((a = cache_get(m, key, why, sizeof(why))) != VMM_ACCEL_AUTO &&
	    (m->accel != a || !m->accel_known)) {
		m->accel = a;
		m->accel_known = 1;
		snprintf(m->accel_why, sizeof(m->accel_why), "cached verdict: "
		    "%s", why);
	}
	return a;
}

enum vmm_accel
vmm_accel_template(struct vmm *m, const struct vmm_template *t)
{
	if (m->cfg.accel == VMM_ACCEL_TCG || m->cfg.accel == VMM_ACCEL_KVM ||
	    !m->kvm_possible || strcmp(m->be->name, "qemu") != 0)
		return m->accel;
	(void)verdict(m, t);
	return m->accel;
}

enum vmm_accel
vmm_accel_boot(struct vmm_sandbox *sb, int *trial)
{
	struct vmm *m = sb->m;
	enum vmm_accel a;

	*trial = 0;
	if (m->cfg.accel == VMM_ACCEL_TCG || m->cfg.accel == VMM_ACCEL_KVM)
		return m->cfg.accel;
	if (!m->kvm_possible)
		return VMM_ACCEL_TCG;
	if ((a = verdict(m, &sb->tpl)) != VMM_ACCEL_AUTO)
		return a;
	*trial = 1;
	return VMM_ACCEL_KVM;
}

void
vmm_accel_verdict(struct vmm_sandbox *sb, enum vmm_accel a, const char *why)
{
	struct vmm *m = sb->m;
	char key[4 * PATH_MAX], msg[VMM_ERRLEN];

	accel_key(m, &sb->tpl, key, sizeof(key));
	if (a == VMM_ACCEL_KVM)
		snprintf(msg, sizeof(msg), "trial boot of %s under KVM: %s",
		    sb->id, why);
	else
		snprintf(msg, sizeof(msg), "trial boot of %s under KVM failed "
		    "(%s): using TCG for template %s", sb->id, why,
		    sb->tpl.name != NULL ? sb->tpl.name : "?");
	cache_put(m, key, a, msg);
	m->accel = a;
	m->accel_known = 1;
	snprintf(m->accel_why, sizeof(m->accel_why), "%s", msg);
	vmm_emit(sb, VMM_OP_ACCEL, a == VMM_ACCEL_KVM, msg, "vmm");
}
