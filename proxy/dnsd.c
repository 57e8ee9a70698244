/*
 * dnsd.c — the guests' DNS resolver helper ("berthd: dns").
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "helper.h"
#include "log.h"
#include "proc.h"

int
px_dnsd_main(int fd)
{
	fatalx("not yet");
}
