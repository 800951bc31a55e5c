/* fake_ibverbs.c - a stand-in for rdma-core's libibverbs.so.1 (v44) for machines without RDMA hardware.
 *
 * It replaces the hardware at the library boundary only: callers (mrcheck's probe, NCCL) load it by
 * SONAME or path and resolve the real versioned symbols (libibverbs.map). Memory registration is not
 * simulated: host ranges are pinned with mlock(2), so the running kernel applies RLIMIT_MEMLOCK, the
 * root/CAP_IPC_LOCK bypass and the limit-0 rule exactly as it does for ib_umem_get(); see reg_host().
 *
 * Environment (read at every call, so a test can change it between calls):
 *   MRCHECK_FAKE_IBV_DEVICES  comma list of device names (default "mlx5_0"; set but empty = none)
 *   MRCHECK_FAKE_IBV_INJECT   comma list of FUNC=ACTION[@N]; ACTION = errno name or number, hang, crash
 *   MRCHECK_FAKE_IBV_LOG      file that gets one line per call (O_APPEND, one write() per line)
 *
 * Structures are the real ones from <infiniband/verbs.h>, allocated the way rdma-core allocates them
 * (ibv_context inside a struct verbs_context, abi_compat = __VERBS_ABI_IS_EXTENDED), because callers
 * use the inline helpers of verbs.h (ibv_query_port, ibv_post_send, ...) and NCCL reaches into
 * verbs_context->query_port and context->ops.post_send directly.
 */
#define _GNU_SOURCE
#include "pre_c23_strtol.h" /* before any libc header */
#include <infiniband/verbs.h>

#include "fake_ibverbs_data.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* verbs.h turns these names into inline wrappers; the library defines the real symbols. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port

#define FAKE_MAX_DEVICES 32
#define FAKE_FW_VER "28.39.1002" /* ConnectX-7 firmware family (28.x) */
#define FAKE_VENDOR_ID 0x02c9    /* Mellanox */
#define FAKE_PART_ID 4129        /* ConnectX-7 */
#define FAKE_GID_TBL_LEN 128
#define FAKE_PKEY_TBL_LEN 128
#define FAKE_NUM_COMP_VECTORS 16
#define FAKE_MAX_CQE 4194303
#define FAKE_MAX_QP_WR 32768
#define FAKE_MAX_SGE 30
#define FAKE_SPEED_NDR 128 /* IB_SPEED_NDR; rdma-core 44's header has no enum for it */

#define container_of_fake(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------------------------------------------ */
/* small helpers                                                                                    */

struct errno_name {
	const char *name;
	int value;
};

static const struct errno_name k_errnos[] = {
    {"EPERM", EPERM},         {"ENOENT", ENOENT},       {"EINTR", EINTR},
    {"EIO", EIO},             {"ENXIO", ENXIO},         {"E2BIG", E2BIG},
    {"EBADF", EBADF},         {"EAGAIN", EAGAIN},       {"ENOMEM", ENOMEM},
    {"EACCES", EACCES},       {"EFAULT", EFAULT},       {"EBUSY", EBUSY},
    {"EEXIST", EEXIST},       {"ENODEV", ENODEV},       {"EINVAL", EINVAL},
    {"ENFILE", ENFILE},       {"EMFILE", EMFILE},       {"ENOSPC", ENOSPC},
    {"ERANGE", ERANGE},       {"ENOSYS", ENOSYS},       {"ENODATA", ENODATA},
    {"ETIMEDOUT", ETIMEDOUT}, {"EOPNOTSUPP", EOPNOTSUPP}, {"EPROTONOSUPPORT", EPROTONOSUPPORT},
    {"ENETDOWN", ENETDOWN},   {"ECONNREFUSED", ECONNREFUSED}, {"ENOTSUP", ENOTSUP},
};

static const char *errno_to_name(int e)
{
	for (size_t i = 0; i < sizeof(k_errnos) / sizeof(k_errnos[0]); i++)
		if (k_errnos[i].value == e)
			return k_errnos[i].name;
	return "E?";
}

static int name_to_errno(const char *s)
{
	for (size_t i = 0; i < sizeof(k_errnos) / sizeof(k_errnos[0]); i++)
		if (strcmp(k_errnos[i].name, s) == 0)
			return k_errnos[i].value;
	/* A plain number is accepted too, within the range the kernel uses for errno values. */
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno == 0 && end != s && *end == '\0' && v > 0 && v < 4096)
		return (int)v;
	return 0;
}

static long page_size(void)
{
	static _Atomic long cached;
	long ps = atomic_load(&cached);
	if (ps <= 0) {
		ps = sysconf(_SC_PAGESIZE);
		if (ps <= 0)
			ps = 4096;
		atomic_store(&cached, ps);
	}
	return ps;
}

/* capable(CAP_IPC_LOCK) as the kernel sees it for this task (effective set). */
static bool has_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		return false;
	return (data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))) != 0;
}

/* Writes the whole buffer with one write(2): O_APPEND makes each line atomic between processes. */
static void write_log_line(const char *line, size_t len)
{
	const char *path = getenv("MRCHECK_FAKE_IBV_LOG");
	if (path == NULL || path[0] == '\0')
		return;
	int saved = errno;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		ssize_t rc;
		do {
			rc = write(fd, line, len);
		} while (rc < 0 && errno == EINTR);
		close(fd);
	}
	errno = saved;
}

struct call_rec {
	const char *fn;
	const char *dev;
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	unsigned int access;
	int fd;
	uint64_t offset;
	int err; /* 0 = success */
	const char *note;
};

#define CALL_REC(name) {.fn = (name), .dev = "-", .fd = -1}

/* The errno the last inject() on this thread returned, so the log can tell injected from real. */
static __thread int t_injected_err;

static void log_call(const struct call_rec *r)
{
	int injected = t_injected_err;
	t_injected_err = 0;
	if (getenv("MRCHECK_FAKE_IBV_LOG") == NULL)
		return;
	char line[512];
	int n = snprintf(line, sizeof(line),
			 "mrcheck: fake_ibverbs: pid=%ld call=%s dev=%s addr=0x%llx length=%llu iova=0x%llx "
			 "access=0x%x fd=%d offset=%llu result=%s errno=%d%s%s\n",
			 (long)getpid(), r->fn, r->dev ? r->dev : "-", (unsigned long long)r->addr,
			 (unsigned long long)r->length, (unsigned long long)r->iova, r->access, r->fd,
			 (unsigned long long)r->offset, r->err ? errno_to_name(r->err) : "ok", r->err,
			 (r->note || (injected && r->err == injected)) ? " note=" : "",
			 r->note ? r->note : (injected && r->err == injected) ? "injected" : "");
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	write_log_line(line, (size_t)n);
}

__attribute__((format(printf, 1, 2))) static void warn_line(const char *fmt, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "mrcheck: fake_ibverbs: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	size_t len = strlen(line);
	line[len++] = '\n';
	int saved = errno;
	ssize_t rc = write(STDERR_FILENO, line, len);
	(void)rc;
	errno = saved;
}

/* ------------------------------------------------------------------------------------------------ */
/* fault injection                                                                                  */

/* Functions that accept an injection, by the name used in MRCHECK_FAKE_IBV_INJECT (no ibv_ prefix). */
static const char *const k_inject_fns[] = {
    "get_device_list", "open_device",  "close_device",  "query_device",  "query_port",
    "query_gid",       "alloc_pd",     "dealloc_pd",    "reg_mr",        "reg_mr_iova",
    "reg_mr_iova2",    "reg_dmabuf_mr", "dereg_mr",     "create_cq",     "destroy_cq",
    "create_qp",       "modify_qp",    "destroy_qp",    "query_qp",      "create_comp_channel",
    "get_async_event", "fork_init",    "post_send",     "post_recv",     "query_ece",
};
#define K_NUM_INJECT_FNS (sizeof(k_inject_fns) / sizeof(k_inject_fns[0]))

/* Calls of each function since the library was loaded, for FUNC=ACTION@N. */
static atomic_ulong g_call_count[K_NUM_INJECT_FNS];

enum inject_action { INJECT_NONE, INJECT_ERRNO, INJECT_HANG, INJECT_CRASH };

static int inject_fn_index(const char *fn, size_t len)
{
	if (len > 4 && strncmp(fn, "ibv_", 4) == 0) {
		fn += 4;
		len -= 4;
	}
	for (size_t i = 0; i < K_NUM_INJECT_FNS; i++)
		if (strlen(k_inject_fns[i]) == len && strncmp(k_inject_fns[i], fn, len) == 0)
			return (int)i;
	return -1;
}

