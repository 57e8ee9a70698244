# vmm: fragment of the top Makefile.am
# SPDX-License-Identifier: GPL-2.0-or-later

# libvmm: the sandbox manager, its backends and the KVM probe.
noinst_LIBRARIES += vmm/libvmm.a
vmm_libvmm_a_SOURCES = vmm/vmm.h vmm/backend.h vmm/vmm.c vmm/util.c \
	vmm/qmp.c vmm/qmp.h vmm/qemu.c vmm/console.c vmm/console.h vmm/firecracker.c vmm/kvm_probe.c \
	vmm/accel.c vmm/jail.c vmm/cgroup.c vmm/agent.c vmm/ident.c vmm/ready.c \
	vmm/layers.c vmm/fork.c vmm/image.c vmm/kv.c vmm/capacity.c \
	vmm/export.c
vmm_libvmm_a_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS) \
	$(OPENSSL_CFLAGS)
# libvmm uses libnetctl's link side (taps over rtnetlink).
VMM_LIBS = vmm/libvmm.a netctl/libnetctl.a $(LIBEVENT_LIBS) $(JANSSON_LIBS) \
	$(LIBNFTNL_LIBS) $(LIBMNL_LIBS) $(OPENSSL_LIBS)

# Unit tests (no root, no VM).
check_PROGRAMS += tests/unit/test_vmm tests/unit/test_vmm_qmp \
	tests/unit/test_vmm_mock_firecracker tests/unit/test_image
TESTS += tests/unit/test_vmm tests/unit/test_vmm_qmp \
	tests/unit/test_vmm_mock_firecracker tests/unit/test_image
# Capacity's arithmetic (capacity.c): which sandbox a cap suspends, which
# suspended ones hold standbys within the budget, the estimates.
check_PROGRAMS += tests/unit/test_vmm_cap
TESTS += tests/unit/test_vmm_cap
tests_unit_test_vmm_cap_SOURCES = tests/unit/test_vmm_cap.c tests/unit/tap.h
tests_unit_test_vmm_cap_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_vmm_cap_LDADD = $(VMM_LIBS)
# A captured stream split into a RAM image and the rest (fork.c).
tests_unit_test_image_SOURCES = tests/unit/test_image.c tests/unit/tap.h
tests_unit_test_image_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_image_LDADD = $(VMM_LIBS)
tests_unit_test_vmm_SOURCES = tests/unit/test_vmm.c tests/unit/tap.h
tests_unit_test_vmm_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_vmm_LDADD = $(VMM_LIBS)
tests_unit_test_vmm_qmp_SOURCES = tests/unit/test_vmm_qmp.c tests/unit/tap.h
tests_unit_test_vmm_qmp_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_vmm_qmp_LDADD = $(VMM_LIBS)
# Firecracker cannot run here: its backend is tested against a mock that
# answers as Firecracker's OpenAPI description says (the test binary
# doubles as the fake `firecracker`).
tests_unit_test_vmm_mock_firecracker_SOURCES = \
	tests/unit/test_vmm_mock_firecracker.c tests/unit/tap.h
tests_unit_test_vmm_mock_firecracker_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_vmm_mock_firecracker_LDADD = $(VMM_LIBS)

# Integration: a real VM's whole lifecycle through the manager
# (root, TCG, a private network namespace).
check_PROGRAMS += tests/integ/vmm_drive
tests_integ_vmm_drive_SOURCES = tests/integ/vmm_drive.c
tests_integ_vmm_drive_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_integ_vmm_drive_LDADD = $(VMM_LIBS)
TESTS += tests/integ/vmm-lifecycle.sh
EXTRA_DIST += tests/integ/vmm-lifecycle.sh

# The guest test app: static (it goes into the guest initramfs) and built
# without sanitizers, which do not mix with -static. Installed beside the
# template builder: berthd builds its default template at run time.
pkglibexec_PROGRAMS = vmm/guest/testapp vmm/guest/berth-agent
vmm_guest_testapp_SOURCES = vmm/guest/testapp.c vmm/proto/status.c vmm/proto/status.h
vmm_guest_testapp_CFLAGS = $(WARN_CFLAGS)
vmm_guest_testapp_LDFLAGS = -static -pthread
# The guest agent (exec for the API), static and unsanitized likewise.
vmm_guest_berth_agent_SOURCES = vmm/guest/agent.c vmm/guest/agent.h \
	vmm/guest/agent_exec.c vmm/guest/agent_proc.c \
	vmm/guest/agent_files.c vmm/guest/agent_fswork.c \
	vmm/guest/agent_watch.c vmm/guest/agent_ident.c \
	vmm/guest/agent_ondemand.c vmm/guest/agent_image.c \
	vmm/proto/agent_proto.h
