/* mrcheck-ctprobe: what a job's container gives NCCL, seen from inside the container.
 *
 * The SPANK plugin runs this program in the task's container (docs/containers.md): it opens the file on the
 * host before the task enters the container, and execveat()s it by descriptor after joining the container's
 * namespaces, so nothing of mrcheck has to be in the image. The kernel then starts the *image's* dynamic
 * loader (this file's PT_INTERP, resolved inside the container), which loads the image's glibc, and every
 * dlopen below finds what the job would find: the image's libibverbs and providers, its NCCL, the libcuda the
 * runtime injected. That is why this file is C with libc only, and why it asks for old symbol versions
 * (GLIBC_2.2.5 on x86_64; docs/facts/containers.md §6): a binary built on a glibc >= 2.34 otherwise needs GLIBC_2.34 for
 * __libc_start_main and dlopen, and would not start in an image with an older glibc (Ubuntu 20.04, RHEL 8).
 *
 * Output: one "key=value" line per fact on stdout (values have no control bytes); the plugin judges them
 * (src/container/judge.cpp). Exit 0 when it ran to the end, whatever it found; 2 on bad arguments.
 * libibverbs' own warnings ("Driver X does not support the kernel ABI ...") go to stderr, which the plugin
 * reads too.
 */
/* Immune to the distribution's hardening flags, whatever level they ask for (Ubuntu's gcc defines
 * _FORTIFY_SOURCE=3 itself, EL's %optflags pass -Wp,-D_FORTIFY_SOURCE=2; tests/package/rpm_test.sh builds
 * with EL 9's): fortified headers turn realpath, printf and snprintf into __*_chk@GLIBC_2.3.4 and later,
 * which an old image's glibc may lack. Undefined here, before the first header, so no order of flags on the
 * command line matters. The stack protector's __stack_chk_fail is GLIBC_2.4 too: src/CMakeLists.txt turns it
 * off after the distribution's flags, and the build stops here if something turned it back on. */
#undef _FORTIFY_SOURCE
#if defined(__x86_64__) && defined(MRCHECK_CTPROBE_OLD_GLIBC) && \
	(defined(__SSP__) || defined(__SSP_STRONG__) || defined(__SSP_ALL__) || defined(__SSP_EXPLICIT__))
#error "mrcheck-ctprobe must be built with -fno-stack-protector (src/CMakeLists.txt)"
#endif
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(MRCHECK_CTPROBE_OLD_GLIBC)
/* The oldest versions of the symbols whose default version moved in glibc 2.34 (libdl merged into libc). */
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dlinfo,dlinfo@GLIBC_2.3.3");
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");
__asm__(".symver __libc_start_main,__libc_start_main@GLIBC_2.2.5");
/* memcpy's default version is GLIBC_2.14 (it stopped allowing overlap then); calls the compiler emits itself
 * (struct copies, unoptimised builds: the clang ASan build of scripts/test.sh) would bind to it. The 2.2.5 one
 * is memmove-safe, which is all these copies need. */
__asm__(".symver memcpy,memcpy@GLIBC_2.2.5");
int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
int main(int argc, char **argv);
/* The entry point crt1.o would provide, calling the 2.2.5 __libc_start_main (x86-64 psABI: %rdx holds the
 * loader's finalizer, the stack holds argc, argv). */
__asm__(".text\n"
        ".globl _start\n"
        ".type _start,@function\n"
        "_start:\n"
        "  xorl %ebp, %ebp\n"
        "  movq %rdx, %r9\n"
        "  popq %rsi\n"
        "  movq %rsp, %rdx\n"
        "  andq $-16, %rsp\n"
        "  pushq %rax\n"
        "  pushq %rsp\n"
        "  xorl %r8d, %r8d\n"
        "  xorl %ecx, %ecx\n"
        "  leaq main(%rip), %rdi\n"
        "  call __libc_start_main@PLT\n"
        "  hlt\n");
#endif

/* Prints key=value with the value's control bytes and backslashes escaped, cut at 4 KiB. */
static void put(const char *key, const char *value)
{
	char buf[4096 + 16];
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)(value ? value : ""); *p && n < 4096; ++p) {
		if (*p < 0x20 || *p == 0x7f || *p == '\\') {
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\x%02x", *p);
		} else {
			buf[n++] = (char)*p;
		}
	}
	buf[n] = '\0';
	printf("%s=%s\n", key, buf);
}