/* One warning per distinct bad spec string, so a typo is visible without flooding NCCL's output. */
static void warn_bad_spec(const char *spec, const char *why)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char warned[8][128];
	static unsigned nwarned;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nwarned && i < 8; i++) {
		if (strncmp(warned[i], spec, sizeof(warned[i]) - 1) == 0) {
			pthread_mutex_unlock(&lock);
			return;
		}
	}
	snprintf(warned[nwarned % 8], sizeof(warned[0]), "%s", spec);
	nwarned++;
	pthread_mutex_unlock(&lock);
	warn_line("ignoring MRCHECK_FAKE_IBV_INJECT entry '%.100s': %s", spec, why);
}

struct inject_hit {
	enum inject_action action;
	int err;
};

/* Looks up the spec for fn_index given that this is call number `nth` (1-based) of that function. */
static struct inject_hit inject_lookup(int fn_index, unsigned long nth)
{
	struct inject_hit hit = {INJECT_NONE, 0};
	const char *env = getenv("MRCHECK_FAKE_IBV_INJECT");
	if (env == NULL || env[0] == '\0')
		return hit;
	char buf[1024];
	if (strlen(env) >= sizeof(buf)) {
		warn_bad_spec(env, "longer than 1023 bytes");
		return hit;
	}
	strcpy(buf, env);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*tok))
			tok++;
		char *tail = tok + strlen(tok);
		while (tail > tok && isspace((unsigned char)tail[-1]))
			*--tail = '\0';
		if (*tok == '\0')
			continue;
		char *eq = strchr(tok, '=');
		if (eq == NULL) {
			warn_bad_spec(tok, "expected FUNC=ACTION[@N]");
			continue;
		}
		int idx = inject_fn_index(tok, (size_t)(eq - tok));
		if (idx < 0) {
			warn_bad_spec(tok, "unknown function");
			continue;
		}
		char *action = eq + 1;
		unsigned long only_nth = 0;
		char *at = strchr(action, '@');
		if (at != NULL) {
			*at = '\0';
			char *end = NULL;
			errno = 0;
			only_nth = strtoul(at + 1, &end, 10);
			if (errno != 0 || end == at + 1 || *end != '\0' || only_nth == 0) {
				*at = '@';
				warn_bad_spec(tok, "N in @N must be a positive call number");
				continue;
			}
		}
		struct inject_hit h = {INJECT_NONE, 0};
		if (strcmp(action, "hang") == 0) {
			h.action = INJECT_HANG;
		} else if (strcmp(action, "crash") == 0) {
			h.action = INJECT_CRASH;
		} else if ((h.err = name_to_errno(action)) != 0) {
			h.action = INJECT_ERRNO;
		} else {
			if (at != NULL)
				*at = '@';
			warn_bad_spec(tok, "action must be an errno name or number, hang or crash");
			continue;
		}
		if (idx != fn_index || (only_nth != 0 && only_nth != nth))
			continue;
		hit = h; /* the last matching entry wins, like a later assignment */
	}
	return hit;
}

/* Called at the top of every injectable entry point. Returns an errno to fail with, or 0.
 * hang and crash do not return. */
static int inject(const char *fn, const char *dev)
{
	int idx = inject_fn_index(fn, strlen(fn));
	if (idx < 0)
		return 0;
	unsigned long nth = atomic_fetch_add(&g_call_count[idx], 1) + 1;
	struct inject_hit hit = inject_lookup(idx, nth);
	int saved = errno;
	t_injected_err = 0;
	switch (hit.action) {
	case INJECT_NONE:
		errno = saved;
		return 0;
	case INJECT_ERRNO:
		errno = saved;
		t_injected_err = hit.err;
		return hit.err;
	case INJECT_HANG: {
		struct call_rec r = CALL_REC(fn);
		r.dev = dev;
		r.note = "injected-hang";
		log_call(&r);
		/* Block like a driver stuck in the kernel: only a signal that kills ends this. */
		for (;;)
			pause();
	}
	case INJECT_CRASH: {
		struct call_rec r = CALL_REC(fn);
		r.dev = dev;
		r.note = "injected-crash";
		log_call(&r);
		/* A real crash is a SIGSEGV the caller did not ask for; make sure no handler (a sanitizer,
		 * a crash reporter) turns it into something else. */
		signal(SIGSEGV, SIG_DFL);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGSEGV);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
		raise(SIGSEGV);
		_exit(139);
	}
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* devices and contexts                                                                             */

struct fake_device {
	struct ibv_device dev;
	int index;
	uint64_t guid; /* host byte order */
};

struct fake_context {
	struct fake_device *fdev;
	int async_wfd; /* write end of the pipe behind context->async_fd; no event is ever written */
	struct verbs_context vctx; /* vctx.context is what callers hold */
};

struct fake_pd {
	struct ibv_pd pd;
	atomic_int nmr; /* live MRs, so dealloc_pd can refuse like the kernel (EBUSY) */
};

struct fake_mr {
	struct ibv_mr mr;
	uintptr_t page_start;
	size_t npages;
	bool host; /* pinned host memory (charged); false for dma-buf MRs */
	struct fake_mr *next;
};

struct fake_channel {
	struct ibv_comp_channel ch;
	int wfd;
};

static pthread_mutex_t g_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static void ensure_init(void);
/* Device structs are never freed: contexts keep pointing at them after ibv_free_device_list(),
 * and the real library keeps them for the life of the process too. */
static struct fake_device *g_devs[FAKE_MAX_DEVICES];
static int g_ndevs;

static atomic_uint g_next_handle = 1;
static atomic_uint g_next_key = 0x1000;
static atomic_uint g_next_qpn = 0x100;

static struct fake_context *to_fctx(struct ibv_context *ctx)
{
	return container_of_fake(ctx, struct fake_context, vctx.context);
}

static const char *ctx_devname(struct ibv_context *ctx)
{
	return (ctx && ctx->device) ? ctx->device->name : "-";
}

static const char *pd_devname(struct ibv_pd *pd)
{
	return pd ? ctx_devname(pd->context) : "-";
}

static bool valid_dev_name(const char *s, size_t len)
{
	if (len == 0 || len >= IBV_SYSFS_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* Finds or creates the device named s[0..len). Caller holds g_dev_lock. */
static struct fake_device *device_for_name(const char *s, size_t len)
{
	for (int i = 0; i < g_ndevs; i++)
		if (strlen(g_devs[i]->dev.name) == len && strncmp(g_devs[i]->dev.name, s, len) == 0)
			return g_devs[i];
	if (g_ndevs >= FAKE_MAX_DEVICES)
		return NULL;
	struct fake_device *d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->index = g_ndevs;
	d->guid = 0x946dae0300a10000ULL + (uint64_t)d->index * 0x10; /* Mellanox OUI 94:6d:ae */
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB;
	memcpy(d->dev.name, s, len);
	d->dev.name[len] = '\0';
	snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", d->index);
	snprintf(d->dev.dev_path, sizeof(d->dev.dev_path), "/sys/class/infiniband_verbs/uverbs%d", d->index);
	snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%s", d->dev.name);
	g_devs[g_ndevs++] = d;
	return d;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct call_rec r = CALL_REC("ibv_get_device_list");
	if (num_devices)
		*num_devices = 0;
	int err = inject("get_device_list", "-");
	if (err) {
		r.err = err;
		log_call(&r);
		errno = err;
		return NULL;
	}
	const char *env = getenv("MRCHECK_FAKE_IBV_DEVICES");
	if (env == NULL)
		env = "mlx5_0";
	struct ibv_device **list = calloc(FAKE_MAX_DEVICES + 1, sizeof(*list));
	if (list == NULL) {
		r.err = ENOMEM;
		log_call(&r);
		errno = ENOMEM;
		return NULL;
	}
	int n = 0;
	ensure_init();
	pthread_mutex_lock(&g_dev_lock);
	const char *p = env;
	while (*p != '\0' && n < FAKE_MAX_DEVICES) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		while (len > 0 && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len > 0 && isspace((unsigned char)p[len - 1]))
			len--;
		if (len > 0) {
			if (!valid_dev_name(p, len)) {
				warn_line("ignoring device name '%.*s' in MRCHECK_FAKE_IBV_DEVICES", (int)(len > 64 ? 64 : len), p);
			} else {
				struct fake_device *d = device_for_name(p, len);
				bool dup = false;
				for (int i = 0; d != NULL && i < n; i++)
					dup |= (list[i] == &d->dev);
				if (d != NULL && !dup)
					list[n++] = &d->dev;
			}
		}
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	pthread_mutex_unlock(&g_dev_lock);
	if (num_devices)
		*num_devices = n;
	r.length = (uint64_t)n;
	r.note = "length=number-of-devices";
	log_call(&r);
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	if (device == NULL)
		return 0;
	return htobe64(container_of_fake(device, struct fake_device, dev)->guid);
}

int ibv_get_device_index(struct ibv_device *device)
{
	if (device == NULL)
		return -1;
	return container_of_fake(device, struct fake_device, dev)->index;
}

/* ---- context ops reachable through the structs (verbs.h inlines, NCCL's wrappers) ---- */

static void fill_port_attr(struct fake_device *d, struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = FAKE_GID_TBL_LEN;
	a->port_cap_flags = 0x2259e848; /* typical mlx5 IB port: IsSM=0, trap, SL map, ... */
	a->max_msg_sz = 0x40000000;
	a->pkey_tbl_len = FAKE_PKEY_TBL_LEN;
	a->lid = (uint16_t)(d->index + 1);
	a->sm_lid = 1;
	a->max_vl_num = 4;
	a->subnet_timeout = 18;
	a->active_width = 2; /* 4X (IB_WIDTH_4X); verbs.h has no enum for widths */
	a->active_speed = FAKE_SPEED_NDR;
	a->phys_state = 5; /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_INFINIBAND;
	fake_dp_port_attr(a);
}

/* verbs_context->query_port: callers pass sizeof their own struct ibv_port_attr, which is larger in
 * newer headers (NCCL 2.28 has active_speed_ex); zero what we do not know, as a newer library would
 * report 0 for "no extended speed". */
static int fake_query_port_op(struct ibv_context *ctx, uint8_t port_num, struct ibv_port_attr *attr,
			      size_t attr_len)
{
	struct call_rec r = CALL_REC("ibv_query_port");
	r.dev = ctx_devname(ctx);
	int err = inject("query_port", r.dev);
	if (!err && (ctx == NULL || attr == NULL))
		err = EINVAL;
	if (!err && port_num != 1)
		err = EINVAL;
	if (err) {
		r.err = err;
		log_call(&r);
		return err;
	}
	struct ibv_port_attr full;
	fill_port_attr(to_fctx(ctx)->fdev, &full);
	size_t n = attr_len < sizeof(full) ? attr_len : sizeof(full);
	memcpy(attr, &full, n);
	if (attr_len > n && attr_len <= 4096)
		memset((char *)attr + n, 0, attr_len - n);
	log_call(&r);
	return 0;
}

static int op_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	/* Without MRCHECK_FAKE_IBV_DATA nothing was ever posted successfully, so nothing completes. */
	return fake_dp_poll_cq(cq, num_entries, wc);
}

static int op_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return 0;
}

/* Without MRCHECK_FAKE_IBV_DATA=loopback the fake moves no data: posting fails at once with a clear errno
 * instead of completing never. With it, fake_ibverbs_data.c moves the bytes. */
static int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct call_rec r = CALL_REC("ibv_post_send");
	r.dev = qp ? ctx_devname(qp->context) : "-";
	int err = inject("post_send", r.dev);
	if (!err && fake_dp_enabled())
		return fake_dp_post_send(qp, wr, bad_wr); /* not logged: one line per message would flood the log */
	if (!err)
		err = EOPNOTSUPP;
	if (bad_wr)
		*bad_wr = wr;
	r.err = err;
	r.note = "fake-moves-no-data";
	log_call(&r);
	return err;
}

