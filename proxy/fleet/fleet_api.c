/*
 * fleet_api.c — see fleet_api.h: the forward of a create to the host
 * placement chose. The parent only chooses and decides; the connection
 * is the control helper's (controld.c, HM_CTL_FORWARD): it connects,
 * requires the peer's certificate to name that host, posts the create
 * and reads the answer under bounds (fleet_answer.h: 16 KiB of head,
 * 1 MiB of body, PX_FLEET_API_TIMEOUT in all), and sends back its
 * status and its body re-encoded as compact JSON. A fleet host may lie
 * (README): no byte a peer sent is parsed here, in either direction
 * (controld.c serves fleet_api_listen too).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_api.h"
#include "fleet.h"
#include "helper.h"
#include "proc.h"

#include <stdio.h>
#include <string.h>

/* the helper's bounds are the ones this interface promises */
_Static_assert(HM_CTL_FORWARD_SECS == PX_FLEET_API_TIMEOUT,
    "the forward's deadline");
_Static_assert(HM_CTL_FORWARD_BODY_MAX >= PX_FLEET_API_BODY_MAX,
    "a create's body");

int
px_fleet_api_forward(struct event_base *base, const char *host, const char *body,
    size_t len, px_fleet_api_done_fn *done, void *arg, char *err, size_t errlen)
{
	char addr[64];

	(void)base;
	if (!px_fleet_host_api(host, addr, sizeof(addr)) ||
	    strrchr(addr, ':') == NULL) {
		snprintf(err, errlen, "host %s publishes no fleet_api_listen", host);
		return -1;
	}
	return px_controld_forward(addr, host, px_fleet_self() ?
	    px_fleet_self() : "", body, len, done, arg, err, errlen);
}
