// GPU memory for the mr_gpu check through the CUDA driver API, loaded with dlopen: mrcheck never links CUDA (a
// node without a GPU must run every other check) and the driver API needs no CUDA runtime in the job's
// environment. <cuda.h> is used for types only; the versioned entry points (cuMemAlloc_v2, ...) are the ones
// the header's macros name.
#include <mrcheck/build_config.h>
#include <mrcheck/mr_probe.h>

#include <fmt/format.h>

#include <dlfcn.h>

#if MRCHECK_HAVE_CUDA_HEADERS
#include <cuda.h>
#endif

namespace mrcheck {

#if MRCHECK_HAVE_CUDA_HEADERS

namespace {

// Fabric handles came with CUDA 12.3; an older cuda.h lacks their names, so their values (docs/facts/mnnvl.md §5).
#if CUDA_VERSION >= 12030
constexpr CUmemAllocationHandleType k_handle_type_fabric = CU_MEM_HANDLE_TYPE_FABRIC;
constexpr CUdevice_attribute k_attr_fabric = CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED;
using fabric_handle = CUmemFabricHandle;
#else
constexpr auto k_handle_type_fabric = static_cast<CUmemAllocationHandleType>(0x8);
constexpr auto k_attr_fabric = static_cast<CUdevice_attribute>(128);
struct fabric_handle {
  unsigned char data[64];
};
#endif
static_assert(sizeof(fabric_handle) == 64, "CUmemFabricHandle is 64 bytes (CU_IPC_HANDLE_SIZE)");
static_assert(CUDA_ERROR_NOT_PERMITTED == k_cuda_error_not_permitted &&
              CUDA_ERROR_NOT_SUPPORTED == k_cuda_error_not_supported);

struct cuda_api {
  void* handle = nullptr;
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*device_get_pci_bus_id)(char*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*get_handle_for_address_range)(void*, CUdeviceptr, size_t, CUmemRangeHandleType,
                                           unsigned long long) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  // CUDA VMM (optional: a driver without them still runs the cuMemAlloc half of mr_gpu).
  CUresult (*mem_create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                         unsigned long long) = nullptr;
  CUresult (*mem_release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*mem_get_granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*mem_address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*mem_address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*mem_unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  // Fabric handles (optional: only the mnnvl_handle check uses them).
  CUresult (*mem_export)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long) = nullptr;
  CUresult (*mem_import)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;

  bool has_vmm() const {
    return mem_create != nullptr && mem_release != nullptr && mem_get_granularity != nullptr &&
           mem_address_reserve != nullptr && mem_address_free != nullptr && mem_map != nullptr &&
           mem_unmap != nullptr && mem_set_access != nullptr;
  }

