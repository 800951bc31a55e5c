/* spank_testct.so: a test-only SPANK plugin that puts a task into a container root the way pyxis does, so the
 * container tests need neither pyxis nor enroot (not packaged in Debian). Never installed.
 *
 *   srun --container-root=DIR ...   the task runs with DIR as its root
 *
 * At task_init (pyxis 0.24 joins its container there, pyxis_slurmstepd.c slurm_spank_task_init), as the job
 * user, like enroot without privileges: a new user namespace (the user mapped to itself) and mount namespace,
 * the host's /proc, /sys and /dev bound into DIR, then pivot_root into DIR. With `hook=privileged` on the
 * plugstack line it does the same as root at task_init_privileged (older pyxis joined there), without a user
 * namespace. With `delay_ms=N` it first waits N ms, as pyxis does while enroot imports the image. Where mrcheck
 * sits relative to this plugin in plugstack.conf decides what mrcheck sees at its own task_init:
 * tests/container/container_test.sh runs both orders.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(testct, 1)

static char *container_root;
static int privileged_hook;
static long delay_ms;

static int opt_root(int val, const char *arg, int remote)
{
	(void)val;
	(void)remote;
	if (arg == NULL || arg[0] != '/')
		return -1;
	free(container_root);
	container_root = strdup(arg);
	return container_root ? 0 : -1;
}

struct spank_option spank_options[] = {
	{"container-root", "DIR", "[testct] run the task with DIR as its root (test plugin)", 1, 0, opt_root},
	SPANK_OPTIONS_TABLE_END,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	for (int i = 0; i < ac; ++i)
		if (strcmp(av[i], "hook=privileged") == 0)
			privileged_hook = 1;
		else if (strncmp(av[i], "delay_ms=", 9) == 0)
			delay_ms = strtol(av[i] + 9, NULL, 10);
	return 0;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int bind_into(const char *src, const char *dst_in_root)
{
	char dst[4096];
	snprintf(dst, sizeof(dst), "%s%s", container_root, dst_in_root);
	if (access(src, F_OK) != 0 || access(dst, F_OK) != 0)
		return 0; /* nothing to bind, or nowhere to: like a runtime without that mount */
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

static int enter(int with_userns)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	char map[64];
	if (unshare(with_userns ? CLONE_NEWUSER | CLONE_NEWNS : CLONE_NEWNS) != 0) {
		slurm_error("testct: unshare: %s", strerror(errno));
		return -1;
	}
	if (with_userns) {
		/* The task child is not dumpable after slurmstepd's setuid: its /proc/self files are root's until it
		 * is made dumpable again (enroot runs as a freshly exec'd, dumpable process). */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
		if (write_file("/proc/self/setgroups", "deny") != 0 || write_file("/proc/self/uid_map", map) != 0) {
			slurm_error("testct: uid_map: %s", strerror(errno));
			return -1;
		}
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		if (write_file("/proc/self/gid_map", map) != 0) {
			slurm_error("testct: gid_map: %s", strerror(errno));
			return -1;
		}
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount(container_root, container_root, NULL, MS_BIND | MS_REC, NULL) != 0 || bind_into("/proc", "/proc") != 0 ||
	    bind_into("/sys", "/sys") != 0 || bind_into("/dev", "/dev") != 0 || bind_into("/tmp", "/tmp") != 0 ||
	    bind_into("/var/tmp", "/var/tmp") != 0) {
		slurm_error("testct: mount: %s", strerror(errno));
		return -1;
	}
	/* pivot_root(".", ".") and a lazy unmount of the old root: no directory needed in the image (runc's way). */
	if (chdir(container_root) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 ||
	    chdir("/") != 0) {
		slurm_error("testct: pivot_root into %s: %s", container_root, strerror(errno));
		return -1;
	}
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (container_root == NULL || !privileged_hook)
		return 0;
	return enter(0);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (container_root == NULL || privileged_hook)
		return 0;
	if (delay_ms > 0) {
		struct timespec t = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
		while (nanosleep(&t, &t) != 0 && errno == EINTR) {
		}
	}
	return enter(1);
}
