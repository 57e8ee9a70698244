/*
 * agent.h — what the guest agent's files share: the channel and the
 * detached process (the two objects every part works on), the lists of
 * them, and the functions one file calls in another. The agent is one
 * program in several files by concern; agent.c says which holds what.
 * Nothing here is a library: every function may write frames to the
 * port.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_GUEST_AGENT_H
#define BERTH_GUEST_AGENT_H

#include "../proto/agent_proto.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#define CMD_MAX		200	/* a process's cmd as listed */
#define MAX_ARGS	4096	/* a command's arguments, its env entries */
#define MAX_GROUPS	64

/* A user as a command runs: from /etc/passwd and /etc/group, read
 * here (a static binary has no NSS; a Debian guest keeps its users in
 * those files too). */
struct user {
	uid_t uid;
	gid_t gid;
	gid_t groups[MAX_GROUPS];
	int ngroups;
	char name[64], home[256], shell[256];
};

/*
 * A template made from an image root (mktemplate-image): the image's
 * Env, WorkingDir, User and Entrypoint + Cmd, from /run/berth/image.conf.
 * Commands take the first three as defaults; the service is the last.
 */
struct image {
	char **env;		/* "NAME=VALUE", envc of them */
	int envc;
	char *workdir;		/* NULL: none */
	char *user;		/* as Docker has it: USER[:GROUP], names or
				 * ids; NULL: root */
	char **argv;		/* Entrypoint + Cmd, argc of them */
	int argc;
};

enum { CH_CMD, CH_PUT, CH_GET, CH_LOGS, CH_LS, CH_FS, CH_WATCH, CH_ATTACH };

struct watch;			/* agent_watch.c's own */

/*
 * A detached process: its output (stdout and stderr on one pipe, or its
 * terminal) goes to ring, the byte at offset x of it at ring[x % size]
 * while x >= total - held. Once reaped, what its pipe held then is read
 * and the pipe closed: total is final. A forgotten one (evicted to make
 * room) is off the list; it is freed when no 'G' or 'H' channel reads
 * it.
 */
struct proc {
	TAILQ_ENTRY(proc) entry;
	unsigned num;
	pid_t pid;
	int reaped, status;
	int timed_out;
	long long deadline;	/* monotonic ms, 0: none */
	long long start;	/* CLOCK_REALTIME ms */
	int keep;		/* 'k': only recorded and listed */
	int tty;		/* out is its pty's master */
	int out;		/* the read end, -1 once at EOF or reaped */
	unsigned char *ring;
	size_t size;
	uint64_t total;		/* bytes ever written */
	char cmd[CMD_MAX + 1];
	int nref;		/* 'G' and 'H' channels reading it */
	int gone;		/* forgotten: off the list */
};

TAILQ_HEAD(procq, proc);
extern struct procq procs;	/* agent_proc.c's, oldest first */

/*
 * A channel: a command ('E'), a file put ('w'), a file get ('g'), a
 * detached process's logs ('G'), a listing ('l'), a remove or move done
 * by a worker process ('x', 'v': CH_FS), a watch ('V') or a client
 * attached to a detached process ('H'), named by the host's id. An ended
 * channel
 * is dead: it stays on the list until the end of the loop's turn (the
 * poll set may still point at it) and is invisible to the host's frames
 * meanwhile.
 */
struct chan {
	TAILQ_ENTRY(chan) entry;
	uint32_t id;
	int kind;
	int dead;
	size_t unacked;		/* 'O'/'R'/'N'/'Y' payload sent, not 'A'cked
				 * yet */
	size_t iack;		/* 'I' payload taken, not 'a'cked yet */

	/* a command, or a CH_FS worker (its message pipe in out) */
	pid_t pid;
	int reaped, status;
	int timed_out;
	long long deadline;	/* monotonic ms, 0: none */
	int tty;		/* out is the pty's master, in a dup of it */
	int out, err;		/* its stdout and stderr (read ends), -1 */
	int in;			/* its stdin (write end), -1 */
	size_t left[2];		/* once reaped: what out, err still hold */
	int tailed;		/* a tty's last read, once reaped, done */
	unsigned char *ibuf;	/* its stdin not written yet, at ioff */
	size_t ioff, ilen, icap;
	int ieof;		/* EOF asked: close in once ibuf is out */

	/* a file put or get (or a watch's inotify descriptor) */
	int fd;			/* put: the temporary file; get: the file */
	int ferr;		/* put: the first write error */
	unsigned mode;		/* put: the file's; CH_FS: its request */
	char *path, *tmp;
	uint64_t fleft;		/* get: the bytes still to send at most */

