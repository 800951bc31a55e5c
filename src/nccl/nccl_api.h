// The few CUDA driver and NCCL entry points the rank child resolves with dlsym. Declared here by hand so the
// build needs neither cuda.h nor nccl.h (CI has neither); every value below is copied from those headers and
// is part of their stable ABI.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrcheck::detail {

// --- CUDA driver API (cuda.h, CUDA 11-13) ---
using cu_result = int;                   // CUresult
using cu_device = int;                   // CUdevice
using cu_context = struct cu_ctx_st*;    // CUcontext (opaque)
using cu_stream = struct cu_stream_st*;  // CUstream == cudaStream_t (opaque)
using cu_devptr = unsigned long long;    // CUdeviceptr (64-bit)

inline constexpr cu_result k_cuda_success = 0;                     // CUDA_SUCCESS
inline constexpr cu_result k_cuda_error_insufficient_driver = 35;  // CUDA_ERROR_INSUFFICIENT_DRIVER
inline constexpr cu_result k_cuda_error_no_device = 100;           // CUDA_ERROR_NO_DEVICE
inline constexpr cu_result k_cuda_error_invalid_device = 101;      // CUDA_ERROR_INVALID_DEVICE

// cuda.h maps cuMemAlloc -> cuMemAlloc_v2 etc. with #defines; dlsym needs the real (_v2) names.
struct cuda_api {
  cu_result (*init)(unsigned int) = nullptr;                                // cuInit
  cu_result (*driver_get_version)(int*) = nullptr;                          // cuDriverGetVersion
  cu_result (*device_get_count)(int*) = nullptr;                            // cuDeviceGetCount
  cu_result (*device_get)(cu_device*, int) = nullptr;                       // cuDeviceGet
  cu_result (*device_get_pci_bus_id)(char*, int, cu_device) = nullptr;      // cuDeviceGetPCIBusId
  cu_result (*primary_ctx_retain)(cu_context*, cu_device) = nullptr;        // cuDevicePrimaryCtxRetain
  cu_result (*primary_ctx_release)(cu_device) = nullptr;                    // cuDevicePrimaryCtxRelease_v2
  cu_result (*ctx_set_current)(cu_context) = nullptr;                       // cuCtxSetCurrent
  cu_result (*mem_alloc)(cu_devptr*, std::size_t) = nullptr;                // cuMemAlloc_v2
  cu_result (*mem_free)(cu_devptr) = nullptr;                               // cuMemFree_v2
  cu_result (*memcpy_htod)(cu_devptr, const void*, std::size_t) = nullptr;  // cuMemcpyHtoD_v2
  cu_result (*memcpy_dtoh)(void*, cu_devptr, std::size_t) = nullptr;        // cuMemcpyDtoH_v2
  cu_result (*stream_create)(cu_stream*, unsigned int) = nullptr;           // cuStreamCreate
  cu_result (*stream_synchronize)(cu_stream) = nullptr;                     // cuStreamSynchronize
  cu_result (*stream_destroy)(cu_stream) = nullptr;                         // cuStreamDestroy_v2
  cu_result (*get_error_string)(cu_result, const char**) = nullptr;         // cuGetErrorString
};
inline constexpr unsigned int k_cu_stream_non_blocking = 0x1;  // CU_STREAM_NON_BLOCKING

// --- NCCL (nccl.h, 2.x) ---
using nccl_result = int;  // ncclResult_t: 0 ncclSuccess, 1 ncclUnhandledCudaError, 2 ncclSystemError,
                          // 3 ncclInternalError, 4 ncclInvalidArgument, 5 ncclInvalidUsage, 6 ncclRemoteError,
                          // 7 ncclInProgress
using nccl_comm = struct nccl_comm_st*;                     // ncclComm_t (opaque)
inline constexpr std::size_t k_nccl_unique_id_bytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct nccl_unique_id {
  char internal[k_nccl_unique_id_bytes];  // ncclUniqueId, passed by value to ncclCommInitRank
};
inline constexpr int k_nccl_float32 = 7;  // ncclFloat32 == ncclFloat (ncclDataType_t)
inline constexpr int k_nccl_sum = 0;      // ncclSum (ncclRedOp_t)

struct nccl_api {
  nccl_result (*get_version)(int*) = nullptr;                                     // ncclGetVersion
  nccl_result (*get_unique_id)(nccl_unique_id*) = nullptr;                        // ncclGetUniqueId
  nccl_result (*comm_init_rank)(nccl_comm*, int, nccl_unique_id, int) = nullptr;  // ncclCommInitRank
  nccl_result (*all_reduce)(const void*, void*, std::size_t, int, int, nccl_comm,
                            cu_stream) = nullptr;          // ncclAllReduce
  nccl_result (*comm_destroy)(nccl_comm) = nullptr;        // ncclCommDestroy
  nccl_result (*comm_abort)(nccl_comm) = nullptr;          // ncclCommAbort
  const char* (*get_error_string)(nccl_result) = nullptr;  // ncclGetErrorString
  const char* (*get_last_error)(nccl_comm) = nullptr;      // ncclGetLastError (2.13+, optional, like nccl-tests)
};

}  // namespace mrcheck::detail