static void putf(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(const char *key, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	put(key, buf);
}

/* Names in a directory, comma-separated, sorted by readdir order (the plugin sorts). "missing" if absent. */
static void put_dir(const char *key, const char *path)
{
	char buf[4096];
	size_t n = 0;
	DIR *d = opendir(path);
	if (d == NULL) {
		putf(key, "missing %s", strerror(errno));
		return;
	}
	buf[0] = '\0';
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		int w = snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? "," : "", e->d_name);
		if (w < 0 || (size_t)w >= sizeof(buf) - n)
			break;
		n += (size_t)w;
	}
	closedir(d);
	putf(key, "present %s", buf);
}

/* The real file behind a loaded library: link_map's l_name is the path the loader opened. */
static const char *loaded_path(void *h)
{
	struct link_map *lm = NULL;
	if (h == NULL || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || lm->l_name == NULL)
		return "";
	return lm->l_name;
}

/* Version of a package in the image's dpkg database, or "" (images built from .deb packages). */
static void put_dpkg_version(const char *key, const char *package)
{
	FILE *f = fopen("/var/lib/dpkg/status", "r");
	if (f == NULL)
		return;
	char line[1024];
	int in = 0;
	size_t plen = strlen(package);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "Package: ", 9) == 0)
			in = strncmp(line + 9, package, plen) == 0 && (line[9 + plen] == '\n' || line[9 + plen] == '\0');
		else if (in && strncmp(line, "Version: ", 9) == 0) {
			line[strcspn(line, "\n")] = '\0';
			put(key, line + 9);
			break;
		}
	}
	fclose(f);
}

/* "NCCL version 2.21.5+cuda12.4": NCCL links the CUDA runtime statically and names its CUDA in this string. */
static void put_nccl_cuda(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size > ((off_t)2 << 30)) {
		close(fd);
		return;
	}
	void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	static const char needle[] = "+cuda";
	const char *p = m, *end = (const char *)m + size;
	while ((p = memmem(p, (size_t)(end - p), needle, sizeof(needle) - 1)) != NULL) {
		const char *v = p + sizeof(needle) - 1;
		size_t n = 0;
		while (v + n < end && n < 16 && ((v[n] >= '0' && v[n] <= '9') || v[n] == '.'))
			n++;
		if (n >= 3 && v[0] >= '0' && v[0] <= '9') {
			char buf[20];
			memcpy(buf, v, n);
			buf[n] = '\0';
			put("nccl_cuda", buf);
			break;
		}
		p = v;
	}
	munmap(m, (size_t)size);
}

/* The verbs calls, by the names rdma-core exports (the prototypes NCCL uses, src/misc/ibvsymbols.cc). */
struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr;
typedef struct ibv_device **(*get_device_list_fn)(int *);
typedef void (*free_device_list_fn)(struct ibv_device **);
typedef const char *(*get_device_name_fn)(struct ibv_device *);
typedef struct ibv_context *(*open_device_fn)(struct ibv_device *);
typedef int (*close_device_fn)(struct ibv_context *);
typedef struct ibv_pd *(*alloc_pd_fn)(struct ibv_context *);
typedef int (*dealloc_pd_fn)(struct ibv_pd *);
typedef struct ibv_mr *(*reg_mr_fn)(struct ibv_pd *, void *, size_t, int);
typedef int (*dereg_mr_fn)(struct ibv_mr *);

/* IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ: NCCL's host buffers. */
#define NCCL_ACCESS (1 | 2 | 4)

/* The verbs entry points of the loaded libibverbs that probe_verbs calls. */
struct verbs {
	get_device_list_fn get_list;
	free_device_list_fn free_list;
	get_device_name_fn name;
	open_device_fn open_dev;
	close_device_fn close_dev;
	alloc_pd_fn alloc_pd;
	dealloc_pd_fn dealloc_pd;
	reg_mr_fn reg_mr;
	dereg_mr_fn dereg_mr;
};

