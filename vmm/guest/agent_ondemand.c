/*
 * agent_ondemand.c — `berth-agent --on-demand PATH MODE GROUP -- PROG
 * [ARG]...`: a daemon started on first use, by socket activation as
 * systemd does it. The guest's init runs this instead of the daemon:
 * it listens on the unix socket PATH (mode MODE, octal, group GROUP from
 * /etc/group, root when it has none), and only when a client connects
 * does it start PROG with the listening socket as descriptor 3 and
 * LISTEN_FDS=1, LISTEN_PID=its pid (dockerd -H fd:// takes it so). The
 * client's connection waits in the socket's backlog meanwhile: the
 * first `docker info` after a create waits for dockerd to be up rather
 * than failing, and an idle sandbox runs no dockerd or containerd at
 * all (their timers were most of an idle guest's CPU).
 *
 * When PROG exits, the socket is still this process's: the next client
 * starts it again (at most once a second). SIGTERM ends PROG (SIGTERM,
 * then SIGKILL after 10 s) and then this. Messages go to stderr (init
 * sends them to the daemon's log).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t od_stop;
static volatile pid_t od_child;

static void
od_term(int sig)
{
	(void)sig;
	od_stop = 1;
	if (od_child > 0)
		kill(od_child, SIGTERM);
}

static void
od_say(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
od_say(const char *what, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "berth-agent on-demand %s: ", what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* GROUP's gid from /etc/group (a static binary has no NSS); 0 without. */
static gid_t
od_gid(const char *group)
{
	char line[1024];
	size_t n = strlen(group);
	gid_t gid = 0;
	FILE *f;

	if ((f = fopen("/etc/group", "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *p;

		if (strncmp(line, group, n) != 0 || line[n] != ':' ||
		    (p = strchr(line + n + 1, ':')) == NULL)
			continue;
		gid = (gid_t)strtoul(p + 1, NULL, 10);
		break;
	}
	fclose(f);
	return gid;
}

static int
od_listen(const char *path, mode_t mode, gid_t gid)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* a socket left by an earlier run; nothing else is removed */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		(void)unlink(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, mode) < 0 || chown(path, 0, gid) < 0 ||
	    listen(fd, 128) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Start argv with fd as the activated socket: its pid, or -1. */
static pid_t
od_start(int fd, char **argv)
{
	pid_t pid = fork();
	char n[32];

	if (pid != 0)
		return pid;
	signal(SIGTERM, SIG_DFL);
	if (fd != 3) {
		if (dup2(fd, 3) < 0)
			_exit(127);
	} else if (fcntl(3, F_SETFD, 0) < 0)
		_exit(127);
	snprintf(n, sizeof(n), "%d", (int)getpid());
	setenv("LISTEN_PID", n, 1);
	setenv("LISTEN_FDS", "1", 1);
	execvp(argv[0], argv);
	fprintf(stderr, "berth-agent on-demand %s: %s\n", argv[0],
	    strerror(errno));
	_exit(127);
}

int
agent_ondemand_main(int argc, char **argv)
{
	struct sigaction sa;
	struct pollfd p;
	char *end;
	mode_t mode;
	int fd, status, killing;

	/* --on-demand PATH MODE GROUP -- PROG [ARG]... */
	if (argc < 7 || strcmp(argv[5], "--") != 0) {
		fprintf(stderr, "usage: berth-agent --on-demand PATH MODE "
		    "GROUP -- PROG [ARG]...\n");
		return 2;
	}
	mode = (mode_t)strtoul(argv[3], &end, 8);
	if (*argv[3] == '\0' || *end != '\0' || mode > 0777) {
		fprintf(stderr, "berth-agent --on-demand: bad mode '%s'\n",
		    argv[3]);
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = od_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);	/* no SA_RESTART: waitpid returns */
	signal(SIGPIPE, SIG_IGN);
	if ((fd = od_listen(argv[2], mode, od_gid(argv[4]))) < 0) {
		od_say(argv[6], "listening on %s: %s", argv[2],
		    strerror(errno));
		return 1;
	}
	while (!od_stop) {
		time_t t0;

		p.fd = fd;
		p.events = POLLIN;
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			od_say(argv[6], "poll: %s", strerror(errno));
			return 1;
		}
		t0 = time(NULL);
		if ((od_child = od_start(fd, argv + 6)) < 0) {
			od_say(argv[6], "fork: %s", strerror(errno));
			sleep(1);
			continue;
		}
		od_say(argv[6], "started (pid %d) for a client of %s",
		    (int)od_child, argv[2]);
		killing = 0;
		while (waitpid(od_child, &status, 0) < 0) {
			if (errno != EINTR)
				break;
			if (od_stop && !killing) {
				/* SIGTERM forwarded: 10 s, then SIGKILL */
				killing = 1;
				alarm(10);
			} else if (od_stop)
				kill(od_child, SIGKILL);
		}
		od_child = 0;
		if (od_stop)
			break;
		if (WIFSIGNALED(status))
			od_say(argv[6], "ended by signal %d; started again on "
			    "its next use", WTERMSIG(status));
		else
			od_say(argv[6], "exited (%d); started again on its "
			    "next use", WEXITSTATUS(status));
		if (time(NULL) - t0 < 1)
			sleep(1);
	}
	close(fd);
	(void)unlink(argv[2]);
	return 0;
}