static int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct call_rec r = CALL_REC("ibv_post_recv");
	r.dev = qp ? ctx_devname(qp->context) : "-";
	int err = inject("post_recv", r.dev);
	if (!err && fake_dp_enabled())
		return fake_dp_post_recv(qp, wr, bad_wr);
	if (!err)
		err = EOPNOTSUPP;
	if (bad_wr)
		*bad_wr = wr;
	r.err = err;
	r.note = "fake-moves-no-data";
	log_call(&r);
	return err;
}

static int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	(void)srq;
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

static struct ibv_mw *op_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	(void)pd;
	(void)type;
	errno = EOPNOTSUPP;
	return NULL;
}

static int op_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	(void)qp;
	(void)mw;
	(void)bind;
	return EOPNOTSUPP;
}

static int op_dealloc_mw(struct ibv_mw *mw)
{
	(void)mw;
	return EOPNOTSUPP;
}

static void *op_compat_unsupported(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int op_compat_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return ibv_query_device(ctx, attr);
}

struct _compat_ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
};

static int op_compat_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	return fake_query_port_op(ctx, port, (struct ibv_port_attr *)attr, sizeof(*attr));
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct call_rec r = CALL_REC("ibv_open_device");
	r.dev = device ? device->name : "-";
	int err = inject("open_device", r.dev);
	if (!err && device == NULL)
		err = EINVAL;
	struct fake_context *fc = NULL;
	int pipefd[2] = {-1, -1};
	if (!err) {
		fc = calloc(1, sizeof(*fc));
		if (fc == NULL || pipe2(pipefd, O_CLOEXEC) != 0)
			err = fc == NULL ? ENOMEM : errno;
	}
	if (err) {
		free(fc);
		r.err = err;
		log_call(&r);
		errno = err;
		return NULL;
	}
	fc->fdev = container_of_fake(device, struct fake_device, dev);
	fc->async_wfd = pipefd[1];
	struct ibv_context *ctx = &fc->vctx.context;
	ctx->device = device;
	/* cmd_fd stands for /dev/infiniband/uverbsN; nobody may issue commands on it, so it is the pipe's
	 * read end too (valid, pollable, closed with the context). */
	ctx->async_fd = pipefd[0];
	ctx->cmd_fd = pipefd[0];
	ctx->num_comp_vectors = FAKE_NUM_COMP_VECTORS;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops._compat_query_device = op_compat_query_device;
	ctx->ops._compat_query_port = op_compat_query_port;
	ctx->ops._compat_alloc_pd = op_compat_unsupported;
	ctx->ops._compat_dealloc_pd = op_compat_unsupported;
	ctx->ops._compat_reg_mr = op_compat_unsupported;
	ctx->ops._compat_rereg_mr = op_compat_unsupported;
	ctx->ops._compat_dereg_mr = op_compat_unsupported;
	ctx->ops.alloc_mw = op_alloc_mw;
	ctx->ops.bind_mw = op_bind_mw;
	ctx->ops.dealloc_mw = op_dealloc_mw;
	ctx->ops._compat_create_cq = op_compat_unsupported;
	ctx->ops.poll_cq = op_poll_cq;
	ctx->ops.req_notify_cq = op_req_notify_cq;
	ctx->ops._compat_cq_event = op_compat_unsupported;
	ctx->ops._compat_resize_cq = op_compat_unsupported;
	ctx->ops._compat_destroy_cq = op_compat_unsupported;
	ctx->ops._compat_create_srq = op_compat_unsupported;
	ctx->ops._compat_modify_srq = op_compat_unsupported;
	ctx->ops._compat_query_srq = op_compat_unsupported;
	ctx->ops._compat_destroy_srq = op_compat_unsupported;
	ctx->ops.post_srq_recv = op_post_srq_recv;
	ctx->ops._compat_create_qp = op_compat_unsupported;
	ctx->ops._compat_query_qp = op_compat_unsupported;
	ctx->ops._compat_modify_qp = op_compat_unsupported;
	ctx->ops._compat_destroy_qp = op_compat_unsupported;
	ctx->ops.post_send = op_post_send;
	ctx->ops.post_recv = op_post_recv;
	ctx->ops._compat_create_ah = op_compat_unsupported;
	ctx->ops._compat_destroy_ah = op_compat_unsupported;
	ctx->ops._compat_attach_mcast = op_compat_unsupported;
	ctx->ops._compat_detach_mcast = op_compat_unsupported;
	ctx->ops._compat_async_event = op_compat_unsupported;
	/* Only query_port is offered through verbs_context; every other extended op stays NULL, which
	 * the verbs.h inlines (and NCCL's copy of them) treat as EOPNOTSUPP or fall back from. */
	fc->vctx.sz = sizeof(struct verbs_context);
	fc->vctx.query_port = fake_query_port_op;
	log_call(&r);
	return ctx;
}

