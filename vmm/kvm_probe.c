/*
 * kvm_probe.c — does KVM really run a guest here? /dev/kvm existing, and
 * even a real-mode guest reaching an I/O exit, prove little: under nested
 * virtualization on the build machines both succeed and a real kernel
 * then hangs. So the probe starts its vCPU directly in 64-bit long mode
 * with paging on (identity-mapped 2 MiB page, PML4 -> PDPT -> PD), and
 * the guest code must write through that mapping, read it back, and
 * report the value with an OUT — the things a kernel does first. The
 * vCPU runs in a child process so that a hung KVM_RUN costs a SIGKILL,
 * not the caller; the caller waits at most timeout_ms.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvm.h>

#include "vmm.h"

#define MEM_SIZE	0x200000	/* one 2 MiB page */
#define PML4		0x1000
#define PDPT		0x2000
#define PD		0x3000
#define CODE		0x8000
#define PROBE_PORT	0x10
#define MAGIC		0x5a

/* mov dword [0x100000], 0x5a; mov eax, [0x100000]; out 0x10, al; hlt */
static const unsigned char probe_code[] = {
	0xc7, 0x04, 0x25, 0x00, 0x00, 0x10, 0x00, MAGIC, 0x00, 0x00, 0x00,
	0x8b, 0x04, 0x25, 0x00, 0x00, 0x10, 0x00,
	0xe6, PROBE_PORT,
	0xf4,
};

/* In the child: 0 and the port byte in *val when the guest reached its
 * OUT; otherwise a message in why. */