/* Looks every entry point up in h: 0 when one is missing. */
static int load_verbs(void *h, struct verbs *v)
{
	v->get_list = (get_device_list_fn)dlsym(h, "ibv_get_device_list");
	v->free_list = (free_device_list_fn)dlsym(h, "ibv_free_device_list");
	v->name = (get_device_name_fn)dlsym(h, "ibv_get_device_name");
	v->open_dev = (open_device_fn)dlsym(h, "ibv_open_device");
	v->close_dev = (close_device_fn)dlsym(h, "ibv_close_device");
	v->alloc_pd = (alloc_pd_fn)dlsym(h, "ibv_alloc_pd");
	v->dealloc_pd = (dealloc_pd_fn)dlsym(h, "ibv_dealloc_pd");
	v->reg_mr = (reg_mr_fn)dlsym(h, "ibv_reg_mr");
	v->dereg_mr = (dereg_mr_fn)dlsym(h, "ibv_dereg_mr");
	return v->get_list && v->free_list && v->name && v->open_dev && v->close_dev && v->alloc_pd && v->dealloc_pd &&
	       v->reg_mr && v->dereg_mr;
}

/* One registration of `bytes` of host memory on dev, as NCCL registers its buffers. */
static void register_host_memory(const struct verbs *v, struct ibv_device *dev, size_t bytes)
{
	struct ibv_context *ctx = v->open_dev(dev);
	if (ctx == NULL) {
		int e = errno;
		putf("reg", "open %d %s %s", e, v->name(dev), strerror(e));
	} else {
		struct ibv_pd *pd = v->alloc_pd(ctx);
		if (pd == NULL) {
			int e = errno;
			putf("reg", "pd %d %s %s", e, v->name(dev), strerror(e));
		} else {
			void *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (buf == MAP_FAILED) {
				putf("reg", "mmap %d %s %s", errno, v->name(dev), strerror(errno));
			} else {
				errno = 0;
				struct ibv_mr *mr = v->reg_mr(pd, buf, bytes, NCCL_ACCESS);
				int e = errno;
				if (mr != NULL) {
					putf("reg", "ok 0 %s %zu", v->name(dev), bytes);
					v->dereg_mr(mr);
				} else {
					putf("reg", "reg %d %s %s", e, v->name(dev), strerror(e));
				}
				munmap(buf, bytes);
			}
			v->dealloc_pd(pd);
		}
		v->close_dev(ctx);
	}
}

static void probe_verbs(size_t bytes)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		putf("verbs", "none %s", e ? e : "");
		return;
	}
	char real[4096];
	const char *path = loaded_path(h);
	if (realpath(path, real) != NULL)
		path = real;
	putf("verbs", "loaded %s", path);
	put("verbs_iova2", dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8") ? "1" : "0");
	put("verbs_dmabuf", dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12") ? "1" : "0");
	/* Providers live in <dir of libibverbs>/libibverbs/lib<name>-rdmav<PABI>.so. */
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash != NULL) {
		snprintf(slash, sizeof(dir) - (size_t)(slash - dir), "/libibverbs");
		put_dir("providers", dir);
	}
	struct verbs v;
	if (!load_verbs(h, &v)) {
		put("devices", "error libibverbs lacks a verbs entry point");
		return;
	}
	fflush(stdout);
	int n = 0;
	errno = 0;
	struct ibv_device **list = v.get_list(&n);
	if (list == NULL) {
		/* rdma-core answers ENOSYS when the kernel has no uverbs at all (no /sys/class/infiniband_verbs). */
		if (errno == ENOSYS)
			put("devices", "0 ");
		else
			putf("devices", "error ibv_get_device_list: %s", strerror(errno));
		return;
	}
	char names[2048];
	size_t used = 0;
	names[0] = '\0';
	for (int i = 0; i < n; ++i) {
		int w = snprintf(names + used, sizeof(names) - used, "%s%s", i ? "," : "", v.name(list[i]));
		if (w < 0 || (size_t)w >= sizeof(names) - used)
			break;
		used += (size_t)w;
	}
	putf("devices", "%d %s", n, names);
	if (n > 0 && bytes > 0)
		register_host_memory(&v, list[0], bytes);
	v.free_list(list);
}