  std::string err(CUresult r) const {
    const char* name = nullptr;
    if (get_error_name != nullptr && get_error_name(r, &name) == CUDA_SUCCESS && name != nullptr) return name;
    return fmt::format("CUresult {}", static_cast<int>(r));
  }
};

class cuda_gpu final : public gpu_memory {
 public:
  // The primary context was retained and made current by the caller; it stays current on this thread and is
  // released with the device in the destructor, so it needs no member of its own.
  cuda_gpu(cuda_api api, CUdevice dev, int ordinal, CUcontext /*current*/) : api_(api), dev_(dev), ordinal_(ordinal) {
    char bus[32] = {};
    if (api_.device_get_pci_bus_id(bus, sizeof bus, dev_) == CUDA_SUCCESS) {
      bdf_ = bus;
      for (auto& c : bdf_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    api_.driver_get_version(&driver_);
    int v = 0;
    if (api_.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev_) == CUDA_SUCCESS) dmabuf_ = v != 0;
    v = 0;
    if (api_.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev_) == CUDA_SUCCESS)
      gdr_ = v != 0;
    v = 0;
    if (api_.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_) == CUDA_SUCCESS)
      vmm_ = v != 0 && api_.has_vmm();
    v = 0;
    if (api_.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev_) ==
        CUDA_SUCCESS)
      vmm_gdr_ = v != 0;
    v = 0;
    // NCCL ignores an error here too: an older driver does not know the attribute ([NCCL@v2.27.3-1] src/mnnvl.cc).
    if (api_.device_get_attribute(&v, k_attr_fabric, dev_) == CUDA_SUCCESS) fabric_ = v != 0;
  }
  ~cuda_gpu() override {
    api_.primary_ctx_release(dev_);
    // libcuda stays loaded: unloading the driver library with live threads is unsafe.
  }

  int device() const override { return ordinal_; }
  std::string pci_bdf() const override { return bdf_; }
  int driver_version() const override { return driver_; }
  bool dmabuf_supported() const override { return dmabuf_; }
  bool gdr_supported() const override { return gdr_; }

  result<std::uint64_t> alloc(std::size_t bytes) override {
    CUdeviceptr p = 0;
    CUresult r = api_.mem_alloc(&p, bytes);
    if (r != CUDA_SUCCESS) return status::error(fmt::format("cuMemAlloc {} bytes: {}", bytes, api_.err(r)));
    return static_cast<std::uint64_t>(p);
  }

  result<int> dmabuf_fd(std::uint64_t ptr, std::size_t bytes) override {
    if (api_.get_handle_for_address_range == nullptr) {
      return status::error("cuMemGetHandleForAddressRange: not exported by this libcuda (driver older than CUDA 11.7)");
    }
    int fd = -1;
    // flags 0: NCCL passes CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE only for its PCI-GDR mode
    // ([N] src/transport/net.cc getHandleForAddressRangeFlags).
    CUresult r = api_.get_handle_for_address_range(&fd, static_cast<CUdeviceptr>(ptr), bytes,
                                                   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) return status::error(fmt::format("cuMemGetHandleForAddressRange: {}", api_.err(r)));
    return fd;
  }

  void free(std::uint64_t ptr) override { api_.mem_free(static_cast<CUdeviceptr>(ptr)); }

  bool vmm_supported() const override { return vmm_; }
  bool vmm_gdr_supported() const override { return vmm_gdr_; }

  // NCCL's ncclCuMemAlloc (src/include/alloc.h): pinned device memory with a POSIX fd handle type and
  // gpuDirectRDMACapable when the device supports GDR on VMM memory, the size rounded to the minimum granularity,
  // mapped read-write for this device.
  result<std::uint64_t> alloc_vmm(std::size_t bytes) override {
    if (!vmm_) return status::error("CUDA VMM not supported by this device or driver");
    CUmemAllocationProp prop = pinned_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    size_t gran = 0;
    CUresult r = api_.mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS || gran == 0)
      return status::error(fmt::format("cuMemGetAllocationGranularity: {}", api_.err(r)));
    std::size_t size = (bytes + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle handle = 0;
    r = api_.mem_create(&handle, size, &prop, 0);
    if (r != CUDA_SUCCESS) return status::error(fmt::format("cuMemCreate {} bytes: {}", size, api_.err(r)));
    CUdeviceptr va = 0;
    r = api_.mem_address_reserve(&va, size, gran, 0, 0);
    if (r != CUDA_SUCCESS) {
      api_.mem_release(handle);
      return status::error(fmt::format("cuMemAddressReserve: {}", api_.err(r)));
    }
    r = api_.mem_map(va, size, 0, handle, 0);
    if (r != CUDA_SUCCESS) {
      api_.mem_address_free(va, size);
      api_.mem_release(handle);
      return status::error(fmt::format("cuMemMap: {}", api_.err(r)));
    }
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = static_cast<int>(dev_);
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = api_.mem_set_access(va, size, &access, 1);
    vmm_ptr_ = static_cast<std::uint64_t>(va);
    vmm_size_ = size;
    vmm_handle_ = handle;
    if (r != CUDA_SUCCESS) {
      free_vmm(vmm_ptr_);
      return status::error(fmt::format("cuMemSetAccess: {}", api_.err(r)));
    }
    return vmm_ptr_;
  }

  bool fabric_handle_supported() const override { return fabric_; }
  fabric_handle_attempt try_fabric_handle(std::size_t bytes) override;

  void free_vmm(std::uint64_t ptr) override {
    if (ptr == 0 || ptr != vmm_ptr_) return;
    api_.mem_unmap(static_cast<CUdeviceptr>(ptr), vmm_size_);
    api_.mem_address_free(static_cast<CUdeviceptr>(ptr), vmm_size_);
    api_.mem_release(vmm_handle_);
    vmm_ptr_ = 0;
  }

 private:
  // Pinned memory on this device, shareable as `handles`, GPUDirect RDMA capable where the device allows it on VMM
  // memory: what NCCL's ncclCuMemAlloc asks for, with the POSIX fd handle (VMM) or the fabric handle (MNNVL).
  CUmemAllocationProp pinned_prop(CUmemAllocationHandleType handles) const {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<int>(dev_);
    prop.requestedHandleTypes = handles;
    prop.allocFlags.gpuDirectRDMACapable = vmm_gdr_ ? 1 : 0;
    return prop;
  }

  cuda_api api_;
  CUdevice dev_;
  int ordinal_;
  std::string bdf_;
  int driver_ = 0;
  bool dmabuf_ = false;
  bool gdr_ = false;
  bool vmm_ = false;
  bool vmm_gdr_ = false;
  bool fabric_ = false;
  // The one VMM buffer the probe holds at a time.
  std::uint64_t vmm_ptr_ = 0;
  std::size_t vmm_size_ = 0;
  CUmemGenericAllocationHandle vmm_handle_ = 0;
};