	/* a listing */
	DIR *dir;
	uint64_t nleft;		/* the entries still to send at most */

	/* a watch */
	struct watch *w;

	/* logs, and an attached client (in: a dup of its pty's master) */
	struct proc *proc;
	uint64_t pos;		/* the next offset to send */
	uint64_t end;		/* without follow: the total when asked */
	int follow;
	unsigned long long seq;	/* attached: the newer, the higher */
	int rows, cols;		/* attached: its size ('T', 'W'), 0: none */
};

TAILQ_HEAD(chanq, chan);
extern struct chanq chans;	/* agent.c's, dead ones until sweep() */

/* agent.c: the port, the channels, the requests' fields */
void say(const char *, ...) __attribute__((format(printf, 1, 2)));
long long now_ms(void);
long long realtime_ms(void);
int port_frame(int, uint32_t, const void *, size_t, const void *, size_t);
int chan_send(struct chan *, int, const void *, size_t);
void failf(uint32_t, const char *, ...)
    __attribute__((format(printf, 2, 3)));
void close_fd(int *);
void close_pair(int [2]);
void nonblock(int);
struct chan *chan_new(uint32_t, int);
void chan_end(struct chan *);
int req_fields(const unsigned char *, size_t, const char *[256]);
int req_num(const char *, unsigned long long *);

/* agent_exec.c: commands ('E', 'I', 'W', 'K'), terminals */
int user_find(const char *, struct user *, char *, size_t);
int numeric(const char *);
int size_parse(const void *, size_t, int *, int *);
void winsize_set(int, int, int);
void cmd_start(uint32_t, const unsigned char *, size_t);
void chan_resize(struct chan *, const unsigned char *, size_t);
void chan_read(struct chan *, int);
void cmd_reaped(struct chan *, int);
void cmd_finish(struct chan *);
void stdin_ack(struct chan *);
void stdin_flush(struct chan *);
int stdin_add(struct chan *, const unsigned char *, size_t);
void chan_kill(struct chan *, const unsigned char *, size_t);

/* agent_proc.c: detached processes ('L', 'G', 'Z') and their attached
 * clients ('H') */
int proc_room(struct proc **);
void proc_add(struct proc *);
void proc_forget(struct proc *);
void proc_unref(struct proc *);
void cmd_line(char *, size_t, char **);
int proc_read(struct proc *, size_t);
void proc_reaped(struct proc *, int);
void procs_deadlines(long long);
void proc_list(uint32_t);
void proc_signal(uint32_t, const unsigned char *, size_t);
void logs_start(uint32_t, const unsigned char *, size_t);
int logs_due(const struct chan *);
void logs_step(struct chan *);
void attach_start(uint32_t, const unsigned char *, size_t);
void attach_resize(struct chan *, int, int);
void attach_leave(struct chan *);
void attach_end(struct chan *);

/* agent_files.c: put, get, list ('l'), mkdir ('m') */
int err_code(int);
int req_path(const char *, char *, size_t);
void file_put(uint32_t, const unsigned char *, size_t);
void put_data(struct chan *, const unsigned char *, size_t);
void file_get(uint32_t, const unsigned char *, size_t);
void get_step(struct chan *);
void ls_start(uint32_t, const unsigned char *, size_t);
int ls_due(const struct chan *);
void ls_step(struct chan *);
void fs_mkdir(uint32_t, const unsigned char *, size_t);

/* agent_fswork.c: remove ('x') and move ('v') in a worker process */
void fs_work(uint32_t, int, const unsigned char *, size_t);
void fs_finish(struct chan *);

/* agent_watch.c: watches ('V') */
void watch_start(uint32_t, const unsigned char *, size_t);
void watch_free(struct watch *);
int watch_due(const struct chan *);
int watch_polls(const struct chan *);
void watch_read(struct chan *);
void watch_step(struct chan *);

/* agent_ident.c: identity ('U') */
void ident_apply(uint32_t, const unsigned char *, size_t);

/* agent_ondemand.c: `berth-agent --on-demand ...` (its own program) */
int agent_ondemand_main(int argc, char **argv);

/* agent_image.c: an image's defaults, and `berth-agent --service` (its
 * own program: the image's Entrypoint + Cmd) */
const struct image *image_get(void);
int image_user(const char *, struct user *, char *, size_t);
int agent_service_main(int argc, char **argv);

#endif
