# vmm: fragment of the top Makefile.am
# SPDX-License-Identifier: GPL-2.0-or-later

# The guest test app: static (it goes into the guest initramfs) and built
# without sanitizers, which do not mix with -static.
noinst_PROGRAMS += vmm/guest/testapp
vmm_guest_testapp_SOURCES = vmm/guest/testapp.c
vmm_guest_testapp_CFLAGS = $(WARN_CFLAGS)
vmm_guest_testapp_LDFLAGS = -static -pthread

# Loopback test of the test app itself (no root needed).
TESTS += tests/integ/vm-testapp.sh
EXTRA_DIST += tests/integ/vm-testapp.sh

# The default guest template: builder script and the guest's /init, and
# a test that boots it (root, TCG; skips elsewhere).
EXTRA_DIST += vmm/guest/mktemplate vmm/guest/init
TESTS += tests/integ/vm-boot.sh
EXTRA_DIST += tests/integ/vm-boot.sh