int ibv_close_device(struct ibv_context *context)
{
	struct call_rec r = CALL_REC("ibv_close_device");
	r.dev = ctx_devname(context);
	int err = inject("close_device", r.dev);
	if (!err && context == NULL)
		err = EINVAL;
	if (err) {
		r.err = err;
		log_call(&r);
		return err;
	}
	struct fake_context *fc = to_fctx(context);
	/* Closing the write end first wakes a thread blocked in ibv_get_async_event with EOF. */
	close(fc->async_wfd);
	close(context->async_fd);
	pthread_mutex_destroy(&context->mutex);
	free(fc);
	log_call(&r);
	return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	struct call_rec r = CALL_REC("ibv_query_device");
	r.dev = ctx_devname(context);
	int err = inject("query_device", r.dev);
	if (!err && (context == NULL || attr == NULL))
		err = EINVAL;
	if (err) {
		r.err = err;
		log_call(&r);
		return err;
	}
	struct fake_device *d = to_fctx(context)->fdev;
	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "%s", FAKE_FW_VER);
	attr->node_guid = htobe64(d->guid);
	attr->sys_image_guid = htobe64(d->guid);
	attr->max_mr_size = UINT64_MAX;
	attr->page_size_cap = ~(uint64_t)0xfff;
	attr->vendor_id = FAKE_VENDOR_ID;
	attr->vendor_part_id = FAKE_PART_ID;
	attr->hw_ver = 0;
	attr->max_qp = 131072;
	attr->max_qp_wr = FAKE_MAX_QP_WR;
	attr->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
				 IBV_DEVICE_AUTO_PATH_MIG | IBV_DEVICE_CHANGE_PHY_PORT |
				 IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
				 IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW |
				 IBV_DEVICE_MEM_MGT_EXTENSIONS;
	attr->max_sge = FAKE_MAX_SGE;
	attr->max_sge_rd = FAKE_MAX_SGE;
	attr->max_cq = 16777216;
	attr->max_cqe = FAKE_MAX_CQE;
	attr->max_mr = 16777216;
	attr->max_pd = 16777216;
	attr->max_qp_rd_atom = 16;
	attr->max_ee_rd_atom = 0;
	attr->max_res_rd_atom = 16 * 131072;
	attr->max_qp_init_rd_atom = 16;
	attr->atomic_cap = IBV_ATOMIC_HCA;
	attr->max_mw = 16777216;
	attr->max_mcast_grp = 2097152;
	attr->max_mcast_qp_attach = 240;
	attr->max_total_mcast_qp_attach = 503316480;
	attr->max_ah = INT32_MAX;
	attr->max_srq = 8388608;
	attr->max_srq_wr = 32767;
	attr->max_srq_sge = 31;
	attr->max_pkeys = FAKE_PKEY_TBL_LEN;
	attr->local_ca_ack_delay = 16;
	attr->phys_port_cnt = 1;
	log_call(&r);
	return 0;
}

int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return fake_query_port_op(context, port_num, (struct ibv_port_attr *)port_attr, sizeof(*port_attr));
}

static int gid_for(struct ibv_context *ctx, uint32_t port_num, uint32_t index, union ibv_gid *gid)
{
	if (ctx == NULL || gid == NULL || port_num != 1 || index >= FAKE_GID_TBL_LEN)
		return EINVAL;
	memset(gid, 0, sizeof(*gid));
	if (fake_dp_roce()) {
		/* An empty slot reads as the zero GID through ibv_query_gid, as rdma-core reads it from sysfs. */
		enum ibv_gid_type type;
		int err = fake_dp_gid(to_fctx(ctx)->fdev->index, index, gid, &type);
		return err == ENODATA ? 0 : err;
	}
	if (index == 0) {
		/* Default GID of an IB port: link-local subnet prefix + port GUID. */
		gid->global.subnet_prefix = htobe64(0xfe80000000000000ULL);
		gid->global.interface_id = htobe64(to_fctx(ctx)->fdev->guid + 1);
	}
	return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	struct call_rec r = CALL_REC("ibv_query_gid");
	r.dev = ctx_devname(context);
	int err = inject("query_gid", r.dev);
	if (!err)
		err = index < 0 ? EINVAL : gid_for(context, port_num, (uint32_t)index, gid);
	r.err = err;
	log_call(&r);
	if (err) {
		errno = err;
		return -1; /* rdma-core returns -1 here, not the errno */
	}
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	if (entry == NULL || flags != 0 || entry_size < sizeof(*entry))
		return EINVAL;
	memset(entry, 0, sizeof(*entry));
	int err = gid_for(context, port_num, gid_index, &entry->gid);
	if (err)
		return err;
	if (fake_dp_roce()) {
		enum ibv_gid_type type = IBV_GID_TYPE_ROCE_V1;
		err = fake_dp_gid(to_fctx(context)->fdev->index, gid_index, &entry->gid, &type);
		if (err)
			return err;
		entry->gid_index = gid_index;
		entry->port_num = port_num;
		entry->gid_type = type;
		entry->ndev_ifindex = 1; /* the netdev under the port: lo, the one every network namespace has */
		return 0;
	}
	if (gid_index != 0)
		return ENODATA; /* empty GID table slot, as the kernel reports it */
	entry->gid_index = gid_index;
	entry->port_num = port_num;
	entry->gid_type = IBV_GID_TYPE_IB;
	entry->ndev_ifindex = 0;
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	if (context == NULL || (entries == NULL && max_entries) || flags != 0 || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries == 0)
		return 0;
	struct ibv_gid_entry *e = (struct ibv_gid_entry *)entries;
	int err = _ibv_query_gid_ex(context, 1, 0, e, 0, sizeof(*e));
	return err ? -err : 1;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	if (context == NULL || pkey == NULL || port_num != 1 || index < 0 || index >= FAKE_PKEY_TBL_LEN)
		return -1;
	*pkey = index == 0 ? htobe16(0xffff) : 0;
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	if (context == NULL || port_num != 1)
		return -EINVAL;
	return be16toh(pkey) == 0xffff ? 0 : -ENOENT;
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct call_rec r = CALL_REC("ibv_get_async_event");
	r.dev = ctx_devname(context);
	int err = inject("get_async_event", r.dev);
	if (!err && (context == NULL || event == NULL))
		err = EINVAL;
	if (err) {
		r.err = err;
		log_call(&r);
		errno = err;
		return -1;
	}
	/* A healthy HCA has no events to report: block on the async fd like the real library does (or
	 * return EAGAIN if the caller made it non-blocking). EOF comes when the device is closed. */
	char c;
	ssize_t n;
	do {
		n = read(context->async_fd, &c, 1);
	} while (n < 0 && errno == EINTR);
	err = n < 0 ? errno : EIO;
	errno = err;
	return -1;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const names[] = {
	    [IBV_EVENT_CQ_ERR] = "CQ error",
	    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
	    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
	    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
	    [IBV_EVENT_COMM_EST] = "communication established",
	    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
	    [IBV_EVENT_PATH_MIG] = "path migrated",
	    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
	    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
	    [IBV_EVENT_PORT_ACTIVE] = "port active",
	    [IBV_EVENT_PORT_ERR] = "port error",
	    [IBV_EVENT_LID_CHANGE] = "LID change",
	    [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
	    [IBV_EVENT_SM_CHANGE] = "SM change",
	    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
	    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
	    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
	    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
	    [IBV_EVENT_GID_CHANGE] = "GID table change",
	    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "unknown";
}

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const names[] = {"CA", "switch", "router", "RNIC", "usNIC", "usNIC UDP", "unspecified"};
	int i = (int)node_type - IBV_NODE_CA;
	if (i < 0 || (size_t)i >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[i];
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const names[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
	if ((unsigned)port_state < sizeof(names) / sizeof(names[0]))
		return names[port_state];
	return "invalid state";
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
	    "success", "local length error", "local QP operation error", "local EE context operation error",
	    "local protection error", "Work Request Flushed Error", "memory management operation error",
	    "bad response error", "local access error", "remote invalid request error", "remote access error",
	    "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	    "local RDD violation error", "remote invalid RD request", "aborted error",
	    "invalid EE context number", "invalid EE context state", "fatal error", "response timeout error",
	    "general error", "TM error", "TM rendezvous not supported"};
	if ((unsigned)status < sizeof(names) / sizeof(names[0]))
		return names[status];
	return "unknown";
}

/* ------------------------------------------------------------------------------------------------ */
/* protection domains                                                                               */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct call_rec r = CALL_REC("ibv_alloc_pd");
	r.dev = ctx_devname(context);
	int err = inject("alloc_pd", r.dev);
	if (!err && context == NULL)
		err = EINVAL;
	struct fake_pd *p = NULL;
	if (!err && (p = calloc(1, sizeof(*p))) == NULL)
		err = ENOMEM;
	if (err) {
		r.err = err;
		log_call(&r);
		errno = err;
		return NULL;
	}
	p->pd.context = context;
	p->pd.handle = atomic_fetch_add(&g_next_handle, 1);
	log_call(&r);
	return &p->pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct call_rec r = CALL_REC("ibv_dealloc_pd");
	r.dev = pd_devname(pd);
	int err = inject("dealloc_pd", r.dev);
	if (!err && pd == NULL)
		err = EINVAL;
	struct fake_pd *p = pd ? container_of_fake(pd, struct fake_pd, pd) : NULL;
	if (!err && atomic_load(&p->nmr) > 0)
		err = EBUSY; /* the kernel refuses to destroy a PD that still has MRs */
	r.err = err;
	log_call(&r);
	if (err)
		return err;
	free(p);
	return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* memory registration                                                                              */

/* Per-process state standing in for mm->pinned_vm.
 *
 * Why both a counter and mlock():
 * - ib_umem_get() charges every MR's pages to mm->pinned_vm and fails with ENOMEM when the sum goes
 *   over the soft RLIMIT_MEMLOCK (skipped with CAP_IPC_LOCK). Two MRs over the same pages are charged
 *   twice. That sum is g_pinned_pages below, compared against getrlimit() like the kernel does.
 * - mlock() makes the running kernel apply its own RLIMIT_MEMLOCK check (mm->locked_vm), with the
 *   same soft limit, the same CAP_IPC_LOCK bypass and the same EPERM for a zero limit. But locked_vm
 *   counts each page once however often it is locked, and it also holds pages the process mlocked
 *   itself. So: a second MR over the same pages passes mlock but fails on g_pinned_pages (as on an
 *   HCA), and a process with other mlocked memory can get ENOMEM here earlier than on an HCA.
 * - munlock() works on pages, not on MRs; dereg therefore unlocks only pages that no other live MR
 *   covers, so one deregistration does not unpin another MR's memory.
 */
static pthread_mutex_t g_mr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_mr *g_mrs; /* live host MRs */
static uint64_t g_pinned_pages;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* fork() while another thread holds one of the locks would leave it locked forever in the child;
 * take both around fork (never held together elsewhere, so the order cannot deadlock). The child
 * also gets a fresh pinned_vm of 0 and no mlocks, like a new mm: MRs do not carry over. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_dev_lock);
	pthread_mutex_lock(&g_mr_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&g_mr_lock);
	pthread_mutex_unlock(&g_dev_lock);
}

