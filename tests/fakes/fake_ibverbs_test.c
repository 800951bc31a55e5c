/* fake_ibverbs_test.c - checks the fake libibverbs.so.1 the way its users load it: dlopen by path and
 * dlvsym at the versions NCCL and mrcheck's probe ask for. Every case runs in a forked child so that
 * rlimits, uid changes, hangs and crashes stay there. Cases that must run as a user without
 * CAP_IPC_LOCK switch to nobody (65534) when the test runs as root, as CI does.
 *
 * Usage: fake_ibverbs_test PATH/TO/libibverbs.so.1
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB (1024UL)
#define MIB (1024UL * 1024UL)
#define NOBODY 65534
/* NCCL's flags for its data buffers (net_ib.cc ncclIbRegMrDmaBufInternal2) with relaxed ordering. */
#define NCCL_FLAGS                                                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING)

static const char *g_lib_path;
static void *g_lib;
static char g_log_path[64];

/* ---- the API, resolved like NCCL does (src/misc/ibvsymbols.cc) ---- */
struct api {
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	__be64 (*get_device_guid)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*get_async_event)(struct ibv_context *, struct ibv_async_event *);
	void (*ack_async_event)(struct ibv_async_event *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	int (*query_qp)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
	int (*destroy_cq)(struct ibv_cq *);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*destroy_qp)(struct ibv_qp *);
	int (*fork_init)(void);
	const char *(*event_type_str)(enum ibv_event_type);
	int (*query_ece)(struct ibv_qp *, struct ibv_ece *);
	int (*set_ece)(struct ibv_qp *, struct ibv_ece *);
};
static struct api g;

/* ---- reporting ---- */
static int g_case_failed;

__attribute__((format(printf, 3, 4))) static void failf(const char *file, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("mrcheck: fake_ibverbs_test: %s:%d: %s\n", file, line, msg);
	fflush(stdout);
	g_case_failed = 1;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			failf(__FILE__, __LINE__, "check failed: %s", #cond);                      \
	} while (0)
#define CHECK_ERRNO_NULL(expr, want)                                                               \
	do {                                                                                       \
		errno = 0;                                                                         \
		void *p_ = (void *)(expr);                                                         \
		int e_ = errno;                                                                    \
		if (p_ != NULL || e_ != (want))                                                    \
			failf(__FILE__, __LINE__, "%s: got %p errno %d (%s), want NULL errno %d (%s)", \
			      #expr, p_, e_, strerror(e_), (want), strerror(want));                \
	} while (0)

/* ---- helpers ---- */
#define SKIP_EXIT 77

static void skip_case(void)
{
	fflush(stdout);
	_exit(g_case_failed ? 1 : SKIP_EXIT);
}

static bool has_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		return false;
	return data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

/* Soft RLIMIT_MEMLOCK = soft (the hard limit stays), then as root become nobody, which clears every
 * capability, CAP_IPC_LOCK included. Exits the child if that fails: the case would prove nothing. */
static void become_job_user(rlim_t soft)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || (rl.rlim_max != RLIM_INFINITY && soft > rl.rlim_max)) {
		printf("mrcheck: fake_ibverbs_test: hard RLIMIT_MEMLOCK %llu is below the %llu this case needs\n",
		       (unsigned long long)rl.rlim_max, (unsigned long long)soft);
		_exit(2);
	}
	rl.rlim_cur = soft;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		printf("mrcheck: fake_ibverbs_test: setrlimit: %s\n", strerror(errno));
		_exit(2);
	}
	if (geteuid() == 0) {
		if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) != 0) {
			printf("mrcheck: fake_ibverbs_test: cannot become uid %d: %s\n", NOBODY, strerror(errno));
			_exit(2);
		}
	}
	if (has_cap_ipc_lock()) {
		printf("mrcheck: fake_ibverbs_test: still has CAP_IPC_LOCK after dropping privileges\n");
		_exit(2);
	}
}

static long vm_locked_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (f == NULL)
		return -1;
	char line[256];
	long v = -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmLck: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void *map_pages(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		printf("mrcheck: fake_ibverbs_test: mmap %zu: %s\n", len, strerror(errno));
		_exit(2);
	}
	return p;
}

struct hca {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
};

static struct hca open_first(void)
{
	struct hca h = {0};
	int n = -1;
	h.list = g.get_device_list(&n);
	if (h.list == NULL || n < 1) {
		printf("mrcheck: fake_ibverbs_test: no fake device (n=%d)\n", n);
		_exit(2);
	}
	h.ctx = g.open_device(h.list[0]);
	h.pd = h.ctx ? g.alloc_pd(h.ctx) : NULL;
	if (h.pd == NULL) {
		printf("mrcheck: fake_ibverbs_test: open/alloc_pd failed: %s\n", strerror(errno));
		_exit(2);
	}
	return h;
}

static void close_hca(struct hca *h)
{
	CHECK(g.dealloc_pd(h->pd) == 0);
	CHECK(g.close_device(h->ctx) == 0);
	g.free_device_list(h->list);
}

/* Reads the call log into a malloc'd string. */
static char *read_log(void)
{
	FILE *f = fopen(g_log_path, "re");
	if (f == NULL)
		return strdup("");
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strdup(buf);
}