// NCCL's ncclCuMemAlloc with CU_MEM_HANDLE_TYPE_FABRIC ([NCCL@v2.27.3-1] src/include/alloc.h), then the export and
// import of src/mnnvl.cc. Not mapped: what IMEX decides is the handle; mapping is the VMM path mr_gpu tests.
fabric_handle_attempt cuda_gpu::try_fabric_handle(std::size_t bytes) {
  fabric_handle_attempt a;
  a.attempted = true;
  auto failed = [&](const char* call, CUresult r) {
    a.call = call;
    a.cu_error = static_cast<int>(r);
    a.error_name = api_.err(r);
    return a;
  };
  if (api_.mem_create == nullptr || api_.mem_release == nullptr || api_.mem_get_granularity == nullptr ||
      api_.mem_export == nullptr || api_.mem_import == nullptr) {
    return failed("cuMemExportToShareableHandle", CUDA_ERROR_NOT_SUPPORTED);
  }
  CUmemAllocationProp prop = pinned_prop(k_handle_type_fabric);
  size_t gran = 0;
  CUresult r = api_.mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || gran == 0) return failed("cuMemGetAllocationGranularity", r);
  a.bytes = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle handle = 0;
  r = api_.mem_create(&handle, a.bytes, &prop, 0);
  if (r != CUDA_SUCCESS) return failed("cuMemCreate", r);
  fabric_handle shared = {};
  r = api_.mem_export(&shared, handle, k_handle_type_fabric, 0);
  if (r == CUDA_SUCCESS) {
    CUmemGenericAllocationHandle imported = 0;
    r = api_.mem_import(&imported, &shared, k_handle_type_fabric);
    if (r == CUDA_SUCCESS) {
      api_.mem_release(imported);
    } else {
      failed("cuMemImportFromShareableHandle", r);
    }
  } else {
    failed("cuMemExportToShareableHandle", r);
  }
  api_.mem_release(handle);
  a.ok = r == CUDA_SUCCESS;
  return a;
}

template <class F>
bool sym(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}

}  // namespace

result<std::unique_ptr<gpu_memory>> open_cuda_gpu(bool& skip, const std::string& library) {
  skip = true;
  dlerror();
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return status::error(fmt::format("no NVIDIA driver library: {}", e != nullptr ? e : library + " not found"));
  }
  cuda_api a;
  a.handle = h;
  bool ok = sym(h, a.init, "cuInit") && sym(h, a.driver_get_version, "cuDriverGetVersion") &&
            sym(h, a.device_get_count, "cuDeviceGetCount") && sym(h, a.device_get, "cuDeviceGet") &&
            sym(h, a.device_get_attribute, "cuDeviceGetAttribute") &&
            sym(h, a.device_get_pci_bus_id, "cuDeviceGetPCIBusId") &&
            sym(h, a.primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
            sym(h, a.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2") &&
            sym(h, a.ctx_set_current, "cuCtxSetCurrent") && sym(h, a.mem_alloc, "cuMemAlloc_v2") &&
            sym(h, a.mem_free, "cuMemFree_v2");
  if (!ok) {
    skip = false;
    return status::error("libcuda.so.1 lacks a driver API entry point mrcheck needs (driver too old?)");
  }
  sym(h, a.get_handle_for_address_range, "cuMemGetHandleForAddressRange");
  sym(h, a.get_error_name, "cuGetErrorName");
  sym(h, a.mem_create, "cuMemCreate");
  sym(h, a.mem_release, "cuMemRelease");
  sym(h, a.mem_get_granularity, "cuMemGetAllocationGranularity");
  sym(h, a.mem_address_reserve, "cuMemAddressReserve");
  sym(h, a.mem_address_free, "cuMemAddressFree");
  sym(h, a.mem_map, "cuMemMap");
  sym(h, a.mem_unmap, "cuMemUnmap");
  sym(h, a.mem_set_access, "cuMemSetAccess");
  sym(h, a.mem_export, "cuMemExportToShareableHandle");
  sym(h, a.mem_import, "cuMemImportFromShareableHandle");

  CUresult r = a.init(0);
  if (r == CUDA_ERROR_NO_DEVICE) return status::error("no GPU visible (cuInit: CUDA_ERROR_NO_DEVICE)");
  if (r != CUDA_SUCCESS) {
    skip = false;
    return status::error(fmt::format("cuInit: {}", a.err(r)));
  }
  int count = 0;
  r = a.device_get_count(&count);
  if (r != CUDA_SUCCESS || count == 0) return status::error("no GPU visible to this task (cuDeviceGetCount: 0)");
  CUdevice dev = 0;
  r = a.device_get(&dev, 0);
  if (r != CUDA_SUCCESS) {
    skip = false;
    return status::error(fmt::format("cuDeviceGet 0: {}", a.err(r)));
  }
  CUcontext ctx = nullptr;
  r = a.primary_ctx_retain(&ctx, dev);
  if (r != CUDA_SUCCESS) {
    skip = false;
    return status::error(fmt::format("cuDevicePrimaryCtxRetain: {}", a.err(r)));
  }
  r = a.ctx_set_current(ctx);
  if (r != CUDA_SUCCESS) {
    a.primary_ctx_release(dev);
    skip = false;
    return status::error(fmt::format("cuCtxSetCurrent: {}", a.err(r)));
  }
  skip = false;
  return std::unique_ptr<gpu_memory>(new cuda_gpu(a, dev, 0, ctx));
}

#else  // !MRCHECK_HAVE_CUDA_HEADERS

result<std::unique_ptr<gpu_memory>> open_cuda_gpu(bool& skip, const std::string& /*library*/) {
  skip = true;
  return status::error("built without CUDA headers (cuda.h); rebuild with the CUDA toolkit headers for mr_gpu");
}

#endif

}  // namespace mrcheck
