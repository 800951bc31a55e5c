// A rank of the NCCL pair probe, inside its own child process: the only code of mrcheck that loads CUDA and
// NCCL. It follows the minimal 2-rank flow of docs/facts/nccl-test-harness.md §2 (ncclGetUniqueId on rank 0, the id
// through the orchestrator, ncclCommInitRank, ncclAllReduce, check, ncclCommDestroy) and reports each stage on the
// control pipe, so that a hang or a crash can still be placed ("rank 1 stopped in ncclCommInitRank").
#include <mrcheck/nccl_probe.h>

#include "nccl/nccl_api.h"
#include "nccl/rank_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace mrcheck {

namespace {

using clock = std::chrono::steady_clock;
using detail::cu_result;

template <class F>
bool resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  return fn != nullptr;
}

class rank_run {
 public:
  explicit rank_run(const nccl_rank_args& a) : a_(a), ctl_(a.ctl_fd) {
    r_.rank = a.rank;
    r_.count = a.count;
    r_.nccl_library = a.nccl_library.empty() ? "libnccl.so.2" : a.nccl_library;
  }

  int run() {
    if (!load()) return finish(4);
    if (a_.rank == 0 && !make_id()) return finish(3);
    if (!cuda_setup()) return finish(r_.no_gpu ? 4 : 3);
    if (a_.rank != 0 && !receive_id()) return finish(3);
    if (!init_comm()) return finish(3);
    if (!all_reduce()) return finish(3);
    bool right = verify();
    if (right && a_.release_fd >= 0) {
      // Verified: say so, wait for the peer's verification (the orchestrator's "go"), and leave without
      // ncclCommDestroy. Nothing is in flight any more once both ranks hold their sums; the kernel frees the
      // communicator's memory, sockets and the CUDA context with the process.
      stage("done");
      r_.ok = true;
      finish(0);
      std::string go;
      (void)detail::read_line(a_.release_fd, go, 16);
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(0);
    }
    if (!destroy()) return finish(3);
    stage("done");
    r_.ok = right;
    return finish(right ? 0 : 1);
  }

 private:
  void stage(std::string_view s) {
    auto now = clock::now();
    if (!r_.stage.empty()) {
      r_.phases_ms.emplace_back(r_.stage, std::chrono::duration<double, std::milli>(now - phase_start_).count());
    }
    phase_start_ = now;
    r_.stage = std::string(s);
    ctl_.line(fmt::format("stage {}", s));
  }

  int finish(int code) {
    nlohmann::json j = r_;
    ctl_.line("result " + j.dump());
    return code;
  }

  std::string cuda_error(std::string_view call, cu_result rc) {
    const char* text = nullptr;
    if (cuda_.get_error_string) cuda_.get_error_string(rc, &text);
    return fmt::format("{}: {} ({})", call, text ? text : "unknown CUDA error", rc);
  }

  bool nccl_failed(std::string_view call, detail::nccl_result rc) {
    if (rc == 0) return false;
    r_.nccl_result = rc;
    const char* text = nccl_.get_error_string ? nccl_.get_error_string(rc) : nullptr;
    r_.error = fmt::format("{}: {} ({})", call, text ? text : "unknown NCCL error", rc);
    if (nccl_.get_last_error) {
      const char* last = nccl_.get_last_error(comm_);
      if (last && *last) r_.nccl_last_error = last;
    }
    return true;
  }