static void reset_env(void)
{
	unsetenv("MRCHECK_FAKE_IBV_INJECT");
	unsetenv("MRCHECK_FAKE_IBV_DEVICES");
	setenv("MRCHECK_FAKE_IBV_LOG", g_log_path, 1);
	int fd = open(g_log_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
}

/* ---- cases ---- */

/* Every public symbol of rdma-core v44 at its version (objdump -T libibverbs.so.1.14.44.0). */
static const char *const k_symbols[][2] = {
    {"ibv_get_device_list", "IBVERBS_1.1"}, {"ibv_free_device_list", "IBVERBS_1.1"},
    {"ibv_get_device_name", "IBVERBS_1.1"}, {"ibv_get_device_guid", "IBVERBS_1.1"},
    {"ibv_open_device", "IBVERBS_1.1"},     {"ibv_close_device", "IBVERBS_1.1"},
    {"ibv_get_async_event", "IBVERBS_1.1"}, {"ibv_ack_async_event", "IBVERBS_1.1"},
    {"ibv_query_device", "IBVERBS_1.1"},    {"ibv_query_port", "IBVERBS_1.1"},
    {"ibv_query_gid", "IBVERBS_1.1"},       {"ibv_query_pkey", "IBVERBS_1.1"},
    {"ibv_query_qp", "IBVERBS_1.1"},        {"ibv_alloc_pd", "IBVERBS_1.1"},
    {"ibv_dealloc_pd", "IBVERBS_1.1"},      {"ibv_reg_mr", "IBVERBS_1.1"},
    {"ibv_rereg_mr", "IBVERBS_1.1"},        {"ibv_dereg_mr", "IBVERBS_1.1"},
    {"ibv_create_cq", "IBVERBS_1.1"},       {"ibv_resize_cq", "IBVERBS_1.1"},
    {"ibv_destroy_cq", "IBVERBS_1.1"},      {"ibv_get_cq_event", "IBVERBS_1.1"},
    {"ibv_ack_cq_events", "IBVERBS_1.1"},   {"ibv_create_qp", "IBVERBS_1.1"},
    {"ibv_modify_qp", "IBVERBS_1.1"},       {"ibv_destroy_qp", "IBVERBS_1.1"},
    {"ibv_create_srq", "IBVERBS_1.1"},      {"ibv_modify_srq", "IBVERBS_1.1"},
    {"ibv_query_srq", "IBVERBS_1.1"},       {"ibv_destroy_srq", "IBVERBS_1.1"},
    {"ibv_create_ah", "IBVERBS_1.1"},       {"ibv_create_ah_from_wc", "IBVERBS_1.1"},
    {"ibv_init_ah_from_wc", "IBVERBS_1.1"}, {"ibv_destroy_ah", "IBVERBS_1.1"},
    {"ibv_attach_mcast", "IBVERBS_1.1"},    {"ibv_detach_mcast", "IBVERBS_1.1"},
    {"ibv_fork_init", "IBVERBS_1.1"},       {"ibv_dontfork_range", "IBVERBS_1.1"},
    {"ibv_dofork_range", "IBVERBS_1.1"},    {"ibv_event_type_str", "IBVERBS_1.1"},
    {"ibv_node_type_str", "IBVERBS_1.1"},   {"ibv_port_state_str", "IBVERBS_1.1"},
    {"ibv_wc_status_str", "IBVERBS_1.1"},   {"ibv_rate_to_mbps", "IBVERBS_1.1"},
    {"mbps_to_ibv_rate", "IBVERBS_1.1"},    {"ibv_resolve_eth_l2_from_gid", "IBVERBS_1.1"},
    {"ibv_register_driver", "IBVERBS_1.1"}, {"ibv_copy_ah_attr_from_kern", "IBVERBS_1.1"},
    {"ibv_create_comp_channel", "IBVERBS_1.0"}, {"ibv_destroy_comp_channel", "IBVERBS_1.0"},
    {"ibv_rate_to_mult", "IBVERBS_1.0"},    {"mult_to_ibv_rate", "IBVERBS_1.0"},
    {"ibv_get_sysfs_path", "IBVERBS_1.0"},  {"ibv_read_sysfs_file", "IBVERBS_1.0"},
    {"ibv_copy_path_rec_from_kern", "IBVERBS_1.0"}, {"ibv_copy_path_rec_to_kern", "IBVERBS_1.0"},
    {"ibv_copy_qp_attr_from_kern", "IBVERBS_1.0"},
    {"ibv_get_device_list", "IBVERBS_1.0"}, {"ibv_open_device", "IBVERBS_1.0"},
    {"ibv_reg_mr", "IBVERBS_1.0"},          {"ibv_query_port", "IBVERBS_1.0"},
    {"ibv_alloc_pd", "IBVERBS_1.0"},        {"ibv_dereg_mr", "IBVERBS_1.0"},
    {"ibv_get_pkey_index", "IBVERBS_1.5"},  {"ibv_qp_to_qp_ex", "IBVERBS_1.6"},
    {"ibv_reg_mr_iova", "IBVERBS_1.7"},     {"ibv_reg_mr_iova2", "IBVERBS_1.8"},
    {"ibv_get_device_index", "IBVERBS_1.9"}, {"ibv_import_device", "IBVERBS_1.10"},
    {"ibv_import_mr", "IBVERBS_1.10"},      {"ibv_import_pd", "IBVERBS_1.10"},
    {"ibv_query_ece", "IBVERBS_1.10"},      {"ibv_set_ece", "IBVERBS_1.10"},
    {"ibv_unimport_mr", "IBVERBS_1.10"},    {"ibv_unimport_pd", "IBVERBS_1.10"},
    {"_ibv_query_gid_ex", "IBVERBS_1.11"},  {"_ibv_query_gid_table", "IBVERBS_1.11"},
    {"ibv_reg_dmabuf_mr", "IBVERBS_1.12"},  {"ibv_import_dm", "IBVERBS_1.13"},
    {"ibv_is_fork_initialized", "IBVERBS_1.13"}, {"ibv_unimport_dm", "IBVERBS_1.13"},
    {"ibv_query_qp_data_in_order", "IBVERBS_1.14"},
};
#define K_NUM_SYMBOLS (sizeof(k_symbols) / sizeof(k_symbols[0]))

/* Names at versions where the real library does NOT have them: dlvsym must fail there too. */
static const char *const k_absent[][2] = {
    {"ibv_reg_mr_iova2", "IBVERBS_1.1"},      {"ibv_reg_dmabuf_mr", "IBVERBS_1.1"},
    {"ibv_create_comp_channel", "IBVERBS_1.1"}, {"ibv_reg_mr", "IBVERBS_1.8"},
    {"ibv_query_port_speed", "IBVERBS_1.16"}, {"verbs_register_driver_34", "IBVERBS_PRIVATE_34"},
};

static void case_symbols(void)
{
	for (size_t i = 0; i < K_NUM_SYMBOLS; i++)
		if (dlvsym(g_lib, k_symbols[i][0], k_symbols[i][1]) == NULL)
			failf(__FILE__, __LINE__, "dlvsym(%s, %s) failed: %s", k_symbols[i][0], k_symbols[i][1], dlerror());
	for (size_t i = 0; i < sizeof(k_absent) / sizeof(k_absent[0]); i++)
		if (dlvsym(g_lib, k_absent[i][0], k_absent[i][1]) != NULL)
			failf(__FILE__, __LINE__, "dlvsym(%s, %s) resolved; the real library has no such version",
			      k_absent[i][0], k_absent[i][1]);
	/* The default (unversioned) lookup gets the newest version, as a normal link would. */
	CHECK(dlsym(g_lib, "ibv_reg_mr") == dlvsym(g_lib, "ibv_reg_mr", "IBVERBS_1.1"));
	CHECK(dlvsym(g_lib, "ibv_reg_mr", "IBVERBS_1.0") != dlvsym(g_lib, "ibv_reg_mr", "IBVERBS_1.1"));
}

/* The table above is the real library's: check it against the installed rdma-core when it is v44
 * (has IBVERBS_1.14, not 1.15), in this child only, so two libibverbs never meet in the parent. */
static void case_symbols_match_real_library(void)
{
#ifdef MRCHECK_REAL_IBVERBS
	void *real = dlopen(MRCHECK_REAL_IBVERBS, RTLD_NOW | RTLD_LOCAL);
	if (real == NULL) {
		printf("mrcheck: fake_ibverbs_test: skip: %s not loadable\n", MRCHECK_REAL_IBVERBS);
		skip_case();
	}
	if (dlvsym(real, "ibv_query_qp_data_in_order", "IBVERBS_1.14") == NULL) {
		printf("mrcheck: fake_ibverbs_test: skip: installed libibverbs is older than rdma-core 44\n");
		skip_case();
	}
	for (size_t i = 0; i < K_NUM_SYMBOLS; i++)
		if (dlvsym(real, k_symbols[i][0], k_symbols[i][1]) == NULL)
			failf(__FILE__, __LINE__, "real libibverbs lacks %s@%s: the table is wrong", k_symbols[i][0],
			      k_symbols[i][1]);
	/* the first four are absent from every rdma-core; the last two only from some */
	for (size_t i = 0; i < 4; i++)
		if (dlvsym(real, k_absent[i][0], k_absent[i][1]) != NULL)
			failf(__FILE__, __LINE__, "real libibverbs has %s@%s", k_absent[i][0], k_absent[i][1]);
#else
	printf("mrcheck: fake_ibverbs_test: skip: no real libibverbs found at build time\n");
	skip_case();
#endif
}

static void case_devices(void)
{
	int n = -1;
	struct ibv_device **l = g.get_device_list(&n);
	CHECK(l != NULL && n == 1 && l[1] == NULL);
	CHECK(l && strcmp(g.get_device_name(l[0]), "mlx5_0") == 0);
	CHECK(l && strcmp(l[0]->dev_name, "uverbs0") == 0);
	CHECK(l && strcmp(l[0]->ibdev_path, "/sys/class/infiniband/mlx5_0") == 0);
	CHECK(l && l[0]->node_type == IBV_NODE_CA && l[0]->transport_type == IBV_TRANSPORT_IB);
	CHECK(l && g.get_device_guid(l[0]) != 0);
	g.free_device_list(l);

	setenv("MRCHECK_FAKE_IBV_DEVICES", "mlx5_0, mlx5_1,mlx5_0,bad/name", 1);
	l = g.get_device_list(&n);
	CHECK(l != NULL && n == 2 && l[2] == NULL);
	CHECK(l && strcmp(l[1]->name, "mlx5_1") == 0 && strcmp(l[1]->dev_name, "uverbs1") == 0);
	CHECK(l && g.get_device_guid(l[0]) != g.get_device_guid(l[1]));
	g.free_device_list(l);

	setenv("MRCHECK_FAKE_IBV_DEVICES", "", 1);
	n = -1;
	l = g.get_device_list(&n);
	CHECK(l != NULL && n == 0 && l[0] == NULL); /* empty list, not NULL, like rdma-core */
	g.free_device_list(l);
	unsetenv("MRCHECK_FAKE_IBV_DEVICES");

	struct hca h = open_first();
	struct ibv_device_attr da;
	CHECK(g.query_device(h.ctx, &da) == 0);
	CHECK(strcmp(da.fw_ver, "28.39.1002") == 0);
	CHECK(da.phys_port_cnt == 1 && da.max_mr_size > 1ULL << 40 && da.vendor_id == 0x02c9);
	CHECK(da.max_qp > 0 && da.max_cqe > 0 && da.max_qp_wr > 0);

	/* The symbol NCCL resolves (IBVERBS_1.1, old struct size) and the verbs.h inline path. */
	struct ibv_port_attr pa;
	memset(&pa, 0xab, sizeof(pa));
	CHECK(g.query_port(h.ctx, 1, &pa) == 0);
	CHECK(pa.state == IBV_PORT_ACTIVE && pa.link_layer == IBV_LINK_LAYER_INFINIBAND);
	CHECK(pa.active_mtu == IBV_MTU_4096 && pa.lid != 0);
	CHECK(h.ctx->abi_compat == __VERBS_ABI_IS_EXTENDED);
	struct verbs_context *vctx = verbs_get_ctx_op(h.ctx, query_port);
	CHECK(vctx != NULL);
	if (vctx) {
		/* A caller with a newer, larger struct (NCCL 2.28 adds active_speed_ex) gets zeroes there. */
		unsigned char big[sizeof(struct ibv_port_attr) + 8];
		memset(big, 0xab, sizeof(big));
		CHECK(vctx->query_port(h.ctx, 1, (struct ibv_port_attr *)big, sizeof(big)) == 0);
		CHECK(((struct ibv_port_attr *)big)->state == IBV_PORT_ACTIVE);
		CHECK(big[sizeof(big) - 1] == 0 && big[sizeof(struct ibv_port_attr)] == 0);
		CHECK(vctx->query_port(h.ctx, 2, &pa, sizeof(pa)) == EINVAL);
	}
	union ibv_gid gid;
	CHECK(g.query_gid(h.ctx, 1, 0, &gid) == 0);
	CHECK(be64toh(gid.global.subnet_prefix) == 0xfe80000000000000ULL && gid.global.interface_id != 0);
	CHECK(g.query_gid(h.ctx, 2, 0, &gid) == -1);
	close_hca(&h);
}

/* NCCL's net_ib init and connect path as far as it goes without a peer. */
static void case_nccl_path(void)
{
	CHECK(g.fork_init() == 0);
	struct hca h = open_first();
	/* NCCL's DMA-BUF support probe: a supporting stack answers EBADF. */
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	/* The async event thread: nothing to report; a non-blocking fd says so at once. */
	int fl = fcntl(h.ctx->async_fd, F_GETFL);
	CHECK(fcntl(h.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	struct ibv_async_event ev;
	errno = 0;
	CHECK(g.get_async_event(h.ctx, &ev) == -1 && errno == EAGAIN);
	CHECK(strcmp(g.event_type_str(IBV_EVENT_DEVICE_FATAL), "local catastrophic error") == 0);

	struct ibv_cq *cq = g.create_cq(h.ctx, 1024, NULL, NULL, 0);
	CHECK(cq != NULL);
	struct ibv_qp_init_attr ia = {0};
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 256;
	ia.cap.max_recv_wr = 256;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = cq ? g.create_qp(h.pd, &ia) : NULL;
	CHECK(qp != NULL);
	if (qp) {
		struct ibv_qp_attr qa = {0};
		qa.qp_state = IBV_QPS_INIT;
		qa.port_num = 1;
		qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		CHECK(g.modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
		qa.qp_state = IBV_QPS_RTR;
		CHECK(g.modify_qp(qp, &qa, IBV_QP_STATE) == 0);
		qa.qp_state = IBV_QPS_RTS;
		CHECK(g.modify_qp(qp, &qa, IBV_QP_STATE) == 0);
		CHECK(qp->state == IBV_QPS_RTS);
		struct ibv_qp_attr got;
		struct ibv_qp_init_attr gia;
		CHECK(g.query_qp(qp, &got, IBV_QP_STATE, &gia) == 0 && got.qp_state == IBV_QPS_RTS);
		struct ibv_ece ece;
		CHECK(g.query_ece(qp, &ece) == EOPNOTSUPP); /* NCCL: "not supported", carries on */
		/* Small internal MR (NCCL's fifo), then a post: the fake moves no data and says so. */
		static char fifo[4096] __attribute__((aligned(4096)));
		struct ibv_mr *mr = g.reg_mr(h.pd, fifo, sizeof(fifo),
					     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK(mr != NULL);
		struct ibv_sge sge = {.addr = (uintptr_t)fifo, .length = 8, .lkey = mr ? mr->lkey : 0};
		struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
		struct ibv_send_wr *bad = NULL;
		CHECK(ibv_post_send(qp, &wr, &bad) == EOPNOTSUPP && bad == &wr);
		struct ibv_wc wc;
		CHECK(ibv_poll_cq(cq, 1, &wc) == 0);
		if (mr)
			CHECK(g.dereg_mr(mr) == 0);
		CHECK(g.destroy_qp(qp) == 0);
	}
	if (cq)
		CHECK(g.destroy_cq(cq) == 0);
	close_hca(&h);
}

static void case_memlock_64k(void)
{
	become_job_user(64 * KIB);
	struct hca h = open_first();
	char *buf = map_pages(4 * MIB);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4 * MIB, (uintptr_t)buf, NCCL_FLAGS), ENOMEM);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4 * MIB, IBV_ACCESS_LOCAL_WRITE), ENOMEM);
	/* Under the limit it works, and the charge goes back with dereg. */
	struct ibv_mr *mr = g.reg_mr_iova2(h.pd, buf, 32 * KIB, (uintptr_t)buf, NCCL_FLAGS);
	CHECK(mr != NULL);
	CHECK(vm_locked_kib() == 32);
	if (mr) {
		CHECK(mr->addr == buf && mr->length == 32 * KIB && mr->pd == h.pd && mr->context == h.ctx);
		CHECK(mr->lkey != 0 && mr->rkey != 0);
		CHECK(g.dealloc_pd(h.pd) == EBUSY); /* a PD with MRs cannot go */
		CHECK(g.dereg_mr(mr) == 0);
	}
	CHECK(vm_locked_kib() == 0);
	/* An unmapped range over the limit: the kernel charges pinned_vm before it pins -> ENOMEM. */
	char *gone = map_pages(4 * MIB);
	munmap(gone, 4 * MIB);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, gone, 4 * MIB, (uintptr_t)gone, NCCL_FLAGS), ENOMEM);
	/* DMA-BUF registration is not charged: limit or not, fd -1 is EBADF. */
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	close_hca(&h);
}

