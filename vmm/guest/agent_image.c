/*
 * agent_image.c — a guest made from an image root (mktemplate-image): the
 * image's Env, WorkingDir, User and Entrypoint + Cmd, which the host read
 * from the image's config and wrote to /run/berth/image.conf (in the
 * initramfs; never from the image itself). Commands ('E') take the first
 * three as their defaults, as `docker exec` does; `berth-agent --service`
 * is the image's command as the image's init (image/init) runs it: the
 * same user, environment and directory, so that the service and an exec
 * cannot disagree on what the image says. Without the file (the debian
 * and minimal templates) nothing here changes anything.
 *
 * The file is data: one KEY=VALUE a line (env, workdir, user, arg; the
 * args in order), each VALUE with %XX for '%', control bytes and DEL.
 * Nothing of it is run by a shell.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMAGE_CONF	"/run/berth/image.conf"
#define IMAGE_ENV_MAX	1024
#define IMAGE_LINE_MAX	(128 * 1024)
#define DEF_PATH	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static struct image img;
static int img_state;		/* 0: not read yet, 1: read, -1: none */

/* %XX in place; -1 on a bad escape or an escaped NUL */
static int
unescape(char *s)
{
	char *d = s, hex[3] = { 0 };
	unsigned long v;

	for (; *s != '\0'; s++) {
		if (*s != '%') {
			*d++ = *s;
			continue;
		}
		if (!isxdigit((unsigned char)s[1]) ||
		    !isxdigit((unsigned char)s[2]))
			return -1;
		hex[0] = s[1];
		hex[1] = s[2];
		if ((v = strtoul(hex, NULL, 16)) == 0)
			return -1;
		*d++ = (char)v;
		s += 2;
	}
	*d = '\0';
	return 0;
}

static int
push(char ***v, int *n, int max, const char *s)
{
	char **nv;

	if (*n >= max)
		return -1;
	if ((nv = realloc(*v, sizeof(char *) * (size_t)(*n + 2))) == NULL)
		return -1;
	*v = nv;
	if ((nv[*n] = strdup(s)) == NULL)
		return -1;
	nv[++*n] = NULL;
	return 0;
}

static void
image_load(void)
{
	const char *path = getenv("BERTH_AGENT_IMAGE_CONF");
	char *line = NULL, *v;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, bad = 0;
	FILE *f;

	if (path == NULL)
		path = IMAGE_CONF;
	img_state = -1;
	if ((f = fopen(path, "re")) == NULL) {
		if (errno != ENOENT)
			say("%s: %s (no image defaults)", path, strerror(errno));
		return;
	}
	img_state = 1;
	while ((n = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (n == 0 || line[0] == '#')
			continue;
		if (n > IMAGE_LINE_MAX || (v = strchr(line, '=')) == NULL) {
			bad = lineno;
			continue;
		}
		*v++ = '\0';
		if (unescape(v) < 0) {
			bad = lineno;
			continue;
		}
		if (strcmp(line, "env") == 0) {
			if (strchr(v, '=') == NULL || *v == '=' ||
			    push(&img.env, &img.envc, IMAGE_ENV_MAX, v) < 0)
				bad = lineno;
		} else if (strcmp(line, "arg") == 0) {
			if (push(&img.argv, &img.argc, MAX_ARGS, v) < 0)
				bad = lineno;
		} else if (strcmp(line, "workdir") == 0) {
			free(img.workdir);
			img.workdir = *v == '/' ? strdup(v) : NULL;
		} else if (strcmp(line, "user") == 0) {
			free(img.user);
			img.user = *v != '\0' ? strdup(v) : NULL;
		}			/* other keys: a newer host */
	}
	free(line);
	fclose(f);
	if (bad)
		say("%s:%d: a malformed or unusable line, skipped", path, bad);
}

const struct image *
image_get(void)
{
	if (img_state == 0)
		image_load();
	return img_state > 0 ? &img : NULL;
}

/* A group's gid, by name or number, from the guest's /etc/group. */
static int
group_find(const char *name, gid_t *gid)
{
	char line[1024], *p, *q;
	FILE *fp;
	int found = 0;

	if (numeric(name)) {
		*gid = (gid_t)strtoul(name, NULL, 10);
		return 0;
	}
	if ((fp = fopen("/etc/group", "re")) == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		/* NAME:PASSWD:GID:MEMBERS */
		if ((p = strchr(line, ':')) == NULL ||
		    (q = strchr(p + 1, ':')) == NULL)
			continue;
		*p = '\0';
		if (strcmp(line, name) != 0)
			continue;
		*strchrnul(q + 1, ':') = '\0';
		if (numeric(q + 1)) {
			*gid = (gid_t)strtoul(q + 1, NULL, 10);
			found = 1;
		}
	}
	fclose(fp);
	return found ? 0 : -1;
}

/*
 * An image's User as Docker takes it: USER or USER:GROUP, each a name
 * (from the image's /etc/passwd, /etc/group) or a number; a uid the
 * passwd file lacks runs with gid 0 and HOME /. A GROUP given is the
 * only group. -1 with msg ("400 ...") when it cannot be.
 */
int
image_user(const char *spec, struct user *u, char *msg, size_t msglen)
{
	char name[256], *grp;
	gid_t gid;

	snprintf(name, sizeof(name), "%s", spec);
	if ((grp = strchr(name, ':')) != NULL)
		*grp++ = '\0';
	if (*name == '\0' || strcmp(name, "root") == 0 ||
	    strcmp(name, "0") == 0) {
		memset(u, 0, sizeof(*u));
		snprintf(u->name, sizeof(u->name), "root");
		snprintf(u->home, sizeof(u->home), "/root");
		snprintf(u->shell, sizeof(u->shell), "/bin/sh");
		u->ngroups = 1;
	} else if (user_find(name, u, msg, msglen) < 0) {
		if (!numeric(name))
			return -1;
		memset(u, 0, sizeof(*u));
		u->uid = (uid_t)strtoul(name, NULL, 10);
		snprintf(u->name, sizeof(u->name), "%s", name);
		snprintf(u->home, sizeof(u->home), "/");
		snprintf(u->shell, sizeof(u->shell), "/bin/sh");
		u->ngroups = 1;
	}
	if (grp != NULL && *grp != '\0') {
		if (group_find(grp, &gid) < 0) {
			snprintf(msg, msglen, "400 no group '%s' in the guest's "
			    "/etc/group", grp);
			return -1;
		}
		u->gid = gid;
		u->groups[0] = gid;
		u->ngroups = 1;
	}
	return 0;
}

/* mkdir -p, as root: Docker makes a missing WorkingDir too */
static void
mkdirs(const char *path)
{
	char buf[4096], *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return;
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(buf, 0755);
		*p = '/';
	}
	(void)mkdir(buf, 0755);
}