static void atfork_child(void)
{
	g_mrs = NULL; /* the parent's MR structs are unreachable from here on; they are small */
	g_pinned_pages = 0;
	pthread_mutex_unlock(&g_mr_lock);
	pthread_mutex_unlock(&g_dev_lock);
}

static void install_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Lazy, so that loading the library runs no code (no constructor that could fail). */
static void ensure_init(void)
{
	pthread_once(&g_atfork_once, install_atfork);
}

/* mlock/munlock as raw system calls: a sanitizer runtime or an LD_PRELOAD in the caller may interpose
 * the libc symbols (ASan's mlock() is a no-op that returns 0), and then the kernel would never see
 * the request this fake exists to make. */
static int sys_mlock(uintptr_t start, size_t len)
{
	return (int)syscall(SYS_mlock, start, len);
}

static int sys_munlock(uintptr_t start, size_t len)
{
	return (int)syscall(SYS_munlock, start, len);
}

/* ib_check_mr_access() of Linux 6.1 (include/rdma/ib_verbs.h). */
static int check_access(unsigned int access)
{
	const unsigned int supported = ((IBV_ACCESS_HUGETLB << 1) - 1) | IBV_ACCESS_OPTIONAL_RANGE;
	if ((access & (IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_WRITE)) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	if (access & ~supported)
		return EINVAL;
	if (access & IBV_ACCESS_ON_DEMAND)
		return EOPNOTSUPP; /* the fake HCA has no ODP; Linux >= 6.0 says EOPNOTSUPP here */
	return 0;
}

static bool access_writable(unsigned int access)
{
	return access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
			 IBV_ACCESS_MW_BIND);
}

/* VmFlags of the mapping that starts at `start`, looked up in /proc/self/smaps only for mappings of
 * device files, where VM_IO/VM_PFNMAP (no struct page behind them) are possible. */
static bool mapping_is_io(uintptr_t start)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (f == NULL)
		return false;
	char line[512];
	bool in_vma = false, io = false;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping header; field lines fail here */
			in_vma = (lo == start);
			continue;
		}
		if (in_vma && strncmp(line, "VmFlags:", 8) == 0) {
			io = strstr(line, " io") != NULL || strstr(line, " pf") != NULL;
			break;
		}
	}
	fclose(f);
	return io;
}

/* What pin_user_pages_fast() would decide for [start, end): 0, or EFAULT when a page is not mapped,
 * not readable (PROT_NONE, as a cudaMalloc pointer looks to the CPU), not writable when the MR is
 * writable, or has no struct page (VM_IO/VM_PFNMAP). Reads /proc/self/maps in one pass. */
static int check_range_mapped(uintptr_t start, uintptr_t end, bool writable)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* No procfs: mincore() at least tells mapped from unmapped. */
		long ps = page_size();
		unsigned char vec;
		for (uintptr_t p = start; p < end; p += (uintptr_t)ps)
			if (mincore((void *)p, (size_t)ps, &vec) != 0)
				return EFAULT;
		return 0;
	}
	char buf[8192];
	size_t have = 0;
	uintptr_t cur = start;
	int result = EFAULT;
	bool eof = false;
	while (cur < end) {
		char *nl = memchr(buf, '\n', have);
		if (nl == NULL) {
			if (eof || have == sizeof(buf)) {
				if (have == sizeof(buf) && !eof) {
					have = 0; /* a line longer than the buffer: drop it, it cannot be parsed */
					continue;
				}
				break;
			}
			ssize_t n = read(fd, buf + have, sizeof(buf) - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				eof = true;
			else
				have += (size_t)n;
			continue;
		}
		*nl = '\0';
		unsigned long lo = 0, hi = 0;
		char perms[8] = {0};
		char path[256] = {0};
		int fields = sscanf(buf, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perms, path);
		size_t used = (size_t)(nl - buf) + 1;
		memmove(buf, nl + 1, have - used);
		have -= used;
		if (fields < 3 || hi <= cur)
			continue;
		if (lo > cur)
			break; /* a hole */
		if (perms[0] != 'r' || (writable && perms[1] != 'w'))
			break;
		if (fields >= 4 && strncmp(path, "/dev/", 5) == 0 && strncmp(path, "/dev/shm/", 9) != 0 &&
		    strncmp(path, "/dev/zero", 9) != 0 && mapping_is_io(lo))
			break;
		cur = hi;
	}
	if (cur >= end)
		result = 0;
	close(fd);
	return result;
}

/* munlock the pages of [pstart, pstart + npages) that no MR in g_mrs covers. Holds g_mr_lock. */
static void unlock_uncovered(uintptr_t pstart, size_t npages)
{
	const uintptr_t ps = (uintptr_t)page_size();
	uintptr_t pend = pstart + npages * ps;
	uintptr_t cur = pstart;
	while (cur < pend) {
		/* Find the covered interval starting at or before cur that reaches furthest, or the nearest
		 * one after cur. */
		uintptr_t next_cover = pend, cover_end = cur;
		for (struct fake_mr *m = g_mrs; m != NULL; m = m->next) {
			uintptr_t s = m->page_start, e = m->page_start + m->npages * ps;
			if (e <= cur || s >= pend)
				continue;
			if (s <= cur) {
				if (e > cover_end)
					cover_end = e;
			} else if (s < next_cover) {
				next_cover = s;
			}
		}
		if (cover_end > cur) {
			cur = cover_end;
			continue;
		}
		sys_munlock(cur, next_cover - cur);
		cur = next_cover;
	}
}