vmm_guest_berth_agent_CFLAGS = $(WARN_CFLAGS)
vmm_guest_berth_agent_LDFLAGS = -static

# Loopback test of the test app itself (no root needed).
TESTS += tests/integ/vm-testapp.sh
EXTRA_DIST += tests/integ/vm-testapp.sh

# The default guest template: builder script and the guest's /init
# (installed in $(pkglibexecdir), where berthd runs mktemplate, which
# takes init from its own directory), and a test that boots it (root,
# TCG; skips elsewhere).
dist_pkglibexec_SCRIPTS = vmm/guest/mktemplate vmm/guest/init \
	vmm/guest/mktemplate-debian vmm/guest/mktemplate-image \
	vmm/guest/berth-imagebuild vmm/guest/mktemplate-source
# the debian template's two inits, found beside mktemplate-debian (the
# initramfs's also serves mktemplate-image's templates)
guestdebiandir = $(pkglibexecdir)/debian
dist_guestdebian_SCRIPTS = vmm/guest/debian/init vmm/guest/debian/initramfs-init
# the initramfs code both builders source (not run: a data file there)
guestlibdir = $(pkglibexecdir)
dist_guestlib_DATA = vmm/guest/mktemplate-common.sh
# PID 1 of a template made from an image root, found beside
# mktemplate-image
guestimagedir = $(pkglibexecdir)/image
dist_guestimage_SCRIPTS = vmm/guest/image/init
TESTS += tests/integ/vm-boot.sh
EXTRA_DIST += tests/integ/vm-boot.sh

# accel auto on a host where KVM looks usable but is not (a qemu wrapper
# that fails or hangs under -accel kvm; /dev/kvm hidden); root, TCG.
TESTS += tests/integ/vm-accel.sh
EXTRA_DIST += tests/integ/vm-accel.sh

# A sandbox is never stranded: qemu killed, the disk's file system full,
# berthd killed mid-create, mid-suspend and mid-restore, a busy guest not
# taken for idle (root, TCG).
TESTS += tests/integ/vm-fault.sh
EXTRA_DIST += tests/integ/vm-fault.sh

# The jail: an escaped VMM plays against another sandbox and the host.
TESTS += tests/integ/vm-jail.sh
EXTRA_DIST += tests/integ/vm-jail.sh

# What a jailed VMM may take: its CPU quota, a bounded console.
TESTS += tests/integ/vm-limits.sh
EXTRA_DIST += tests/integ/vm-limits.sh

# The guest agent: exec through the API and netctl, a suspended sandbox
# woken by an exec (one resume for many), token scoping (root, TCG).
TESTS += tests/integ/vm-exec.sh
EXTRA_DIST += tests/integ/vm-exec.sh
# Creates from the default template's ready snapshot (debian, TCG).
TESTS += tests/integ/vm-ready.sh
EXTRA_DIST += tests/integ/vm-ready.sh
# Forks of a running sandbox, and of a fork (debian, TCG).
TESTS += tests/integ/vm-fork.sh
EXTRA_DIST += tests/integ/vm-fork.sh
# An agent of protocol 1 (templates built before concurrent commands),
# built from berth's history: served one command at a time (one boot).
TESTS += tests/integ/vm-agent-v1.sh
EXTRA_DIST += tests/integ/vm-agent-v1.sh
TESTS += tests/integ/vm-debian.sh
EXTRA_DIST += tests/integ/vm-debian.sh
# berth.conf's vm_template: the debian default built in the background,
# creates refused meanwhile naming the build, a failed build reported
# (root; a stand-in builder, no VM boot; seconds).
TESTS += tests/integ/vm-template-default.sh
EXTRA_DIST += tests/integ/vm-template-default.sh
# A suspended sandbox's files out of one manager and into another
# (export.c): the manifest, the target's checks, the adoption.
check_PROGRAMS += tests/unit/test_vmm_move
TESTS += tests/unit/test_vmm_move
tests_unit_test_vmm_move_SOURCES = tests/unit/test_vmm_move.c tests/unit/tap.h
tests_unit_test_vmm_move_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_vmm_move_LDADD = $(VMM_LIBS)
