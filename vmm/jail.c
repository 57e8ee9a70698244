/*
 * jail.c — each sandbox's VMM confined as Firecracker's jailer confines
 * it. The VMM process starts in new mount, PID and IPC namespaces, its
 * root (chroot) the sandbox's jail directory, which holds only that VM's
 * files (disk, RAM file, console, a run/ directory for its control
 * socket) and read-only bind mounts of what qemu itself needs: the
 * template's kernel, initramfs and root image, /usr (qemu is dynamically
 * linked; its libraries and firmware live there), and /dev/null, zero,
 * urandom (and kvm under KVM). Then a uid and gid of its own, no
 * supplementary groups, no_new_privs, resource limits, and the cgroups it
 * is given, before exec. The tap comes as an open file descriptor: there
 * is no /dev/net/tun in the jail.
 *
 * Layout, all made by root here, before the VMM exists:
 *   <dir>/            root 0700: sandbox.conf, logs, snap/ (snapshots,
 *                     handed to qemu as descriptors, never as paths)
 *   <dir>/jail/       root 0755: the VMM cannot add, remove or replace
 *                     an entry, so nothing root opens there can become a
 *                     symlink
 *   <dir>/jail/run/   the VM user's 0700: its control socket
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/if_tun.h>
#include <net/if.h>

#include "backend.h"

/* A mount point: an empty file (or directory) owned by root, made once;
 * anything else in its place is an error (never followed). */
static int
point(int dfd, const char *name, int dir, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if ((dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) &&
		    st.st_uid == 0)
			return 0;
		snprintf(err, errlen, "jail: %s is not a root-owned %s", name,
		    dir ? "directory" : "file");
		return -EEXIST;
	}
	if (dir) {
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
			goto fail;
		return 0;
	}
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0444);
	if (fd < 0)
		goto fail;
	close(fd);
	return 0;
fail:
	snprintf(err, errlen, "jail: %s: %s", name, strerror(errno));
	return -errno;
}

/* The same symlink as the host's root has (merged /usr: /lib -> usr/lib). */
static int
link_like_host(int dfd, const char *name, char *err, size_t errlen)
{
	char host[64], target[256];
	ssize_t n;

	snprintf(host, sizeof(host), "/%s", name);
	if ((n = readlink(host, target, sizeof(target) - 1)) < 0)
		return 0;	/* a directory (or absent): bound, if needed */
	target[n] = '\0';
	if (symlinkat(target, dfd, name) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "jail: %s: %s", name, strerror(errno));
		return -errno;
	}
	return 0;
}

