/*
 * agent.c — the host end of a sandbox's guest agent (vmm/guest/agent.c):
 * a unix socket qemu serves for the virtio-serial port the template names
 * ("agent" in template.json). This file only connects: the frames
 * (vmm/proto/agent_proto.h) are the caller's, on its own event loop.
 *
 * Jailed, the socket lives in run/, which the VM's uid may write: it could
 * put another socket (or a symlink to one) there. What answers must be
 * the VMM's own uid (SO_PEERCRED), as for QMP and the console.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "vmm.h"
#include "backend.h"
#include "qmp.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

int
vmm_agent_connect(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	if (sb->tpl.agent == NULL) {
		snprintf(err, errlen, "sandbox %s: its template has no guest "
		    "agent (built before berth had one: recreate the sandbox "
		    "from a new template)", sb->id);
		return -ENOTSUP;
	}
	if (sb->state != VMM_RUNNING || sb->pid <= 0) {
		snprintf(err, errlen, "sandbox %s is %s", sb->id,
		    vmm_state_name(sb->state));
		return -EAGAIN;
	}
	return vmm_agent_socket(sb, err, errlen);
}

/* The agent's socket connected and checked, whatever the state (a clone
 * being given its identity is still creating). */
int
vmm_agent_socket(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	char p[PATH_MAX];
	int fd, rc;

	if ((rc = vmm_path(sb, "agent.sock", p, sizeof(p))) < 0) {
		snprintf(err, errlen, "sandbox %s: agent socket path too long",
		    sb->id);
		return rc;
	}
	if ((fd = vmm_qmp_connect_unix(p, err, errlen)) < 0)
		return fd;
	if (sb->jailed && sb->uid != 0 &&
	    (rc = vmm_qmp_peer_is(fd, sb->uid, err, errlen)) < 0) {
		close(fd);
		return rc;
	}
	return fd;
}
