/* fake_ibverbs_gpu_check.c - the fake libibverbs against real GPU memory (GPU machine only).
 *
 * Checks that the fake answers like a kernel without a peer-memory client and with DMA-BUF support:
 *  - a cudaMalloc pointer through ibv_reg_mr_iova2 -> EFAULT (the pages are not host pages), or
 *    EPERM under a zero memlock limit, which the kernel checks first;
 *  - pinned host memory from cudaMallocHost -> registers (charged like any host memory);
 *  - a real DMA-BUF fd from cuMemGetHandleForAddressRange -> ibv_reg_dmabuf_mr succeeds, without a
 *    memlock charge; a range beyond the dma-buf's size -> EINVAL.
 * Prints what the CPU sees of the cudaMalloc range (/proc/self/maps) and of the dma-buf fd.
 *
 * Usage: fake_ibverbs_gpu_check PATH/TO/libibverbs.so.1     Exit 0 pass, 1 fail, 77 no GPU/DMA-BUF.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime.h>
#include <infiniband/verbs.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define NCCL_FLAGS                                                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING)

static int g_fail;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("mrcheck: fake_ibverbs_gpu_check: FAIL line %d: %s: ", __LINE__, #cond); \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			g_fail = 1;                                                                \
		}                                                                                  \
	} while (0)

static void show_mapping(uintptr_t p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= p && p < hi)
			printf("mrcheck: fake_ibverbs_gpu_check: cudaMalloc %#lx lies in: %s", (unsigned long)p, line);
	}
	if (f)
		fclose(f);
}

static void show_fd(int fd)
{
	char path[64], target[256] = {0}, line[256];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	printf("mrcheck: fake_ibverbs_gpu_check: dma-buf fd %d -> %s\n", fd, n > 0 ? target : "?");
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "size:", 5) || !strncmp(line, "exp_name:", 9))
			printf("mrcheck: fake_ibverbs_gpu_check:   fdinfo %s", line);
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2)
		return 2;
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("mrcheck: fake_ibverbs_gpu_check: dlopen: %s\n", dlerror());
		return 1;
	}
	struct ibv_device **(*get_list)(int *) = dlvsym(lib, "ibv_get_device_list", "IBVERBS_1.1");
	struct ibv_context *(*open_dev)(struct ibv_device *) = dlvsym(lib, "ibv_open_device", "IBVERBS_1.1");
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) = dlvsym(lib, "ibv_alloc_pd", "IBVERBS_1.1");
	struct ibv_mr *(*reg_iova2)(struct ibv_pd *, void *, size_t, uint64_t, unsigned) =
	    dlvsym(lib, "ibv_reg_mr_iova2", "IBVERBS_1.8");
	struct ibv_mr *(*reg_dmabuf)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int) =
	    dlvsym(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
	int (*dereg)(struct ibv_mr *) = dlvsym(lib, "ibv_dereg_mr", "IBVERBS_1.1");
	if (!get_list || !open_dev || !alloc_pd || !reg_iova2 || !reg_dmabuf || !dereg)
		return 1;

	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		printf("mrcheck: fake_ibverbs_gpu_check: skip: no GPU\n");
		return 77;
	}
	cudaSetDevice(0);
	int n = 0;
	struct ibv_device **l = get_list(&n);
	struct ibv_context *ctx = n > 0 ? open_dev(l[0]) : NULL;
	struct ibv_pd *pd = ctx ? alloc_pd(ctx) : NULL;
	if (!pd)
		return 1;
	struct rlimit rl;
	getrlimit(RLIMIT_MEMLOCK, &rl);
	printf("mrcheck: fake_ibverbs_gpu_check: uid %d, soft memlock %lld\n", (int)getuid(),
	       rl.rlim_cur == RLIM_INFINITY ? -1LL : (long long)rl.rlim_cur);

	/* 1. device memory through the host path: EFAULT, as without nvidia_peermem */
	void *d = NULL;
	CHECK(cudaMalloc(&d, 64 * MIB) == cudaSuccess, "cudaMalloc");
	show_mapping((uintptr_t)d);
	errno = 0;
	struct ibv_mr *mr = reg_iova2(pd, d, 2 * MIB, (uintptr_t)d, NCCL_FLAGS);
	int e = errno;
	printf("mrcheck: fake_ibverbs_gpu_check: reg_mr_iova2(cudaMalloc) -> %s\n", mr ? "ok" : strerror(e));
	/* ib_umem_get() says EPERM for a zero limit before it ever looks at the pages. */
	int want = (rl.rlim_cur == 0 && getuid() != 0) ? EPERM : EFAULT;
	CHECK(mr == NULL && e == want, "got %s, want %s", mr ? "an MR" : strerror(e), strerror(want));
	if (mr)
		dereg(mr);

	/* 2. pinned host memory: normal host pages */
	void *h = NULL;
	CHECK(cudaMallocHost(&h, 2 * MIB) == cudaSuccess, "cudaMallocHost");
	errno = 0;
	mr = h ? reg_iova2(pd, h, 2 * MIB, (uintptr_t)h, NCCL_FLAGS) : NULL;
	e = errno;
	printf("mrcheck: fake_ibverbs_gpu_check: reg_mr_iova2(cudaMallocHost 2 MiB) -> %s\n", mr ? "ok" : strerror(e));
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 2 * MIB)
		CHECK(mr != NULL, "%s", strerror(e));
	if (mr)
		CHECK(dereg(mr) == 0, "dereg");

	/* 3. a real DMA-BUF of the device memory */
	CUdevice dev;
	int dmabuf_ok = 0;
	cuDeviceGet(&dev, 0);
	cuDeviceGetAttribute(&dmabuf_ok, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
	if (!dmabuf_ok) {
		printf("mrcheck: fake_ibverbs_gpu_check: skip dma-buf: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0\n");
		return g_fail ? 1 : 77;
	}
	int fd = -1;
	CUresult cr = cuMemGetHandleForAddressRange(&fd, (CUdeviceptr)(uintptr_t)d, 2 * MIB,
						    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	CHECK(cr == CUDA_SUCCESS && fd >= 0, "cuMemGetHandleForAddressRange: %d", (int)cr);
	if (fd >= 0) {
		show_fd(fd);
		errno = 0;
		mr = reg_dmabuf(pd, 0, 2 * MIB, (uintptr_t)d, fd, NCCL_FLAGS);
		e = errno;
		printf("mrcheck: fake_ibverbs_gpu_check: reg_dmabuf_mr(2 MiB of a 2 MiB dma-buf) -> %s\n",
		       mr ? "ok" : strerror(e));
		CHECK(mr != NULL, "%s", strerror(e));
		if (mr)
			CHECK(dereg(mr) == 0, "dereg");
		errno = 0;
		mr = reg_dmabuf(pd, 0, 4 * MIB, (uintptr_t)d, fd, NCCL_FLAGS);
		e = errno;
		printf("mrcheck: fake_ibverbs_gpu_check: reg_dmabuf_mr(4 MiB of a 2 MiB dma-buf) -> %s\n",
		       mr ? "ok" : strerror(e));
		CHECK(mr == NULL && e == EINVAL, "%s", mr ? "an MR" : strerror(e));
		close(fd);
	}
	printf("mrcheck: fake_ibverbs_gpu_check: %s\n", g_fail ? "FAIL" : "PASS");
	return g_fail;
}