static int
probe_run(unsigned char *val, char *why, size_t len)
{
	struct kvm_userspace_memory_region reg;
	struct kvm_segment seg;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run;
	unsigned char *mem;
	uint64_t *pt;
	int kvm, vm, vcpu, runsz;

	if ((kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC)) < 0) {
		snprintf(why, len, "/dev/kvm: %s", strerror(errno));
		return -1;
	}
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		snprintf(why, len, "KVM API version mismatch");
		return -1;
	}
	if ((vm = ioctl(kvm, KVM_CREATE_VM, 0)) < 0) {
		snprintf(why, len, "KVM_CREATE_VM: %s", strerror(errno));
		return -1;
	}
	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		snprintf(why, len, "mmap: %s", strerror(errno));
		return -1;
	}
	memset(&reg, 0, sizeof(reg));
	reg.guest_phys_addr = 0;
	reg.memory_size = MEM_SIZE;
	reg.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &reg) < 0) {
		snprintf(why, len, "KVM_SET_USER_MEMORY_REGION: %s",
		    strerror(errno));
		return -1;
	}
	pt = (uint64_t *)(mem + PML4);
	pt[0] = PDPT | 0x3;			/* present, writable */
	pt = (uint64_t *)(mem + PDPT);
	pt[0] = PD | 0x3;
	pt = (uint64_t *)(mem + PD);
	pt[0] = 0x0 | 0x83;			/* 2 MiB page at 0 */
	memcpy(mem + CODE, probe_code, sizeof(probe_code));

	if ((vcpu = ioctl(vm, KVM_CREATE_VCPU, 0)) < 0) {
		snprintf(why, len, "KVM_CREATE_VCPU: %s", strerror(errno));
		return -1;
	}
	runsz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (runsz <= 0) {
		snprintf(why, len, "KVM_GET_VCPU_MMAP_SIZE: %s", strerror(errno));
		return -1;
	}
	run = mmap(NULL, (size_t)runsz, PROT_READ | PROT_WRITE, MAP_SHARED,
	    vcpu, 0);
	if (run == MAP_FAILED) {
		snprintf(why, len, "mmap kvm_run: %s", strerror(errno));
		return -1;
	}
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0) {
		snprintf(why, len, "KVM_GET_SREGS: %s", strerror(errno));
		return -1;
	}
	memset(&seg, 0, sizeof(seg));
	seg.base = 0;
	seg.limit = 0xffffffff;
	seg.selector = 1 << 3;
	seg.present = 1;
	seg.type = 11;		/* code: execute, read, accessed */
	seg.dpl = 0;
	seg.db = 0;
	seg.s = 1;
	seg.l = 1;		/* 64-bit */
	seg.g = 1;
	sregs.cs = seg;
	seg.type = 3;		/* data: read, write, accessed */
	seg.selector = 2 << 3;
	seg.l = 0;
	seg.db = 1;
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = seg;
	sregs.cr3 = PML4;
	sregs.cr4 = 1u << 5;				/* PAE */
	sregs.cr0 = 1u | (1u << 4) | (1u << 5) | (1u << 31); /* PE ET NE PG */
	sregs.efer = (1u << 8) | (1u << 10);		/* LME LMA */
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0) {
		snprintf(why, len, "KVM_SET_SREGS (long mode): %s",
		    strerror(errno));
		return -1;
	}
	memset(&regs, 0, sizeof(regs));
	regs.rip = CODE;
	regs.rsp = 0x7000;
	regs.rflags = 2;
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0) {
		snprintf(why, len, "KVM_SET_REGS: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				continue;
			snprintf(why, len, "KVM_RUN: %s", strerror(errno));
			return -1;
		}
		switch (run->exit_reason) {
		case KVM_EXIT_IO:
			if (run->io.direction == KVM_EXIT_IO_OUT &&
			    run->io.port == PROBE_PORT) {
				*val = *((unsigned char *)run + run->io.data_offset);
				return 0;
			}
			snprintf(why, len, "unexpected I/O exit (port 0x%x)",
			    run->io.port);
			return -1;
		case KVM_EXIT_HLT:
			snprintf(why, len, "guest halted before its I/O");
			return -1;
		default:
			snprintf(why, len, "guest exit reason %u (shutdown or "
			    "failed entry: long mode does not work)",
			    run->exit_reason);
			return -1;
		}
	}
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int
vmm_kvm_probe(unsigned timeout_ms, char *why, size_t whylen)
{
	char msg[256];
	struct pollfd pfd;
	uint64_t t0 = mono_ms(), left;
	unsigned char val = 0;
	int p[2], rc, n, st;
	pid_t pid;

	if (access("/dev/kvm", R_OK | W_OK) < 0) {
		snprintf(why, whylen, "no usable /dev/kvm (%s): TCG",
		    strerror(errno));
		return 0;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "pipe: %s: TCG", strerror(errno));
		return 0;
	}
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		snprintf(why, whylen, "fork: %s: TCG", strerror(errno));
		return 0;
	}
	if (pid == 0) {
		close(p[0]);
		alarm((timeout_ms + 999) / 1000 + 1);	/* belt and braces */
		if (probe_run(&val, msg, sizeof(msg)) == 0)
			snprintf(msg, sizeof(msg), "OK %u", val);
		if (write(p[1], msg, strlen(msg)) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	for (;;) {
		uint64_t el = mono_ms() - t0;

		left = el >= timeout_ms ? 0 : timeout_ms - el;
		rc = poll(&pfd, 1, (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		break;
	}
	if (rc <= 0) {
		kill(pid, SIGKILL);
		close(p[0]);
		/* A vCPU stuck in a broken nested hypervisor may take a
		 * moment to die; do not wait for it long. */
		for (n = 0; n < 20 && waitpid(pid, &st, WNOHANG) == 0; n++)
			usleep(5000);
		snprintf(why, whylen, "a long-mode guest did not reach its I/O "
		    "exit within %u ms (nested KVM hangs?): TCG", timeout_ms);
		return 0;
	}
	n = (int)read(p[0], msg, sizeof(msg) - 1);
	close(p[0]);
	msg[n > 0 ? n : 0] = '\0';
	kill(pid, SIGKILL);
	(void)waitpid(pid, &st, 0);
	if (strncmp(msg, "OK ", 3) == 0) {
		if (atoi(msg + 3) == MAGIC) {
			snprintf(why, whylen, "long-mode guest with paging ran "
			    "in %llu ms: KVM",
			    (unsigned long long)(mono_ms() - t0));
			return 1;
		}
		snprintf(why, whylen, "long-mode guest read back 0x%x, not "
		    "0x%x (broken paging): TCG", (unsigned)atoi(msg + 3), MAGIC);
		return 0;
	}
	snprintf(why, whylen, "%s: TCG", n > 0 ? msg : "probe died");
	return 0;
}