static void case_memlock_zero(void)
{
	become_job_user(0);
	struct hca h = open_first();
	char *buf = map_pages(64 * KIB);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4 * KIB, (uintptr_t)buf, NCCL_FLAGS), EPERM);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4 * KIB, IBV_ACCESS_LOCAL_WRITE), EPERM);
	/* can_do_mlock() comes before the zero-length check, as in ib_umem_get(). */
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EPERM);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	close_hca(&h);
}

static void case_memlock_8m(void)
{
	become_job_user(8 * MIB);
	struct hca h = open_first();
	char *buf = map_pages(8 * MIB);
	struct ibv_mr *a = g.reg_mr_iova2(h.pd, buf, 4 * MIB, (uintptr_t)buf, NCCL_FLAGS);
	CHECK(a != NULL);
	CHECK(vm_locked_kib() == 4096);
	/* A second MR over part of the same pages: the kernel charges pinned_vm again (4 + 2 MiB). */
	struct ibv_mr *b = g.reg_mr_iova2(h.pd, buf + 1 * MIB, 2 * MIB, (uintptr_t)buf + 1 * MIB, NCCL_FLAGS);
	CHECK(b != NULL);
	CHECK(vm_locked_kib() == 4096); /* mlock counts each page once */
	/* 4 + 2 + 4 MiB > 8 MiB: ENOMEM although mlock alone would accept pages it already holds. */
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4 * MIB, (uintptr_t)buf, NCCL_FLAGS), ENOMEM);
	CHECK(vm_locked_kib() == 4096);
	/* Deregistering a must leave b's pages pinned. */
	if (a)
		CHECK(g.dereg_mr(a) == 0);
	CHECK(vm_locked_kib() == 2048);
	a = g.reg_mr_iova2(h.pd, buf, 4 * MIB, (uintptr_t)buf, NCCL_FLAGS);
	CHECK(a != NULL);
	if (a)
		CHECK(g.dereg_mr(a) == 0);
	if (b)
		CHECK(g.dereg_mr(b) == 0);
	CHECK(vm_locked_kib() == 0);
	close_hca(&h);
}