int
vmm_jail_prepare(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	static const char *const links[] = { "bin", "lib", "lib64", "sbin" };
	static const char *const devs[] = { "null", "zero", "urandom", "kvm" };
	char p[PATH_MAX];
	int dfd = -1, ddev = -1, rc;
	size_t i;
	struct stat st;

	if (mkdir(sb->jdir, 0755) < 0 && errno != EEXIST)
		return snprintf(err, errlen, "jail %s: %s", sb->jdir,
		    strerror(errno)), -errno;
	if ((dfd = open(sb->jdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return snprintf(err, errlen, "jail %s: %s", sb->jdir,
		    strerror(errno)), -errno;
	if (fstat(dfd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		rc = -EPERM;
		snprintf(err, errlen, "jail %s: must be root's and not writable "
		    "by others", sb->jdir);
		goto out;
	}
	if ((rc = point(dfd, "usr", 1, err, errlen)) < 0 ||
	    (rc = point(dfd, "dev", 1, err, errlen)) < 0 ||
	    (rc = point(dfd, "kernel", 0, err, errlen)) < 0 ||
	    (rc = point(dfd, "initrd", 0, err, errlen)) < 0 ||
	    (rc = point(dfd, "rootfs", 0, err, errlen)) < 0 ||
	    (rc = point(dfd, "base.qcow2", 0, err, errlen)) < 0 ||
	    (rc = point(dfd, "proc", 1, err, errlen)) < 0)
		goto out;
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if ((rc = link_like_host(dfd, links[i], err, errlen)) < 0)
			goto out;
	if ((ddev = openat(dfd, "dev", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "jail: dev: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
		if ((rc = point(ddev, devs[i], 0, err, errlen)) < 0)
			goto out;
	/* run/: the one directory the VMM may write (its QMP socket) */
	if (mkdirat(dfd, "run", 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "jail: run: %s", strerror(errno));
		goto out;
	}
	if ((rc = vmm_jail_own(dfd, "run", sb->uid, sb->gid, 0700, err,
	    errlen)) < 0)
		goto out;
	(void)p;
	rc = 0;
out:
	if (ddev >= 0)
		close(ddev);
	close(dfd);
	return rc;
}

int
vmm_jail_own(int dfd, const char *name, uid_t uid, gid_t gid, mode_t mode,
    char *err, size_t errlen)
{
	int fd, e;

	/* O_PATH would not do for fchown; a directory or a regular file is
	 * opened for reading, never through a symlink. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "%s: %s", name, strerror(e));
		return -e;
	}
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0) {
		e = errno;
		close(fd);
		snprintf(err, errlen, "%s: chown %u: %s", name, (unsigned)uid,
		    strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

/* The sandbox's tap, opened here: a jailed VMM has no /dev/net/tun. */
int
vmm_jail_tap_open(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct ifreq ifr;
	int fd, e;

	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "/dev/net/tun: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", sb->tap);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		e = errno;
		close(fd);
		snprintf(err, errlen, "tap %s: %s", sb->tap, strerror(e));
		return -1;
	}
	return fd;
}

/* mkdir -p of path (absolute) under the jail, root's 0755 directories. */
int
vmm_jail_mkdirs(const char *jdir, const char *path)
{
	char p[PATH_MAX], *c;

	if (snprintf(p, sizeof(p), "%s%s", jdir, path) >= (int)sizeof(p))
		return -1;
	for (c = p + strlen(jdir) + 1; *c != '\0'; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*c = '/';
	}
	return mkdir(p, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* ---- spawning into the jail ---- */

/* What the child was doing when it failed: reported with its errno as
 * one int (stage * JAIL_STAGE + errno), so the caller's message names the
 * step, and a bind names its source ("bind /dev/kvm: No such file or
 * directory" on a host without KVM). */
#define JAIL_STAGE	4096
enum { JS_SETUP = 0, JS_CGROUP, JS_PRIVATE, JS_CHROOT, JS_IDS, JS_NNP,
    JS_RLIMIT, JS_EXEC, JS_PROC, JS_BIND /* + the bind's index */ };

/* In the child: report errno e at stage st through the exec pipe. */
static void __attribute__((noreturn))
child_fail(int pfd, int st, int e)
{
	int v = st * JAIL_STAGE + (e > 0 && e < JAIL_STAGE ? e : EIO);

	if (write(pfd, &v, sizeof(v)) < 0)
		_exit(127);
	_exit(127);
}

static void
stage_text(const struct vmm_jail *j, int st, char *buf, size_t len)
{
	static const char *const names[] = { "", "cgroup", "mount namespace",
	    "chroot", "user and group", "no_new_privs", "resource limits", "",
	    "mount proc" };

	if (st >= JS_BIND && st - JS_BIND < j->nbinds)
		snprintf(buf, len, "bind %s: ", j->binds[st - JS_BIND].src);
	else if (st > 0 && st < JS_BIND && names[st][0] != '\0')
		snprintf(buf, len, "%s: ", names[st]);
	else
		buf[0] = '\0';
}

static int
bind_ro(const char *src, const char *root, const char *dst, int dev)
{
	char target[PATH_MAX];
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID;

	if (snprintf(target, sizeof(target), "%s/%s", root, dst) >=
	    (int)sizeof(target))
		return -1;
	if (mount(src, target, NULL, MS_BIND, NULL) < 0)
		return -1;
	if (!dev)
		fl |= MS_NODEV;
	/* a device node must stay usable and writable (/dev/null) */
	if (dev)
		fl &= ~(unsigned long)MS_RDONLY;
	return mount(NULL, target, NULL, fl, NULL);
}

/* Write "0" (this process) into each cgroup.procs file. */
static int
cgroup_enter(const char *const *procs)
{
	int fd;

	for (; procs != NULL && *procs != NULL; procs++) {
		if ((fd = open(*procs, O_WRONLY | O_CLOEXEC)) < 0)
			return -1;
		if (write(fd, "0", 1) != 1) {
			close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

pid_t
vmm_jail_spawn(char *const argv[], const char *logpath,
    const struct vmm_jail *j, char *err, size_t errlen)
{
	int pfd[2], e, fd, logfd, i;
	pid_t pid;

	if (vmm_spawn_prepare(logpath, &logfd, pfd, err, errlen) < 0)
		return -1;
	/* fork with new mount, PID, IPC and network namespaces: the VMM is
	 * the first process of its PID namespace and our child, and its
	 * network is loopback only (its tap comes as a descriptor, its
	 * sockets are files in the jail): an escaped VMM reaches neither
	 * the host's addresses nor other guests past their egress rules */
	pid = (pid_t)syscall(SYS_clone, (unsigned long)(SIGCHLD | CLONE_NEWNS |
	    CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET), NULL, NULL, NULL, 0UL);
	if (pid < 0) {
		snprintf(err, errlen, "clone (mount, PID, IPC and network "
		    "namespaces): %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		struct rlimit rl;
		int keep[VMM_JAIL_FDS];

		vmm_spawn_child_stdio(logfd);
		/* the exec report pipe at a high number, the kept
		 * descriptors (the tap) at 3, 4, ... in order */
		if ((fd = fcntl(pfd[1], F_DUPFD_CLOEXEC, 100)) < 0)
			_exit(127);
		pfd[1] = fd;
		for (i = 0; i < j->nfds; i++)
			if ((keep[i] = fcntl(j->fds[i], F_DUPFD, 110)) < 0)
				child_fail(pfd[1], JS_SETUP, errno);
		for (i = 0; i < j->nfds; i++) {
			if (dup2(keep[i], 3 + i) < 0)
				child_fail(pfd[1], JS_SETUP, errno);
			close(keep[i]);
		}
		if (dup2(pfd[1], 3 + j->nfds) < 0)
			child_fail(pfd[1], JS_SETUP, errno);
		close(pfd[1]);
		pfd[1] = 3 + j->nfds;
		(void)fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
		if (syscall(SYS_close_range, (unsigned)pfd[1] + 1, ~0U, 0U) < 0)
			for (fd = pfd[1] + 1; fd < 65536; fd++)
				close(fd);
		if (cgroup_enter(j->cgroups) < 0)
			child_fail(pfd[1], JS_CGROUP, errno);
		/* nothing we mount is seen outside */
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			child_fail(pfd[1], JS_PRIVATE, errno);
		for (i = 0; i < j->nbinds; i++)
			if (bind_ro(j->binds[i].src, j->root, j->binds[i].dst,
			    j->binds[i].dev) < 0)
				child_fail(pfd[1], JS_BIND + i, errno);
		/* A clone's RAM is a descriptor qemu opens by path: a proc
		 * of this PID namespace, its processes only (subset=pid),
		 * each visible to itself only */
		if (j->proc) {
			char pp[PATH_MAX];

			snprintf(pp, sizeof(pp), "%s/proc", j->root);
			if (mount("proc", pp, "proc", MS_NOSUID | MS_NODEV |
			    MS_NOEXEC, "subset=pid,hidepid=invisible") < 0)
				child_fail(pfd[1], JS_PROC, errno);
		}
		if (chroot(j->root) < 0 || chdir("/") < 0)
			child_fail(pfd[1], JS_CHROOT, errno);
		if (setgroups(0, NULL) < 0 || setgid(j->gid) < 0 ||
		    setuid(j->uid) < 0)
			child_fail(pfd[1], JS_IDS, errno);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			child_fail(pfd[1], JS_NNP, errno);
		rl.rlim_cur = rl.rlim_max = 0;
		(void)setrlimit(RLIMIT_CORE, &rl);
		rl.rlim_cur = rl.rlim_max = j->nofile;
		if (j->nofile != 0 && setrlimit(RLIMIT_NOFILE, &rl) < 0)
			child_fail(pfd[1], JS_RLIMIT, errno);
		rl.rlim_cur = rl.rlim_max = j->nproc;
		if (j->nproc != 0 && setrlimit(RLIMIT_NPROC, &rl) < 0)
			child_fail(pfd[1], JS_RLIMIT, errno);
		rl.rlim_cur = rl.rlim_max = j->fsize;
		if (j->fsize != 0 && setrlimit(RLIMIT_FSIZE, &rl) < 0)
			child_fail(pfd[1], JS_RLIMIT, errno);
		/* No transparent huge pages for the VMM's own anonymous
		 * memory (inherited across exec): TCG's translation buffer
		 * asks for them, and an idle guest that translated 3 MiB of
		 * code then held 16 MiB of it (2 MiB at a time) - a quarter
		 * of a restored clone's memory. Its RAM is a file. */
		(void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
		execv(argv[0], argv);
		child_fail(pfd[1], JS_EXEC, errno);
	}
	if ((e = vmm_spawn_confirm(pid, pfd, logfd)) != 0) {
		char st[PATH_MAX + 16];

		stage_text(j, e / JAIL_STAGE, st, sizeof(st));
		snprintf(err, errlen, "cannot start %s in the jail %s: %s%s",
		    argv[0], j->root, st, strerror(e % JAIL_STAGE));
		return -1;
	}
	return pid;
}
