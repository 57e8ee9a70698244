/*
 * status.h — the HTTP status texts berthd's own answers carry, one table
 * for the proxy's error pages (respond.c), the control API (proxy/api/),
 * its TCP helper (controld.c) and the guest's test app
 * (vmm/guest/testapp.c, which links status.c into its static binary).
 * No other header: it builds in the guest's program as it is.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_STATUS_H
#define BERTH_STATUS_H

/* The reason phrase of status (RFC 9110's), "Error" for one not listed. */
const char *px_status_text(int status);

#endif