static void case_root_bypass(void)
{
	if (!has_cap_ipc_lock()) {
		printf("mrcheck: fake_ibverbs_test: skip: not running with CAP_IPC_LOCK\n");
		skip_case();
	}
	struct rlimit rl;
	getrlimit(RLIMIT_MEMLOCK, &rl);
	rl.rlim_cur = 64 * KIB;
	CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	struct hca h = open_first();
	char *buf = map_pages(16 * MIB);
	struct ibv_mr *mr = g.reg_mr_iova2(h.pd, buf, 16 * MIB, (uintptr_t)buf, NCCL_FLAGS);
	CHECK(mr != NULL);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	rl.rlim_cur = 0;
	CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	mr = g.reg_mr(h.pd, buf, 4 * MIB, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	close_hca(&h);
}

static void case_validation(void)
{
	become_job_user(8 * MIB);
	struct hca h = open_first();
	long ps = sysconf(_SC_PAGESIZE);
	char *buf = map_pages(1 * MIB);
	/* iova and address must have the same offset in the page. */
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf + 100, 8192, (uintptr_t)buf + 200, NCCL_FLAGS), EINVAL);
	struct ibv_mr *mr = g.reg_mr_iova2(h.pd, buf + 100, 8192, 0x10000000 + 100, NCCL_FLAGS);
	CHECK(mr != NULL); /* a different iova with the same page offset is fine */
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	/* Access flags, as ib_check_mr_access(). */
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE), EINVAL);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ), EINVAL);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | (1 << 8)), EINVAL);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), EOPNOTSUPP);
	mr = g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	CHECK(mr != NULL);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	/* Length 0 and address overflow. */
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, (void *)(UINTPTR_MAX - 100), 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	/* Memory the pages of which cannot be pinned: EFAULT. */
	char *hole = map_pages(64 * KIB);
	munmap(hole, 64 * KIB);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, hole, 4096, IBV_ACCESS_LOCAL_WRITE), EFAULT);
	/* A range whose first page is mapped and whose second is not. */
	char *edge = map_pages(2 * MIB);
	munmap(edge + 1 * MIB, 1 * MIB);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, edge + 1 * MIB - ps, 2 * ps, IBV_ACCESS_LOCAL_WRITE), EFAULT);
	/* A reserved range without access, as a cudaMalloc pointer looks to the CPU. */
	char *none = mmap(NULL, 1 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(none != MAP_FAILED);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, none, 64 * KIB, (uintptr_t)none, NCCL_FLAGS), EFAULT);
	/* Read-only memory: fine for a read-only MR, EFAULT for a writable one. */
	char *ro = mmap(NULL, 64 * KIB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE), EFAULT);
	mr = g.reg_mr(h.pd, ro, 4096, IBV_ACCESS_REMOTE_READ);
	CHECK(mr != NULL);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	CHECK(vm_locked_kib() == 0);
	close_hca(&h);
}