static int
env_has(char **envp, int envc, const char *name)
{
	size_t l = strlen(name);
	int i;

	for (i = 0; i < envc; i++)
		if (strncmp(envp[i], name, l) == 0 && envp[i][l] == '=')
			return 1;
	return 0;
}

/*
 * `berth-agent --service`: becomes the image's Entrypoint + Cmd, in a
 * session of its own (the init stops its whole group), stdin
 * /dev/null, every signal as a fresh process has it, with the image's
 * Env (PATH and HOME added when it has none, as Docker does), in its
 * WorkingDir (made if missing) or /, as its User. The init restarts it
 * when it ends.
 */
int
agent_service_main(int argc, char **argv)
{
	static char home[300];
	const struct image *im = image_get();
	char *envp[IMAGE_ENV_MAX + 3], msg[512];
	struct user u;
	sigset_t none;
	int i, envc = 0, nul, sig;

	(void)argc;
	(void)argv;
	if (im == NULL || im->argc == 0) {
		fprintf(stderr, "berth-agent --service: the image has no "
		    "command (%s)\n", IMAGE_CONF);
		return 2;
	}
	if (image_user(im->user != NULL ? im->user : "root", &u, msg,
	    sizeof(msg)) < 0) {
		fprintf(stderr, "berth-agent --service: user %s: %s\n",
		    im->user, msg + 4);
		return 126;
	}
	for (i = 0; i < im->envc; i++)
		envp[envc++] = im->env[i];
	if (!env_has(envp, envc, "PATH"))
		envp[envc++] = DEF_PATH;
	if (!env_has(envp, envc, "HOME")) {
		snprintf(home, sizeof(home), "HOME=%s", u.home);
		envp[envc++] = home;
	}
	envp[envc] = NULL;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	(void)setsid();
	if ((nul = open("/dev/null", O_RDONLY)) >= 0 && nul != 0) {
		dup2(nul, 0);
		close(nul);
	}
	if (im->workdir != NULL) {
		mkdirs(im->workdir);
		if (chdir(im->workdir) < 0) {
			fprintf(stderr, "berth-agent --service: cd %s: %s\n",
			    im->workdir, strerror(errno));
			return 126;
		}
	} else {
		(void)!chdir("/");
	}
	if ((u.uid != 0 || u.gid != 0) &&
	    (setgroups((size_t)u.ngroups, u.groups) < 0 ||
	    setgid(u.gid) < 0 || setuid(u.uid) < 0)) {
		fprintf(stderr, "berth-agent --service: user %s: %s\n",
		    u.name, strerror(errno));
		return 126;
	}
	/* PATH for the lookup is the image's */
	for (i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			setenv("PATH", envp[i] + 5, 1);
	execvpe(im->argv[0], im->argv, envp);
	fprintf(stderr, "berth-agent --service: %s: %s\n", im->argv[0],
	    strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
