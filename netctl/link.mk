# netctl: tap devices and addresses (rtnetlink), added to libnetctl
# SPDX-License-Identifier: GPL-2.0-or-later
netctl_libnetctl_a_SOURCES += netctl/nc_link.c netctl/nc_link.h