  bool load() {
    stage("load");
    // NCCL first, and its version at once: the library is the job's (a wheel, a venv), and one that is broken or
    // crashes in ncclGetVersion is then placed in "load" with its version call, with or without a GPU here.
    // RTLD_LOCAL: nothing of CUDA or NCCL leaks into symbol lookup of anything else this process loads.
    void* nccl = ::dlopen(r_.nccl_library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!nccl) {
      r_.missing_library = true;
      std::string nccl_error = ::dlerror();
      // Without CUDA as well, that is the first thing to say (a node without the driver).
      if (::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
        r_.error = fmt::format("dlopen libcuda.so.1: {}; dlopen {}: {}", ::dlerror(), r_.nccl_library, nccl_error);
      } else {
        r_.error = fmt::format("dlopen {}: {}", r_.nccl_library, nccl_error);
      }
      return false;
    }
    if (!resolve(nccl, "ncclGetVersion", nccl_.get_version)) {
      r_.error = fmt::format("{} lacks ncclGetVersion: not an NCCL library", r_.nccl_library);
      return false;
    }
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(nccl_.get_version), &info) != 0 && info.dli_fname)
      r_.nccl_library = info.dli_fname;
    nccl_.get_version(&r_.nccl_version);
    bool all = resolve(nccl, "ncclGetUniqueId", nccl_.get_unique_id) &&
               resolve(nccl, "ncclCommInitRank", nccl_.comm_init_rank) &&
               resolve(nccl, "ncclAllReduce", nccl_.all_reduce) &&
               resolve(nccl, "ncclCommDestroy", nccl_.comm_destroy) &&
               resolve(nccl, "ncclCommAbort", nccl_.comm_abort) &&
               resolve(nccl, "ncclGetErrorString", nccl_.get_error_string);
    if (!all) {
      r_.error = fmt::format("{} lacks an NCCL 2.x entry point", r_.nccl_library);
      return false;
    }
    resolve(nccl, "ncclGetLastError", nccl_.get_last_error);  // optional (2.13+)
    void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda) {
      r_.missing_library = true;
      r_.error = fmt::format("dlopen libcuda.so.1: {}", ::dlerror());
      return false;
    }
    all = resolve(cuda, "cuInit", cuda_.init) && resolve(cuda, "cuDriverGetVersion", cuda_.driver_get_version) &&
          resolve(cuda, "cuDeviceGetCount", cuda_.device_get_count) && resolve(cuda, "cuDeviceGet", cuda_.device_get) &&
          resolve(cuda, "cuDeviceGetPCIBusId", cuda_.device_get_pci_bus_id) &&
          resolve(cuda, "cuDevicePrimaryCtxRetain", cuda_.primary_ctx_retain) &&
          resolve(cuda, "cuDevicePrimaryCtxRelease_v2", cuda_.primary_ctx_release) &&
          resolve(cuda, "cuCtxSetCurrent", cuda_.ctx_set_current) && resolve(cuda, "cuMemAlloc_v2", cuda_.mem_alloc) &&
          resolve(cuda, "cuMemFree_v2", cuda_.mem_free) && resolve(cuda, "cuMemcpyHtoD_v2", cuda_.memcpy_htod) &&
          resolve(cuda, "cuMemcpyDtoH_v2", cuda_.memcpy_dtoh) && resolve(cuda, "cuStreamCreate", cuda_.stream_create) &&
          resolve(cuda, "cuStreamSynchronize", cuda_.stream_synchronize) &&
          resolve(cuda, "cuStreamDestroy_v2", cuda_.stream_destroy) &&
          resolve(cuda, "cuGetErrorString", cuda_.get_error_string);
    if (!all) {
      r_.error = "libcuda.so.1 lacks a CUDA 11+ driver API entry point (driver too old?)";
      return false;
    }
    cuda_.driver_get_version(&r_.cuda_driver_version);
    return true;
  }

  // Before CUDA is touched, so rank 1 gets the id while both ranks initialise CUDA in parallel.
  bool make_id() {
    stage("id");
    if (nccl_failed("ncclGetUniqueId", nccl_.get_unique_id(&id_))) return false;
    ctl_.line("id " + hex_encode(reinterpret_cast<const unsigned char*>(id_.internal), sizeof id_.internal));
    return true;
  }

  bool receive_id() {
    stage("id");
    std::string line;
    if (!detail::read_line(a_.id_fd, line, 4096) || !line.starts_with("id ") ||
        !hex_decode(std::string_view(line).substr(3), reinterpret_cast<unsigned char*>(id_.internal),
                    sizeof id_.internal)) {
      r_.error = "no NCCL unique id from rank 0 (it failed or stopped before ncclGetUniqueId returned)";
      return false;
    }
    return true;
  }

  bool cuda_setup() {
    stage("cuda");
    cu_result rc = cuda_.init(0);
    if (rc == detail::k_cuda_error_no_device) {
      r_.no_gpu = true;
      r_.error = cuda_error("cuInit", rc);
      return false;
    }
    if (rc != detail::k_cuda_success) {
      r_.error = cuda_error("cuInit", rc);
      return false;
    }
    int count = 0;
    if ((rc = cuda_.device_get_count(&count)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuDeviceGetCount", rc);
      return false;
    }
    if (a_.device >= count) {
      r_.no_gpu = true;
      r_.error = fmt::format("rank {} needs GPU {} but CUDA sees {} GPU(s)", a_.rank, a_.device, count);
      return false;
    }
    if ((rc = cuda_.device_get(&dev_, a_.device)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuDeviceGet", rc);
      return false;
    }
    char bus[32] = {};
    if (cuda_.device_get_pci_bus_id(bus, sizeof bus, dev_) == detail::k_cuda_success) r_.device = bus;
    // The primary context is the one the CUDA runtime inside NCCL picks up, as cudaSetDevice would.
    if ((rc = cuda_.primary_ctx_retain(&ctx_, dev_)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuDevicePrimaryCtxRetain", rc);
      return false;
    }
    if ((rc = cuda_.ctx_set_current(ctx_)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuCtxSetCurrent", rc);
      return false;
    }
    std::size_t bytes = a_.count * sizeof(float);
    if ((rc = cuda_.mem_alloc(&send_, bytes)) != detail::k_cuda_success ||
        (rc = cuda_.mem_alloc(&recv_, bytes)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuMemAlloc", rc);
      return false;
    }
    std::vector<float> host(a_.count, static_cast<float>(a_.rank + 1));
    if ((rc = cuda_.memcpy_htod(send_, host.data(), bytes)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuMemcpyHtoD", rc);
      return false;
    }
    if ((rc = cuda_.stream_create(&stream_, detail::k_cu_stream_non_blocking)) != detail::k_cuda_success) {
      r_.error = cuda_error("cuStreamCreate", rc);
      return false;
    }
    return true;
  }

  bool init_comm() {
    stage("init");
    detail::nccl_result rc = nccl_.comm_init_rank(&comm_, a_.nranks, id_, a_.rank);
    if (nccl_failed("ncclCommInitRank", rc)) {
      // A half-built communicator still owns proxy threads and sockets; abort frees them without waiting on the peer.
      if (comm_) nccl_.comm_abort(comm_);
      comm_ = nullptr;
      return false;
    }
    return true;
  }

  bool all_reduce() {
    stage("allreduce");
    if (nccl_failed("ncclAllReduce",
                    nccl_.all_reduce(reinterpret_cast<const void*>(send_), reinterpret_cast<void*>(recv_), a_.count,
                                     detail::k_nccl_float32, detail::k_nccl_sum, comm_, stream_))) {
      nccl_.comm_abort(comm_);
      return false;
    }
    cu_result rc = cuda_.stream_synchronize(stream_);
    if (rc != detail::k_cuda_success) {
      r_.error = cuda_error("cuStreamSynchronize after ncclAllReduce", rc);
      nccl_.comm_abort(comm_);
      return false;
    }
    return true;
  }

  bool verify() {
    stage("verify");
    std::vector<float> host(a_.count, 0.0f);
    cu_result rc = cuda_.memcpy_dtoh(host.data(), recv_, a_.count * sizeof(float));
    r_.expected = a_.nranks * (a_.nranks + 1) / 2.0;  // rank r contributes r+1: 1+2 = 3
    if (rc != detail::k_cuda_success) {
      r_.error = cuda_error("cuMemcpyDtoH", rc);
      r_.mismatches = a_.count;
      return false;
    }
    for (std::size_t i = 0; i < host.size(); ++i) {
      // Small integers are exact in float; any difference is a wrong result, not rounding.
      if (static_cast<double>(host[i]) != r_.expected) {
        if (r_.mismatches == 0) {
          r_.first_bad_index = static_cast<std::int64_t>(i);
          r_.first_bad_value = static_cast<double>(host[i]);
        }
        ++r_.mismatches;
      }
    }
    if (r_.mismatches > 0) {
      r_.error = fmt::format("all-reduce result wrong in {} of {} elements (first at {}: {} instead of {})",
                             r_.mismatches, a_.count, r_.first_bad_index, r_.first_bad_value, r_.expected);
    }
    return r_.mismatches == 0;
  }

  bool destroy() {
    stage("destroy");
    detail::nccl_result rc = nccl_.comm_destroy(comm_);
    comm_ = nullptr;
    if (rc != 0) {
      nccl_failed("ncclCommDestroy", rc);
      return false;
    }
    // Buffers and the context go with the process; freeing them only costs time.
    return true;
  }

  const nccl_rank_args& a_;
  detail::control_writer ctl_;
  nccl_rank_report r_;
  clock::time_point phase_start_ = clock::now();
  detail::cuda_api cuda_;
  detail::nccl_api nccl_;
  detail::nccl_unique_id id_{};
  detail::nccl_comm comm_ = nullptr;
  detail::cu_device dev_ = 0;
  detail::cu_context ctx_ = nullptr;
  detail::cu_stream stream_ = nullptr;
  detail::cu_devptr send_ = 0;
  detail::cu_devptr recv_ = 0;
};

}  // namespace

int nccl_rank_main(const nccl_rank_args& a) {
  if (a.rank < 0 || a.rank >= a.nranks || a.ctl_fd < 0 || (a.rank != 0 && a.id_fd < 0) || a.count == 0) return 2;
  // The orchestrator may be gone (killed by its own timeout); a write to the pipe must not kill us mid-NCCL.
  ::signal(SIGPIPE, SIG_IGN);
  // NCCL prints its log with fprintf(stdout): block-buffered on our pipe, so a rank killed at the timeout would
  // lose exactly the last lines, the ones that say where it hung (seen on the GPU machine: cut at 8192 bytes).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  rank_run r(a);
  return r.run();
}

}  // namespace mrcheck