static struct ibv_mr *finish_mr(struct call_rec *r, struct ibv_pd *pd, void *addr, size_t length,
				uintptr_t pstart, size_t npages, bool host)
{
	struct fake_mr *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = atomic_fetch_add(&g_next_handle, 1);
	uint32_t key = atomic_fetch_add(&g_next_key, 0x100);
	m->mr.lkey = key | 0x11;
	m->mr.rkey = key | 0x11;
	m->page_start = pstart;
	m->npages = npages;
	m->host = host;
	atomic_fetch_add(&container_of_fake(pd, struct fake_pd, pd)->nmr, 1);
	(void)r;
	return &m->mr;
}

/* The host-memory registration path: ib_uverbs_reg_mr() -> mlx5_ib_reg_user_mr() -> ib_umem_get()
 * of Linux 6.1, in the kernel's order of checks, so each errno comes from the same cause. */
static struct ibv_mr *reg_host(const char *fn, const char *inject_name, struct ibv_pd *pd, void *addr,
			       size_t length, uint64_t iova, unsigned int access, bool check_iova)
{
	struct call_rec r = CALL_REC(fn);
	r.dev = pd_devname(pd);
	r.addr = (uintptr_t)addr;
	r.length = length;
	r.iova = iova;
	r.access = access;
	const uintptr_t ps = (uintptr_t)page_size();
	const uintptr_t a = (uintptr_t)addr;
	struct ibv_mr *mr = NULL;
	struct rlimit rl;
	bool cap = false;
	uintptr_t pstart = 0, pend = 0;
	size_t npages = 0;

	int err = inject(inject_name, r.dev);
	if (!err && (pd == NULL || pd->context == NULL))
		err = EINVAL;
	/* uverbs: the page offsets of the address and the iova must agree. */
	if (!err && check_iova && (a & (ps - 1)) != (iova & (ps - 1)))
		err = EINVAL;
	if (!err)
		err = check_access(access);
	/* ib_umem_get: address range overflow. */
	if (!err && (a + length < a || ((a + length + ps - 1) & ~(ps - 1)) < a + length))
		err = EINVAL;
	if (err)
		goto out;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		rl.rlim_cur = RLIM_INFINITY;
	cap = has_cap_ipc_lock();
	/* can_do_mlock(): a zero soft limit without CAP_IPC_LOCK. */
	if (rl.rlim_cur == 0 && !cap) {
		err = EPERM;
		goto out;
	}
	pstart = a & ~(ps - 1);
	pend = (a + length + ps - 1) & ~(ps - 1);
	npages = (size_t)((pend - pstart) / ps);
	if (npages == 0 || npages > UINT_MAX) {
		err = EINVAL;
		goto out;
	}
	ensure_init();
	pthread_mutex_lock(&g_mr_lock);
	uint64_t limit_pages = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur / ps;
	bool over = !cap && g_pinned_pages + npages > limit_pages;
	/* The kernel charges pinned_vm before it pins, so an unmapped range over the limit is ENOMEM. */
	int fault = check_range_mapped(pstart, pend, access_writable(access));
	if (fault) {
		err = over ? ENOMEM : fault;
	} else if (sys_mlock(pstart, pend - pstart) != 0) {
		/* The running kernel's own verdict on RLIMIT_MEMLOCK for this range. */
		err = errno == EPERM ? EPERM : ENOMEM;
	} else {
		if (over) {
			err = ENOMEM; /* pinned_vm double-charges pages another MR already pinned */
			unlock_uncovered(pstart, npages);
		} else {
			mr = finish_mr(&r, pd, addr, length, pstart, npages, true);
			if (mr == NULL) {
				err = ENOMEM;
				unlock_uncovered(pstart, npages);
			} else {
				struct fake_mr *m = container_of_fake(mr, struct fake_mr, mr);
				m->next = g_mrs;
				g_mrs = m;
				g_pinned_pages += npages;
				m->mr.context = pd->context;
			}
		}
	}
	pthread_mutex_unlock(&g_mr_lock);
out:
	r.err = err;
	log_call(&r);
	if (err)
		errno = err;
	return mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return reg_host("ibv_reg_mr_iova2", "reg_mr_iova2", pd, addr, length, iova, access, true);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg_host("ibv_reg_mr_iova", "reg_mr_iova", pd, addr, length, iova, (unsigned int)access, true);
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	/* rdma-core: ibv_reg_mr() is ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access). */
	return reg_host("ibv_reg_mr", "reg_mr", pd, addr, length, (uintptr_t)addr, (unsigned int)access, false);
}

/* Is fd a dma-buf? The kernel's dma_buf_get() checks file->f_op; from user space the file's name
 * shows it ("/dmabuf:<name>" since Linux 5.x, "anon_inode:dmabuf" before), and fdinfo has exp_name. */
static int dmabuf_size(int fd, uint64_t *size)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return EBADF;
	char link[64], target[256];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	bool is_dmabuf = false;
	if (n > 0) {
		target[n] = '\0';
		is_dmabuf = strncmp(target, "/dmabuf:", 8) == 0 || strcmp(target, "anon_inode:dmabuf") == 0;
	}
	uint64_t fdinfo_size = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "re");
	if (f != NULL) {
		char line[256];
		bool exp = false;
		while (fgets(line, sizeof(line), f) != NULL) {
			unsigned long long v;
			if (strncmp(line, "exp_name:", 9) == 0)
				exp = true;
			else if (sscanf(line, "size: %llu", &v) == 1)
				fdinfo_size = v;
		}
		fclose(f);
		is_dmabuf = is_dmabuf || (exp && n > 0 && strstr(target, "dmabuf") != NULL);
	}
	if (!is_dmabuf)
		return EINVAL; /* an open file, but not a dma-buf */
	*size = fdinfo_size ? fdinfo_size : (uint64_t)st.st_size;
	return 0;
}

/* The dma-buf path: UVERBS_METHOD_REG_DMABUF_MR -> mlx5_ib_reg_user_mr_dmabuf() -> ib_umem_dmabuf_get().
 * Nothing is pinned against RLIMIT_MEMLOCK here, in the kernel or in this fake. */
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
{
	struct call_rec r = CALL_REC("ibv_reg_dmabuf_mr");
	r.dev = pd_devname(pd);
	r.length = length;
	r.iova = iova;
	r.access = (unsigned int)access;
	r.fd = fd;
	r.offset = offset;
	struct ibv_mr *mr = NULL;
	int err = inject("reg_dmabuf_mr", r.dev);
	if (!err && (pd == NULL || pd->context == NULL))
		err = EINVAL;
	if (!err)
		err = check_access((unsigned int)access);
	if (!err && offset + length < offset)
		err = EINVAL;
	uint64_t size = 0;
	if (!err)
		err = dmabuf_size(fd, &size);
	if (!err && (size < offset + length || length == 0))
		err = EINVAL;
	if (!err) {
		pthread_mutex_lock(&g_mr_lock);
		mr = finish_mr(&r, pd, (void *)(uintptr_t)offset, length, 0, 0, false);
		pthread_mutex_unlock(&g_mr_lock);
		if (mr == NULL)
			err = ENOMEM;
	}
	r.err = err;
	log_call(&r);
	if (err)
		errno = err;
	return mr;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct call_rec r = CALL_REC("ibv_dereg_mr");
	r.dev = mr ? pd_devname(mr->pd) : "-";
	if (mr) {
		r.addr = (uintptr_t)mr->addr;
		r.length = mr->length;
	}
	int err = inject("dereg_mr", r.dev);
	if (!err && mr == NULL)
		err = EINVAL;
	if (err) {
		r.err = err;
		log_call(&r);
		return err;
	}
	struct fake_mr *m = container_of_fake(mr, struct fake_mr, mr);
	pthread_mutex_lock(&g_mr_lock);
	if (m->host) {
		for (struct fake_mr **pp = &g_mrs; *pp != NULL; pp = &(*pp)->next) {
			if (*pp == m) {
				*pp = m->next;
				break;
			}
		}
		unlock_uncovered(m->page_start, m->npages);
		g_pinned_pages -= m->npages < g_pinned_pages ? m->npages : g_pinned_pages;
	}
	pthread_mutex_unlock(&g_mr_lock);
	if (mr->pd)
		atomic_fetch_sub(&container_of_fake(mr->pd, struct fake_pd, pd)->nmr, 1);
	free(m);
	log_call(&r);
	return 0;
}

int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	(void)mr;
	(void)flags;
	(void)pd;
	(void)addr;
	(void)length;
	(void)access;
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