static void case_dmabuf(void)
{
	struct hca h = open_first();
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 4096, 0, 9999, NCCL_FLAGS), EBADF);
	/* An open file that is not a dma-buf: dma_buf_get() says EINVAL. */
	char path[] = "/tmp/mrcheck-fake-dmabuf-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0) {
		unlink(path);
		CHECK(ftruncate(fd, 1 * MIB) == 0);
		CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 4096, 0, fd, NCCL_FLAGS), EINVAL);
		close(fd);
	}
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 4096, 0, p[0], NCCL_FLAGS), EINVAL);
	close(p[0]);
	close(p[1]);
	/* Access flags are checked first, as in the kernel's handler. */
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 4096, 0, -1, IBV_ACCESS_REMOTE_WRITE), EINVAL);
	close_hca(&h);
}

static void case_injection(void)
{
	struct hca h = open_first();
	char *buf = map_pages(64 * KIB);
	setenv("MRCHECK_FAKE_IBV_INJECT", "reg_mr=EINVAL,reg_mr_iova2=EFAULT,reg_dmabuf_mr=EOPNOTSUPP", 1);
	CHECK_ERRNO_NULL(g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4096, (uintptr_t)buf, NCCL_FLAGS), EFAULT);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EOPNOTSUPP);
	setenv("MRCHECK_FAKE_IBV_INJECT", "reg_dmabuf_mr=EPROTONOSUPPORT,reg_mr_iova2=ENOMEM", 1);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EPROTONOSUPPORT);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4096, (uintptr_t)buf, NCCL_FLAGS), ENOMEM);
	setenv("MRCHECK_FAKE_IBV_INJECT", "open_device=EACCES, alloc_pd=ENOMEM, ibv_reg_mr_iova2=1", 1);
	CHECK_ERRNO_NULL(g.open_device(h.list[0]), EACCES);
	CHECK_ERRNO_NULL(g.alloc_pd(h.ctx), ENOMEM);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4096, (uintptr_t)buf, NCCL_FLAGS), EPERM);
	setenv("MRCHECK_FAKE_IBV_INJECT", "get_device_list=ENOSYS", 1);
	int n = 7;
	CHECK_ERRNO_NULL(g.get_device_list(&n), ENOSYS);
	CHECK(n == 0);

	/* @N fires on the Nth call of that function in this process only. */
	unsetenv("MRCHECK_FAKE_IBV_INJECT");
	for (int i = 0; i < 3; i++) {
		struct ibv_mr *mr = g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0);
		CHECK(mr == NULL);
	}
	/* reg_dmabuf_mr has been called 5 times so far in this child; the 7th call is hit. */
	setenv("MRCHECK_FAKE_IBV_INJECT", "reg_dmabuf_mr=EOPNOTSUPP@7", 1);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EOPNOTSUPP);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	unsetenv("MRCHECK_FAKE_IBV_INJECT");
	close_hca(&h);
	/* The log tells an injected errno from one the fake (or the kernel) produced. */
	char *log = read_log();
	CHECK(strstr(log, "call=ibv_reg_mr dev=mlx5_0") != NULL);
	CHECK(strstr(log, "result=EINVAL errno=22 note=injected\n") != NULL);
	CHECK(strstr(log, "call=ibv_reg_dmabuf_mr dev=mlx5_0 addr=0x0 length=0 iova=0x0 access=0x0 fd=-1 offset=0 "
			  "result=EBADF errno=9\n") != NULL);
	CHECK(strstr(log, "result=EOPNOTSUPP errno=95 note=injected\n") != NULL);
	free(log);
}