static void probe_nccl(void)
{
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		putf("nccl", "none %s", e ? e : "");
	} else {
		int v = 0;
		int (*get)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
		const char *path = loaded_path(h);
		if (get != NULL && get(&v) == 0)
			putf("nccl", "%d %s", v, path);
		else
			putf("nccl", "0 %s", path);
		put_nccl_cuda(path);
	}
	/* NCCL's net plugin: NCCL_NET_PLUGIN names it, else NCCL tries libnccl-net.so (HPC-X, aws-ofi-nccl). */
	const char *plugin = getenv("NCCL_NET_PLUGIN");
	char name[512];
	if (plugin != NULL && plugin[0] != '\0' && strchr(plugin, '/') == NULL && strncmp(plugin, "lib", 3) != 0)
		snprintf(name, sizeof(name), "libnccl-net-%s.so", plugin);
	else
		snprintf(name, sizeof(name), "%s", plugin != NULL && plugin[0] != '\0' ? plugin : "libnccl-net.so");
	void *p = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	if (p == NULL)
		putf("nccl_net_plugin", "none %s", name);
	else
		putf("nccl_net_plugin", "loaded %s", loaded_path(p));
	void *c = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (c == NULL) {
		const char *e = dlerror();
		putf("cuda_driver", "none %s", e ? e : "");
	} else {
		int v = 0;
		int (*get)(int *) = (int (*)(int *))dlsym(c, "cuDriverGetVersion");
		if (get != NULL && get(&v) == 0)
			putf("cuda_driver", "%d %s", v, loaded_path(c));
		else
			putf("cuda_driver", "0 %s", loaded_path(c));
	}
}

static void put_limit(const char *key, int resource)
{
	struct rlimit rl;
	if (getrlimit(resource, &rl) != 0)
		return;
	char s[32], h[32];
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(s, sizeof(s), "unlimited");
	else
		snprintf(s, sizeof(s), "%llu", (unsigned long long)rl.rlim_cur);
	if (rl.rlim_max == RLIM_INFINITY)
		snprintf(h, sizeof(h), "unlimited");
	else
		snprintf(h, sizeof(h), "%llu", (unsigned long long)rl.rlim_max);
	putf(key, "%s %s", s, h);
}

/* Decimal digits only, at most `max`. Not strtoull: built on glibc >= 2.38 with _GNU_SOURCE, that is
 * __isoc23_strtoull@GLIBC_2.38, which an image with an older glibc lacks (the helper would not start there). */
static int parse_count(const char *s, unsigned long long max, unsigned long long *out)
{
	unsigned long long v = 0;
	if (*s == '\0')
		return -1;
	for (; *s != '\0'; ++s) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (unsigned long long)(*s - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	size_t bytes = 0;
	int nccl = 0;
	for (int i = 1; i < argc; ++i) {
		if (strcmp(argv[i], "--reg-bytes") == 0 && i + 1 < argc) {
			unsigned long long v = 0;
			if (parse_count(argv[++i], (unsigned long long)1 << 40, &v) != 0) {
				fprintf(stderr, "mrcheck-ctprobe: bad --reg-bytes\n");
				return 2;
			}
			bytes = (size_t)v;
		} else if (strcmp(argv[i], "--nccl") == 0) {
			nccl = 1;
		} else {
			fprintf(stderr, "usage: mrcheck-ctprobe [--reg-bytes N] [--nccl]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	put("ctprobe", "1");
	putf("ids", "%u %u", (unsigned)getuid(), (unsigned)geteuid());
	put_limit("memlock", RLIMIT_MEMLOCK);
	put_dir("dev_infiniband", "/dev/infiniband");
	put_dir("sys_infiniband", "/sys/class/infiniband");
	const char *mvd = getenv("MELLANOX_VISIBLE_DEVICES");
	if (mvd != NULL)
		put("mellanox_visible_devices", mvd);
	put_dpkg_version("dpkg_libibverbs1", "libibverbs1");
	/* What the runtimes leave in the root (docs/containers.md). */
	static const char *const markers[] = {"/.dockerenv", "/run/.containerenv", "/.singularity.d",
					      "/var/run/secrets/kubernetes.io/serviceaccount", NULL};
	char found[512];
	size_t used = 0;
	found[0] = '\0';
	for (int i = 0; markers[i] != NULL; ++i) {
		if (access(markers[i], F_OK) == 0) {
			int w = snprintf(found + used, sizeof(found) - used, "%s%s", used ? "," : "", markers[i]);
			if (w > 0 && (size_t)w < sizeof(found) - used)
				used += (size_t)w;
		}
	}
	put("markers", found);
	FILE *ce = fopen("/run/.containerenv", "r");
	if (ce != NULL) {
		char line[256];
		while (fgets(line, sizeof(line), ce) != NULL) {
			if (strncmp(line, "engine=", 7) == 0) {
				line[strcspn(line, "\n")] = '\0';
				put("containerenv", line);
			}
		}
		fclose(ce);
	}
	probe_verbs(bytes);
	if (nccl)
		probe_nccl();
	put("end", "1");
	return 0;
}