int ibv_fork_init(void)
{
	struct call_rec r = CALL_REC("ibv_fork_init");
	int err = inject("fork_init", "-");
	r.err = err;
	log_call(&r);
	/* Linux >= 5.13 keeps pinned pages across fork, so rdma-core's ibv_fork_init() has nothing to do. */
	return err;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* Declared in rdma-core's internal headers, exported at IBVERBS_1.1. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* completion channels, CQs and QPs: working objects that hold state but move no data               */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct call_rec r = CALL_REC("ibv_create_comp_channel");
	r.dev = ctx_devname(context);
	int err = inject("create_comp_channel", r.dev);
	if (!err && context == NULL)
		err = EINVAL;
	struct fake_channel *c = NULL;
	int p[2];
	if (!err) {
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			err = ENOMEM;
		else if (pipe2(p, O_CLOEXEC) != 0)
			err = errno;
	}
	if (err) {
		free(c);
		r.err = err;
		log_call(&r);
		errno = err;
		return NULL;
	}
	c->ch.context = context;
	c->ch.fd = p[0];
	c->ch.refcnt = 0;
	c->wfd = p[1];
	log_call(&r);
	return &c->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	if (channel == NULL)
		return EINVAL;
	if (channel->refcnt > 0)
		return EBUSY;
	struct fake_channel *c = container_of_fake(channel, struct fake_channel, ch);
	close(c->wfd);
	close(c->ch.fd);
	free(c);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct call_rec r = CALL_REC("ibv_create_cq");
	r.dev = ctx_devname(context);
	r.length = cqe > 0 ? (uint64_t)cqe : 0;
	int err = inject("create_cq", r.dev);
	if (!err && (context == NULL || cqe < 1 || cqe > FAKE_MAX_CQE || comp_vector < 0 ||
		     comp_vector >= context->num_comp_vectors))
		err = EINVAL;
	struct ibv_cq *cq = NULL;
	if (!err && (cq = calloc(1, sizeof(*cq))) == NULL)
		err = ENOMEM;
	if (err) {
		r.err = err;
		log_call(&r);
		errno = err;
		return NULL;
	}
	cq->context = context;
	cq->channel = channel;
	cq->cq_context = cq_context;
	cq->handle = atomic_fetch_add(&g_next_handle, 1);
	cq->cqe = cqe;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	if (channel)
		__atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_SEQ_CST);
	log_call(&r);
	return cq;
}

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (cq == NULL || cqe < 1 || cqe > FAKE_MAX_CQE)
		return EINVAL;
	cq->cqe = cqe;
	return 0;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct call_rec r = CALL_REC("ibv_destroy_cq");
	r.dev = cq ? ctx_devname(cq->context) : "-";
	int err = inject("destroy_cq", r.dev);
	if (!err && cq == NULL)
		err = EINVAL;
	r.err = err;
	log_call(&r);
	if (err)
		return err;
	if (cq->channel)
		__atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_SEQ_CST);
	fake_dp_forget_cq(cq);
	pthread_cond_destroy(&cq->cond);
	pthread_mutex_destroy(&cq->mutex);
	free(cq);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	(void)cq;
	(void)cq_context;
	if (channel == NULL) {
		errno = EINVAL;
		return -1;
	}
	/* No completion ever fires: block (or EAGAIN on a non-blocking fd) like a quiet channel. */
	char c;
	ssize_t n;
	do {
		n = read(channel->fd, &c, 1);
	} while (n < 0 && errno == EINTR);
	errno = n < 0 ? errno : EIO;
	return -1;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (cq == NULL)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

struct fake_qp {
	struct ibv_qp qp;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
};

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct call_rec r = CALL_REC("ibv_create_qp");
	r.dev = pd_devname(pd);
	int err = inject("create_qp", r.dev);
	if (!err && (pd == NULL || init == NULL || init->send_cq == NULL ||
		     (init->recv_cq == NULL && init->srq == NULL)))
		err = EINVAL;
	if (!err && init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UC && init->qp_type != IBV_QPT_UD)
		err = EOPNOTSUPP;
	if (!err && (init->cap.max_send_wr > FAKE_MAX_QP_WR || init->cap.max_recv_wr > FAKE_MAX_QP_WR ||
		     init->cap.max_send_sge > FAKE_MAX_SGE || init->cap.max_recv_sge > FAKE_MAX_SGE ||
		     init->cap.max_inline_data > 1024))
		err = EINVAL;
	struct fake_qp *q = NULL;
	if (!err && (q = calloc(1, sizeof(*q))) == NULL)
		err = ENOMEM;
	if (err) {
		r.err = err;
		log_call(&r);
		errno = err;
		return NULL;
	}
	q->qp.context = pd->context;
	q->qp.qp_context = init->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = init->send_cq;
	q->qp.recv_cq = init->recv_cq;
	q->qp.srq = init->srq;
	q->qp.handle = atomic_fetch_add(&g_next_handle, 1);
	q->qp.qp_num = atomic_fetch_add(&g_next_qpn, 1);
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = init->qp_type;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	q->init = *init;
	q->attr.qp_state = IBV_QPS_RESET;
	q->attr.cap = init->cap;
	log_call(&r);
	return &q->qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct call_rec r = CALL_REC("ibv_modify_qp");
	r.dev = qp ? ctx_devname(qp->context) : "-";
	r.access = (unsigned int)attr_mask;
	int err = inject("modify_qp", r.dev);
	if (!err && (qp == NULL || attr == NULL))
		err = EINVAL;
	if (!err && (attr_mask & IBV_QP_STATE) && (attr->qp_state < IBV_QPS_RESET || attr->qp_state > IBV_QPS_ERR))
		err = EINVAL;
	if (!err && (attr_mask & IBV_QP_PORT) && attr->port_num != 1)
		err = EINVAL;
	if (!err)
		err = fake_dp_check_modify(qp, attr, attr_mask);
	r.err = err;
	log_call(&r);
	if (err)
		return err;
	fake_dp_modified(qp, attr, attr_mask);
	struct fake_qp *q = container_of_fake(qp, struct fake_qp, qp);
	if (attr_mask & IBV_QP_STATE) {
		q->attr.qp_state = attr->qp_state;
		qp->state = attr->qp_state;
	}
	if (attr_mask & IBV_QP_PORT)
		q->attr.port_num = attr->port_num;
	if (attr_mask & IBV_QP_PKEY_INDEX)
		q->attr.pkey_index = attr->pkey_index;
	if (attr_mask & IBV_QP_ACCESS_FLAGS)
		q->attr.qp_access_flags = attr->qp_access_flags;
	if (attr_mask & IBV_QP_PATH_MTU)
		q->attr.path_mtu = attr->path_mtu;
	if (attr_mask & IBV_QP_DEST_QPN)
		q->attr.dest_qp_num = attr->dest_qp_num;
	if (attr_mask & IBV_QP_RQ_PSN)
		q->attr.rq_psn = attr->rq_psn;
	if (attr_mask & IBV_QP_SQ_PSN)
		q->attr.sq_psn = attr->sq_psn;
	if (attr_mask & IBV_QP_AV)
		q->attr.ah_attr = attr->ah_attr;
	if (attr_mask & IBV_QP_TIMEOUT)
		q->attr.timeout = attr->timeout;
	if (attr_mask & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = attr->retry_cnt;
	if (attr_mask & IBV_QP_RNR_RETRY)
		q->attr.rnr_retry = attr->rnr_retry;
	if (attr_mask & IBV_QP_MIN_RNR_TIMER)
		q->attr.min_rnr_timer = attr->min_rnr_timer;
	if (attr_mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->attr.max_rd_atomic = attr->max_rd_atomic;
	if (attr_mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	(void)attr_mask;
	struct call_rec r = CALL_REC("ibv_query_qp");
	r.dev = qp ? ctx_devname(qp->context) : "-";
	int err = inject("query_qp", r.dev);
	if (!err && (qp == NULL || attr == NULL || init_attr == NULL))
		err = EINVAL;
	r.err = err;
	log_call(&r);
	if (err)
		return err;
	struct fake_qp *q = container_of_fake(qp, struct fake_qp, qp);
	*attr = q->attr;
	*init_attr = q->init;
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct call_rec r = CALL_REC("ibv_destroy_qp");
	r.dev = qp ? ctx_devname(qp->context) : "-";
	int err = inject("destroy_qp", r.dev);
	if (!err && qp == NULL)
		err = EINVAL;
	r.err = err;
	log_call(&r);
	if (err)
		return err;
	fake_dp_forget_qp(qp);
	pthread_cond_destroy(&qp->cond);
	pthread_mutex_destroy(&qp->mutex);
	free(container_of_fake(qp, struct fake_qp, qp));
	return 0;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	return NULL; /* no QP is ever created through ibv_create_qp_ex */
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	struct call_rec r = CALL_REC("ibv_query_ece");
	r.dev = qp ? ctx_devname(qp->context) : "-";
	int err = inject("query_ece", r.dev);
	(void)ece;
	r.err = err ? err : EOPNOTSUPP;
	log_call(&r);
	return r.err;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

/* ------------------------------------------------------------------------------------------------ */
/* the rest of the public ABI: present so every symbol resolves, failing cleanly                   */

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr)
{
	(void)pd;
	(void)srq_init_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	(void)srq;
	(void)srq_attr;
	(void)srq_attr_mask;
	return EOPNOTSUPP;
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	(void)srq;
	(void)srq_attr;
	return EOPNOTSUPP;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return EINVAL;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	(void)pd;
	(void)attr;
	errno = EOPNOTSUPP;
	return NULL;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	(void)ah;
	return EINVAL;
}

int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	(void)context;
	(void)port_num;
	(void)wc;
	(void)grh;
	(void)ah_attr;
	return EOPNOTSUPP;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
{
	(void)pd;
	(void)wc;
	(void)grh;
	(void)port_num;
	errno = EOPNOTSUPP;
	return NULL;
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return EOPNOTSUPP;
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return EOPNOTSUPP;
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	(void)context;
	(void)attr;
	(void)eth_mac;
	(void)vid;
	return EOPNOTSUPP; /* the fake ports are InfiniBand, not RoCE */
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

/* Rate conversions: the tables of rdma-core's libibverbs/verbs.c. */
static const struct {
	enum ibv_rate rate;
	int mult; /* multiple of 2.5 Gbit/s, 0 where not a multiple */
	int mbps;
} k_rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},      {IBV_RATE_5_GBPS, 2, 5000},       {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},      {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},     {IBV_RATE_80_GBPS, 32, 80000},    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, 0, 14062},      {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},    {IBV_RATE_25_GBPS, 10, 25781},    {IBV_RATE_100_GBPS, 40, 103125},
    {IBV_RATE_200_GBPS, 80, 206250},   {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},     {IBV_RATE_400_GBPS, 160, 425000}, {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000},  {IBV_RATE_1200_GBPS, 480, 1275000},
};
#define K_NUM_RATES (sizeof(k_rates) / sizeof(k_rates[0]))

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < K_NUM_RATES; i++)
		if (k_rates[i].rate == rate && k_rates[i].mult)
			return k_rates[i].mult;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < K_NUM_RATES; i++)
		if (k_rates[i].mult == mult && mult)
			return k_rates[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < K_NUM_RATES; i++)
		if (k_rates[i].rate == rate)
			return k_rates[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < K_NUM_RATES; i++)
		if (k_rates[i].mbps == mbps)
			return k_rates[i].rate;
	return IBV_RATE_MAX;
}

