// Experiment for the GPU-memory path (run by bench/nccl/job_nccl_run.sh on the GPU machine): export a DMA-BUF fd
// for a cuMemAlloc buffer and for a cuMem/VMM buffer (cuMemCreate with gpuDirectRDMACapable, as NCCL 2.19+
// allocates with NCCL_CUMEM_ENABLE), NCCL_BUFFSIZE (4 MiB) each. Build: g++ -I/usr/local/cuda/include ... -lcuda
#include <cuda.h>
#include <unistd.h>

#include <cstdio>

#define TRY(x)                                                       \
  do {                                                               \
    CUresult r_ = (x);                                               \
    const char* n_ = nullptr;                                        \
    cuGetErrorName(r_, &n_);                                         \
    std::printf("  %-60s %s\n", #x, r_ == CUDA_SUCCESS ? "ok" : n_); \
    if (r_ != CUDA_SUCCESS) return 1;                                \
  } while (0)

static int export_fd(CUdeviceptr p, size_t n, const char* what) {
  int fd = -1;
  CUresult r = cuMemGetHandleForAddressRange(&fd, p, n, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::printf("  %s: cuMemGetHandleForAddressRange(DMA_BUF_FD) -> %s fd=%d\n", what, r == CUDA_SUCCESS ? "ok" : name,
              fd);
  if (fd >= 0) close(fd);
  return r == CUDA_SUCCESS ? 0 : 1;
}

int main() {
  const size_t n = 4 << 20;
  CUdevice dev;
  CUcontext ctx;
  TRY(cuInit(0));
  TRY(cuDeviceGet(&dev, 0));
  int a = -1, b = -1, c = -1, d = -1;
  cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
  cuDeviceGetAttribute(&b, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev);
  cuDeviceGetAttribute(&c, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev);
  cuDeviceGetAttribute(&d, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  std::printf("  DMA_BUF_SUPPORTED %d GPU_DIRECT_RDMA_SUPPORTED %d GDR_WITH_CUDA_VMM %d VMM %d\n", a, b, c, d);
  TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
  TRY(cuCtxSetCurrent(ctx));
  CUdeviceptr p = 0;
  TRY(cuMemAlloc(&p, n));
  int bad = export_fd(p, n, "cuMemAlloc 4 MiB");
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.allocFlags.gpuDirectRDMACapable = 1;
  size_t gran = 0;
  TRY(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t sz = (n + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  TRY(cuMemCreate(&h, sz, &prop, 0));
  CUdeviceptr v = 0;
  TRY(cuMemAddressReserve(&v, sz, gran, 0, 0));
  TRY(cuMemMap(v, sz, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  TRY(cuMemSetAccess(v, sz, &acc, 1));
  std::printf("  cuMem granularity %zu, mapped %zu bytes\n", gran, sz);
  bad |= export_fd(v, sz, "cuMemCreate (VMM, gpuDirectRDMACapable) 4 MiB");
  return bad;
}