/* Unknown specs: one line on stderr, otherwise ignored. */
static void case_injection_bad_spec(void)
{
	int p[2];
	CHECK(pipe(p) == 0);
	int saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	setenv("MRCHECK_FAKE_IBV_INJECT", "reg_mr=EWHATEVER,frobnicate=EINVAL,reg_mr_iova2,alloc_pd=EINVAL@0", 1);
	struct hca h = open_first();
	char *buf = map_pages(64 * KIB);
	struct ibv_mr *mr = g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	mr = g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	unsetenv("MRCHECK_FAKE_IBV_INJECT");
	close_hca(&h);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(p[1]);
	char out[4096];
	ssize_t n = read(p[0], out, sizeof(out) - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
	int lines = 0;
	for (char *s = out; (s = strstr(s, "mrcheck: fake_ibverbs: ignoring MRCHECK_FAKE_IBV_INJECT")); s++)
		lines++;
	/* four bad entries, each reported once although the spec was read at every call */
	if (lines != 4)
		failf(__FILE__, __LINE__, "want 4 warning lines, got %d: %s", lines, out);
	CHECK(strstr(out, "'frobnicate=EINVAL': unknown function") != NULL);
}

static void case_log(void)
{
	become_job_user(64 * KIB);
	struct hca h = open_first();
	char *buf = map_pages(4 * MIB);
	struct ibv_mr *mr = g.reg_mr_iova2(h.pd, buf, 32 * KIB, (uintptr_t)buf, NCCL_FLAGS);
	CHECK(mr != NULL);
	CHECK_ERRNO_NULL(g.reg_mr_iova2(h.pd, buf, 4 * MIB, (uintptr_t)buf, NCCL_FLAGS), ENOMEM);
	CHECK_ERRNO_NULL(g.reg_dmabuf_mr(h.pd, 0, 0, 0, -1, 0), EBADF);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	close_hca(&h);
	char *log = read_log();
	char want[256];
	snprintf(want, sizeof(want),
		 "call=ibv_reg_mr_iova2 dev=mlx5_0 addr=%p length=32768 iova=%p access=0x10000f fd=-1 offset=0 "
		 "result=ok errno=0",
		 (void *)buf, (void *)buf);
	if (strstr(log, want) == NULL)
		failf(__FILE__, __LINE__, "log lacks '%s':\n%s", want, log);
	CHECK(strstr(log, "call=ibv_reg_mr_iova2 dev=mlx5_0") && strstr(log, "length=4194304"));
	CHECK(strstr(log, "access=0x10000f fd=-1 offset=0 result=ENOMEM errno=12") != NULL);
	CHECK(strstr(log, "call=ibv_reg_dmabuf_mr dev=mlx5_0 addr=0x0 length=0 iova=0x0 access=0x0 fd=-1 offset=0 "
			  "result=EBADF errno=9") != NULL);
	CHECK(strstr(log, "call=ibv_dereg_mr dev=mlx5_0") != NULL);
	CHECK(strstr(log, "call=ibv_open_device dev=mlx5_0") != NULL);
	/* every line is a whole line with the house prefix */
	for (char *l = log; *l; l = strchr(l, '\n') + 1) {
		CHECK(strncmp(l, "mrcheck: fake_ibverbs: pid=", 27) == 0);
		if (strchr(l, '\n') == NULL)
			break;
	}
	free(log);
}

/* Many threads registering and deregistering at once leave no pinned page and no charge behind. */
struct thread_arg {
	struct ibv_pd *pd;
	char *buf;
	int ok;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	for (int i = 0; i < 200; i++) {
		/* overlapping ranges between threads on purpose */
		size_t off = (size_t)(i % 8) * 4096;
		struct ibv_mr *mr = g.reg_mr_iova2(a->pd, a->buf + off, 64 * KIB, (uintptr_t)a->buf + off, NCCL_FLAGS);
		if (mr == NULL || g.dereg_mr(mr) != 0)
			return NULL;
	}
	a->ok = 1;
	return NULL;
}

static void case_threads(void)
{
	become_job_user(8 * MIB);
	unsetenv("MRCHECK_FAKE_IBV_LOG");
	struct hca h = open_first();
	char *buf = map_pages(1 * MIB);
	pthread_t t[8];
	struct thread_arg args[8];
	for (int i = 0; i < 8; i++) {
		args[i] = (struct thread_arg){h.pd, buf + (i % 2) * 128 * KIB, 0};
		CHECK(pthread_create(&t[i], NULL, thread_main, &args[i]) == 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		CHECK(args[i].ok == 1);
	}
	CHECK(vm_locked_kib() == 0);
	/* The full 8 MiB budget is back: nothing was left charged. */
	char *big = map_pages(8 * MIB);
	struct ibv_mr *mr = g.reg_mr_iova2(h.pd, big, 8 * MIB, (uintptr_t)big, NCCL_FLAGS);
	CHECK(mr != NULL);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	close_hca(&h);
}

/* A forked child starts like a new mm: no pinned pages, nothing charged (kernel: mm->pinned_vm = 0). */
static void case_fork(void)
{
	become_job_user(8 * MIB);
	struct hca h = open_first();
	char *buf = map_pages(6 * MIB);
	struct ibv_mr *mr = g.reg_mr_iova2(h.pd, buf, 6 * MIB, (uintptr_t)buf, NCCL_FLAGS);
	CHECK(mr != NULL);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		g_case_failed = 0;
		CHECK(vm_locked_kib() == 0);
		char *mine = map_pages(6 * MIB);
		struct ibv_mr *m2 = g.reg_mr_iova2(h.pd, mine, 6 * MIB, (uintptr_t)mine, NCCL_FLAGS);
		CHECK(m2 != NULL);
		if (m2)
			CHECK(g.dereg_mr(m2) == 0);
		fflush(stdout);
		_exit(g_case_failed);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* and the parent's MR is untouched */
	CHECK(vm_locked_kib() == 6 * 1024);
	if (mr)
		CHECK(g.dereg_mr(mr) == 0);
	close_hca(&h);
}

static void case_hang_child(void)
{
	struct hca h = open_first();
	char *buf = map_pages(64 * KIB);
	setenv("MRCHECK_FAKE_IBV_INJECT", "reg_mr_iova2=hang", 1);
	alarm(1);
	g.reg_mr_iova2(h.pd, buf, 4096, (uintptr_t)buf, NCCL_FLAGS);
	printf("mrcheck: fake_ibverbs_test: hang injection returned\n");
	_exit(0); /* reaching this is the failure: the parent wants SIGALRM */
}

static void case_crash_child(void)
{
	struct hca h = open_first();
	char *buf = map_pages(64 * KIB);
	setenv("MRCHECK_FAKE_IBV_INJECT", "reg_mr=crash", 1);
	alarm(5);
	g.reg_mr(h.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	printf("mrcheck: fake_ibverbs_test: crash injection returned\n");
	_exit(0);
}


/* NCCL's loader exactly (src/misc/ibvsymbols.cc): dlopen("libibverbs.so") then "libibverbs.so.1" by
 * name, so the fake is found through LD_LIBRARY_PATH; then its symbols by version. Runs in a process
 * exec'd with LD_LIBRARY_PATH set to the fake's directory (the loader reads it at startup only). */
static const char *const k_nccl_required[] = {
    "ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name", "ibv_open_device",
    "ibv_close_device",    "ibv_get_async_event",  "ibv_ack_async_event", "ibv_query_device",
    "ibv_query_port",      "ibv_query_gid",        "ibv_query_qp",        "ibv_alloc_pd",
    "ibv_dealloc_pd",      "ibv_reg_mr",           "ibv_dereg_mr",        "ibv_create_cq",
    "ibv_destroy_cq",      "ibv_create_qp",        "ibv_modify_qp",       "ibv_destroy_qp",
    "ibv_fork_init",       "ibv_event_type_str",
};

static int nccl_load_mode(const char *want_lib)
{
	g_case_failed = 0;
	void *h = dlopen("libibverbs.so", RTLD_NOW);
	if (h == NULL)
		h = dlopen("libibverbs.so.1", RTLD_NOW);
	if (h == NULL) {
		printf("mrcheck: fake_ibverbs_test: NCCL-style dlopen failed: %s\n", dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(k_nccl_required) / sizeof(k_nccl_required[0]); i++)
		if (dlvsym(h, k_nccl_required[i], "IBVERBS_1.1") == NULL)
			failf(__FILE__, __LINE__, "dlvsym(%s, IBVERBS_1.1): %s", k_nccl_required[i], dlerror());
	CHECK(dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8") != NULL);
	CHECK(dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12") != NULL);
	CHECK(dlvsym(h, "ibv_query_ece", "IBVERBS_1.10") != NULL);
	CHECK(dlvsym(h, "ibv_set_ece", "IBVERBS_1.10") != NULL);
	/* ... and it is the fake that was loaded, not the system library. */
	Dl_info info;
	void *sym = dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
	char got[4096], want[4096];
	if (sym == NULL || dladdr(sym, &info) == 0 || realpath(info.dli_fname, got) == NULL ||
	    realpath(want_lib, want) == NULL || strcmp(got, want) != 0)
		failf(__FILE__, __LINE__, "libibverbs.so resolved to %s, not %s", sym ? info.dli_fname : "?", want_lib);
	/* A real provider next to the fake must fail to load (no IBVERBS_PRIVATE_* here) rather than run;
	 * NCCL then logs "Failed to open libmlx5.so[.1]" and goes on. */
	void *mlx5 = dlopen("libmlx5.so.1", RTLD_NOW);
	if (mlx5 != NULL)
		failf(__FILE__, __LINE__, "libmlx5.so.1 loaded on top of the fake");
	else
		printf("mrcheck: fake_ibverbs_test: libmlx5.so.1 refused as expected: %s\n", dlerror());
	return g_case_failed;
}

static char g_self[4096];

static void case_ld_library_path(void)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", g_lib_path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		*slash = '\0';
	setenv("LD_LIBRARY_PATH", dir, 1);
	char *args[] = {g_self, "--nccl-load", (char *)g_lib_path, NULL};
	execv(g_self, args);
	printf("mrcheck: fake_ibverbs_test: exec %s: %s\n", g_self, strerror(errno));
	_exit(1);
}

/* ---- runner ---- */

static int run_case(const char *name, void (*fn)(void), int want_signal)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		printf("mrcheck: fake_ibverbs_test: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		reset_env();
		g_case_failed = 0;
		fn();
		fflush(stdout);
		/* _exit: no atexit handlers or leak checker in a child that changed its uid */
		_exit(g_case_failed ? 1 : 0);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	bool ok;
	if (!want_signal && WIFEXITED(st) && WEXITSTATUS(st) == SKIP_EXIT) {
		printf("mrcheck: fake_ibverbs_test: %s: SKIP\n", name);
		return 0;
	}
	if (want_signal)
		ok = WIFSIGNALED(st) && WTERMSIG(st) == want_signal;
	else
		ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (ok && want_signal) {
		/* The call got as far as the library and was logged before it hung or crashed. */
		char *log = read_log();
		const char *note = want_signal == SIGSEGV ? "note=injected-crash" : "note=injected-hang";
		ok = strstr(log, note) != NULL;
		if (!ok)
			printf("mrcheck: fake_ibverbs_test: %s: log lacks %s\n", name, note);
		free(log);
	}
	printf("mrcheck: fake_ibverbs_test: %s: %s", name, ok ? "PASS" : "FAIL");
	if (!ok) {
		if (WIFSIGNALED(st))
			printf(" (killed by signal %d)", WTERMSIG(st));
		else
			printf(" (exit %d)", WEXITSTATUS(st));
	}
	printf("\n");
	return ok ? 0 : 1;
}

#define LOAD(field, name, version)                                                                 \
	do {                                                                                       \
		*(void **)&g.field = dlvsym(g_lib, name, version);                                 \
		if (g.field == NULL) {                                                             \
			printf("mrcheck: fake_ibverbs_test: dlvsym(%s, %s): %s\n", name, version, dlerror()); \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--nccl-load") == 0)
		return nccl_load_mode(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH/TO/libibverbs.so.1\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	g_lib_path = argv[1];
	if (realpath("/proc/self/exe", g_self) == NULL) {
		printf("mrcheck: fake_ibverbs_test: /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
	g_lib = dlopen(g_lib_path, RTLD_NOW | RTLD_LOCAL);
	if (g_lib == NULL) {
		printf("mrcheck: fake_ibverbs_test: dlopen %s: %s\n", g_lib_path, dlerror());
		return 1;
	}
	LOAD(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
	LOAD(free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
	LOAD(get_device_name, "ibv_get_device_name", "IBVERBS_1.1");
	LOAD(get_device_guid, "ibv_get_device_guid", "IBVERBS_1.1");
	LOAD(open_device, "ibv_open_device", "IBVERBS_1.1");
	LOAD(close_device, "ibv_close_device", "IBVERBS_1.1");
	LOAD(get_async_event, "ibv_get_async_event", "IBVERBS_1.1");
	LOAD(ack_async_event, "ibv_ack_async_event", "IBVERBS_1.1");
	LOAD(query_device, "ibv_query_device", "IBVERBS_1.1");
	LOAD(query_port, "ibv_query_port", "IBVERBS_1.1");
	LOAD(query_gid, "ibv_query_gid", "IBVERBS_1.1");
	LOAD(query_qp, "ibv_query_qp", "IBVERBS_1.1");
	LOAD(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
	LOAD(dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1");
	LOAD(reg_mr, "ibv_reg_mr", "IBVERBS_1.1");
	LOAD(reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8");
	LOAD(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
	LOAD(dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1");
	LOAD(create_cq, "ibv_create_cq", "IBVERBS_1.1");
	LOAD(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
	LOAD(create_qp, "ibv_create_qp", "IBVERBS_1.1");
	LOAD(modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
	LOAD(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
	LOAD(fork_init, "ibv_fork_init", "IBVERBS_1.1");
	LOAD(event_type_str, "ibv_event_type_str", "IBVERBS_1.1");
	LOAD(query_ece, "ibv_query_ece", "IBVERBS_1.10");
	LOAD(set_ece, "ibv_set_ece", "IBVERBS_1.10");

	/* A call log every child (nobody included) can append to. */
	snprintf(g_log_path, sizeof(g_log_path), "/tmp/mrcheck-fake-ibv-log-XXXXXX");
	int fd = mkstemp(g_log_path);
	if (fd < 0 || fchmod(fd, 0666) != 0) {
		printf("mrcheck: fake_ibverbs_test: log file: %s\n", strerror(errno));
		return 1;
	}
	close(fd);

	int failed = 0;
	failed += run_case("symbols", case_symbols, 0);
	failed += run_case("symbols_match_real_library", case_symbols_match_real_library, 0);
	failed += run_case("nccl_loader_ld_library_path", case_ld_library_path, 0);
	failed += run_case("devices", case_devices, 0);
	failed += run_case("nccl_path", case_nccl_path, 0);
	failed += run_case("memlock_64k_4m_enomem", case_memlock_64k, 0);
	failed += run_case("memlock_zero_eperm", case_memlock_zero, 0);
	failed += run_case("memlock_8m_pass_and_double_charge", case_memlock_8m, 0);
	failed += run_case("root_cap_ipc_lock_bypass", case_root_bypass, 0);
	failed += run_case("validation", case_validation, 0);
	failed += run_case("dmabuf", case_dmabuf, 0);
	failed += run_case("injection", case_injection, 0);
	failed += run_case("injection_bad_spec", case_injection_bad_spec, 0);
	failed += run_case("log", case_log, 0);
	failed += run_case("threads", case_threads, 0);
	failed += run_case("fork_child_starts_uncharged", case_fork, 0);
	failed += run_case("hang", case_hang_child, SIGALRM);
	failed += run_case("crash", case_crash_child, SIGSEGV);
	unlink(g_log_path);
	printf("mrcheck: fake_ibverbs_test: %d case(s) failed\n", failed);
	return failed ? 1 : 0;
}