/* Historical helpers that rdma-core keeps exporting for its own other libraries (librdmacm, ...);
 * nothing that talks to this fake uses them. Prototypes as in rdma-core's internal headers. */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
void ibv_copy_qp_attr_from_kern(void *dst, void *src);
void ibv_copy_path_rec_from_kern(void *dst, void *src);
void ibv_copy_path_rec_to_kern(void *dst, void *src);
void ibv_copy_ah_attr_from_kern(void *dst, void *src);

const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	if (dir == NULL || file == NULL || buf == NULL || size == 0)
		return -1;
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if ((size_t)n < size)
		buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return (int)n;
}

/* The kernel ABI structs these convert are not part of the public headers; the fake never hands
 * out such structs, so there is nothing meaningful to copy. */
void ibv_copy_qp_attr_from_kern(void *dst, void *src)
{
	(void)dst;
	(void)src;
}

void ibv_copy_path_rec_from_kern(void *dst, void *src)
{
	(void)dst;
	(void)src;
}

void ibv_copy_path_rec_to_kern(void *dst, void *src)
{
	(void)dst;
	(void)src;
}

void ibv_copy_ah_attr_from_kern(void *dst, void *src)
{
	(void)dst;
	(void)src;
}

/* ------------------------------------------------------------------------------------------------ */
/* IBVERBS_1.0: the pre-2006 ABI                                                                     */

/* rdma-core still exports the 1.0 versions (compat-1_0.c) with their own old struct layouts.
 * Programs built against 1.0 no longer exist in practice; the fake exports the names so the symbol
 * table matches the real library, and every entry fails cleanly with ENOSYS. */
#define FAKE_COMPAT_PTR(name)                                                                      \
	void *fake_compat_##name##_1_0(void);                                                      \
	void *fake_compat_##name##_1_0(void)                                                       \
	{                                                                                          \
		errno = ENOSYS;                                                                    \
		return NULL;                                                                       \
	}                                                                                          \
	__asm__(".symver fake_compat_" #name "_1_0, ibv_" #name "@IBVERBS_1.0");
#define FAKE_COMPAT_INT(name)                                                                      \
	int fake_compat_##name##_1_0(void);                                                        \
	int fake_compat_##name##_1_0(void)                                                         \
	{                                                                                          \
		errno = ENOSYS;                                                                    \
		return ENOSYS;                                                                     \
	}                                                                                          \
	__asm__(".symver fake_compat_" #name "_1_0, ibv_" #name "@IBVERBS_1.0");
#define FAKE_COMPAT_VOID(name)                                                                     \
	void fake_compat_##name##_1_0(void);                                                       \
	void fake_compat_##name##_1_0(void) {}                                                     \
	__asm__(".symver fake_compat_" #name "_1_0, ibv_" #name "@IBVERBS_1.0");

struct ibv_device **fake_compat_get_device_list_1_0(int *num);
struct ibv_device **fake_compat_get_device_list_1_0(int *num)
{
	if (num)
		*num = 0;
	errno = ENOSYS;
	return NULL;
}
__asm__(".symver fake_compat_get_device_list_1_0, ibv_get_device_list@IBVERBS_1.0");

FAKE_COMPAT_VOID(free_device_list)
FAKE_COMPAT_PTR(get_device_name)
FAKE_COMPAT_INT(get_device_guid)
FAKE_COMPAT_PTR(open_device)
FAKE_COMPAT_INT(close_device)
FAKE_COMPAT_INT(get_async_event)
FAKE_COMPAT_VOID(ack_async_event)
FAKE_COMPAT_INT(query_device)
FAKE_COMPAT_INT(query_port)
FAKE_COMPAT_INT(query_gid)
FAKE_COMPAT_INT(query_pkey)
FAKE_COMPAT_PTR(alloc_pd)
FAKE_COMPAT_INT(dealloc_pd)
FAKE_COMPAT_PTR(reg_mr)
FAKE_COMPAT_INT(dereg_mr)
FAKE_COMPAT_PTR(create_cq)
FAKE_COMPAT_INT(resize_cq)
FAKE_COMPAT_INT(destroy_cq)
FAKE_COMPAT_INT(get_cq_event)
FAKE_COMPAT_VOID(ack_cq_events)
FAKE_COMPAT_PTR(create_srq)
FAKE_COMPAT_INT(modify_srq)
FAKE_COMPAT_INT(query_srq)
FAKE_COMPAT_INT(destroy_srq)
FAKE_COMPAT_PTR(create_qp)
FAKE_COMPAT_INT(query_qp)
FAKE_COMPAT_INT(modify_qp)
FAKE_COMPAT_INT(destroy_qp)
FAKE_COMPAT_PTR(create_ah)
FAKE_COMPAT_INT(destroy_ah)
FAKE_COMPAT_INT(attach_mcast)
FAKE_COMPAT_INT(detach_mcast)

/* ibv_register_driver@IBVERBS_1.1 (not the default version, like the real one): registration of an
 * out-of-tree provider. The fake loads no providers. */
void fake_compat_register_driver_1_1(const char *name, void *init_func);
void fake_compat_register_driver_1_1(const char *name, void *init_func)
{
	(void)init_func;
	warn_line("provider '%.64s' asked to register; the fake libibverbs loads no providers", name ? name : "?");
}
__asm__(".symver fake_compat_register_driver_1_1, ibv_register_driver@IBVERBS_1.1");
