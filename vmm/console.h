/*
 * console.h — the copier of a jailed VMM's guest console (console.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VMM_CONSOLE_H
#define VMM_CONSOLE_H

#include <stdint.h>
#include <sys/types.h>

struct event;
struct vmm_sandbox;

struct vmm_console {
	struct vmm_sandbox *sb;
	struct event	*ev;		/* the console socket, read */
	struct event	*resume;	/* the rate limit's pause ends */
	int		 fd;		/* -1 when not connected */
	int		 out;		/* <dir>/console.log, appended */
	off_t		 size;		/* its size (rotation) */
	unsigned	 rotations;	/* console.log started afresh */
	double		 tokens;	/* bytes it may copy now */
	uint64_t	 last_ms;	/* tokens as of then */
};

/* Not connected (fd -1); the sandbox's. */
void	vmm_console_init(struct vmm_console *, struct vmm_sandbox *);
/* Connects to the console socket of the jailed VMM that now runs: 0, or
 * -1 when it is not there (the console is then lost, the VM is not). A
 * no-op when connected or not jailed. */
int	vmm_console_connect(struct vmm_console *);
void	vmm_console_close(struct vmm_console *);

#endif
