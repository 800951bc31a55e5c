// Check mr_gpu: GPU memory registers with the HCA through the path NCCL would pick for GPUDirect RDMA.
// NCCL's choice ([N] src/transport/net.cc l.729: useDmaBuf = useGdr && dmaBufSupport && NCCL_PTR_DMABUF): DMA-BUF
// when the HCA answers the fd -1 probe, CUDA reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and NCCL_DMABUF_ENABLE
// is not 0; else the device pointer through nvidia_peermem when that module is loaded ([N] net_ib.cc
// ibGdrSupportInitOnce); else no GDR at all - the job runs, staging through pinned host memory (mr_host).
// A path NCCL would take that fails is a failed job; no GDR path on a node whose NIC is near enough for GDR is a
// warning ("GDR will be off"); a NIC beyond NCCL_NET_GDR_LEVEL (default PXB) means NCCL does not use GDR there at
// all, which is the topology, not a fault. NCCL >= 2.19 allocates its GPU buffers with cuMem (VMM) by default
// (NCCL_CUMEM_ENABLE, [N] src/misc/cudawrap.cc), so the VMM buffer must register through the same path.
#include <mrcheck/mr_probe.h>

#include "checks/mr_check_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mrcheck {

namespace {

// The cases where there is nothing to register: CUDA skipped or broken, the probe did not run, NCCL registers no
// memory or no GPU memory. Returns true when one of them decided `c`.
bool not_applicable(probe_check& c, const mr_probe_outcome& o, const node_evidence& e) {
  if (!o.gpu_setup.skip_reason.empty()) {
    c.result.result = verdict::skip;
    c.result.summary = o.gpu_setup.skip_reason;
    return true;
  }
  if (!o.gpu_setup.error.empty()) {
    c.result.result = verdict::error;
    c.result.summary = fmt::format("CUDA could not be set up: {}", o.gpu_setup.error);
    return true;
  }
  if (!detail::probe_ran(c, o, e)) return true;
  if (o.estimate.ib_disabled) {
    c.result.result = verdict::skip;
    c.result.summary = fmt::format("{}: NCCL registers no memory with an HCA", o.estimate.ib_disabled_why);
    return true;
  }
  if (o.estimate.gdr_off) {
    c.result.result = verdict::skip;
    c.result.summary =
        "NCCL_NET_GDR_LEVEL=LOC: GPUDirect RDMA is off, NCCL stages GPU data through host memory (see mr_host)";
    return true;
  }
  return false;
}

// NCCL_NET_GDR_LEVEL as NCCL applies it: the user's level, else PXB.
pci_path gdr_level(const nccl_estimate& est) {
  return est.gdr_level.empty() ? pci_path::pxb : parse_gdr_level(est.gdr_level);
}

bool beyond(pci_path distance, pci_path level) {
  return distance != pci_path::unknown && level != pci_path::unknown &&
         static_cast<int>(distance) > static_cast<int>(level);
}

// When every probed HCA is farther from the GPU than NCCL_NET_GDR_LEVEL allows, NCCL does not use GPUDirect RDMA
// at all: GPU data is staged through host memory, which mr_host tests. Returns true when that decided `c`.
bool gdr_off_by_distance(probe_check& c, const mr_probe_outcome& o) {
  pci_path level = gdr_level(o.estimate);
  std::vector<std::string> far;
  for (const auto& h : o.hcas) {
    if (!h.gpu.attempted) continue;
    if (!beyond(h.gpu_path, level)) return false;
    far.push_back(fmt::format("{} is {} from GPU {}", h.device, to_string(h.gpu_path), h.gpu.pci_bdf));
  }
  if (far.empty()) return false;
  c.result.result = verdict::skip;
  c.result.summary = fmt::format(
      "GDR will be off: {} ({}), beyond NCCL_NET_GDR_LEVEL {}; NCCL stages GPU data through host memory (see "
      "mr_host)",
      fmt::join(far, ", "),
      far.size() == 1 && o.hcas.front().gpu_path == pci_path::sys ? "across CPU sockets" : "through the CPU",
      o.estimate.gdr_level.empty() ? "(default PXB)" : "=" + o.estimate.gdr_level);
  return true;
}

// Whether NCCL would allocate its GPU buffers with cuMem: NCCL_CUMEM_ENABLE, else a CUDA 12+ driver and VMM.
bool nccl_uses_cumem(const nccl_estimate& est, const gpu_probe_result& g) {
  return est.cumem >= 0 ? est.cumem != 0 : (g.driver_version >= 12000 && g.vmm_attr);
}

std::string attempt_words(const mr_attempt& a, const std::string& not_tried) {
  if (!a.attempted) return "not tried: " + not_tried;
  return a.ok ? std::string("ok") : detail::errno_words(a.err);
}

std::string peermem_name(const node_evidence& e) {
  if (e.peer_memory_client && !*e.peer_memory_client && e.peer_memory.value_or(false)) {
    return "nvidia_peermem (loaded, no nv_mem peer-memory client registered)";
  }
  return e.peer_memory_client.value_or(false) ? "nvidia_peermem (nv_mem client registered)" : "nvidia_peermem";
}

// Neither path is one NCCL would take; say which failed and why (the peermem EFAULT is the usual answer).
void warn_no_gdr_path(probe_check& c, const mr_probe_outcome& o, const node_evidence& e) {
  const hca_probe_result& h = o.hcas.front();
  const mr_attempt& a = h.gpu.dmabuf.attempted ? h.gpu.dmabuf : h.gpu.peermem;
  failure f;
  f.call = a.call;
  f.err = a.ok ? 0 : a.err;
  f.size = a.bytes;
  f.gpu_buffer = true;
  if (!h.gpu.peermem.ok) {
    f.call = h.gpu.peermem.call;
    f.err = h.gpu.peermem.err;
  }
  diagnosis d = diagnose(f, e);
  c.result.result = verdict::warn;
  c.result.summary = fmt::format(
      "GDR will be off{}: no GPUDirect RDMA path NCCL would use: DMA-BUF {} and no nvidia_peermem ({} of GPU memory "
      "-> {}); NCCL will stage through pinned host memory (mr_host)",
      h.gpu_path == pci_path::unknown
          ? std::string()
          : fmt::format(" although {} is {} from GPU {}", h.device, to_string(h.gpu_path), h.gpu.pci_bdf),
      h.dmabuf.support == dmabuf_support::supported
          ? (h.gpu.dmabuf_attr ? "disabled" : "not supported by the GPU driver")
          : "not supported by the HCA stack",
      h.gpu.peermem.call, f.err == 0 ? std::string("ok") : detail::errno_words(f.err));
  c.result.hint = d.fix;
  c.result.detail = fmt::format("cause={}\n", to_string(d.what)) + c.result.detail;
  c.what = f;
  c.diag = std::move(d);
}

// What one HCA's registrations say, on the path NCCL would take there.
struct hca_gpu_verdict {
  bool gdr = false;                    // NCCL would use GPUDirect RDMA with this HCA
  const mr_attempt* failed = nullptr;  // the attempt on that path that failed
  bool failed_vmm = false;             // ... and it was the cuMem (VMM) buffer
  std::string ok_line;                 // "mlx5_0 via DMA-BUF"
  std::string no_handle;               // DMA-BUF chosen but cuMemGetHandleForAddressRange failed
};

hca_gpu_verdict judge_hca(const mr_probe_outcome& o, const hca_probe_result& h, const node_evidence& e) {
  const gpu_probe_result& g = h.gpu;
  hca_gpu_verdict v;
  bool cumem = nccl_uses_cumem(o.estimate, g) && g.vmm_attr && g.vmm_error.empty();
  bool nccl_dmabuf = o.estimate.dmabuf_enabled && h.dmabuf.support == dmabuf_support::supported && g.dmabuf_attr &&
                     g.driver_version >= 11070;
  const mr_attempt* plain = nullptr;
  const mr_attempt* vmm = nullptr;
  std::string path;
  if (nccl_dmabuf) {
    plain = &g.dmabuf;
    vmm = &g.vmm_dmabuf;
    path = "DMA-BUF";
    if (!g.dmabuf.attempted) v.no_handle = g.dmabuf_handle_error;
  } else if (e.peer_memory.value_or(false)) {
    plain = &g.peermem;
    vmm = &g.vmm_peermem;
    path = peermem_name(e);
  } else {
    return v;
  }
  v.gdr = true;
  if (!v.no_handle.empty()) return v;
  if (!plain->ok) {
    v.failed = plain;
  } else if (cumem && vmm->attempted && !vmm->ok) {
    v.failed = vmm;
    v.failed_vmm = true;
  } else {
    v.ok_line = fmt::format("{} via {}{}", h.device, path, cumem && vmm->ok ? " (cudaMalloc and cuMem buffers)" : "");
  }
  return v;
}

void describe_hca(check_result& r, const mr_probe_outcome& o, const hca_probe_result& h) {
  const gpu_probe_result& g = h.gpu;
  r.detail += fmt::format(
      "gpu: CUDA device {} ({}), driver API {}, DMA_BUF_SUPPORTED {}, GPU_DIRECT_RDMA_SUPPORTED {}, VMM {}, "
      "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED {}\n",
      g.cuda_device, g.pci_bdf.empty() ? "?" : g.pci_bdf, g.driver_version, g.dmabuf_attr ? 1 : 0, g.gdr_attr ? 1 : 0,
      g.vmm_attr ? 1 : 0, g.vmm_gdr_attr ? 1 : 0);
  r.detail += fmt::format("{}: {} from the GPU (NCCL_NET_GDR_LEVEL {}), NCCL_CUMEM_ENABLE {}\n", h.device,
                          h.gpu_path == pci_path::unknown ? "distance unknown" : to_string(h.gpu_path),
                          o.estimate.gdr_level.empty() ? "default PXB" : o.estimate.gdr_level,
                          o.estimate.cumem == -2 ? std::string("default (on with a CUDA 12+ driver and VMM)")
                                                 : std::to_string(o.estimate.cumem));
  r.detail += fmt::format("{}: peer-memory path {} {} cuMemAlloc -> {}\n", h.device, g.peermem.call,
                          format_bytes(g.bytes), attempt_words(g.peermem, ""));
  r.detail += fmt::format("{}: DMA-BUF path ibv_reg_dmabuf_mr {} cuMemAlloc -> {}\n", h.device, format_bytes(g.bytes),
                          attempt_words(g.dmabuf, g.dmabuf_handle_error));
  if (!g.vmm_attr) {
    r.detail += fmt::format("{}: cuMem (VMM) buffer not tried: the device or driver has no VMM\n", h.device);
  } else if (!g.vmm_error.empty()) {
    r.detail += fmt::format("{}: cuMem (VMM) buffer could not be allocated: {}\n", h.device, g.vmm_error);
  } else {
    r.detail += fmt::format("{}: peer-memory path {} {} cuMem -> {}\n", h.device, g.vmm_peermem.call,
                            format_bytes(g.bytes), attempt_words(g.vmm_peermem, ""));
    r.detail += fmt::format("{}: DMA-BUF path ibv_reg_dmabuf_mr {} cuMem -> {}\n", h.device, format_bytes(g.bytes),
                            attempt_words(g.vmm_dmabuf, g.vmm_dmabuf_handle_error));
  }
}

void fail_vmm(probe_check& c, const hca_probe_result& h, const mr_attempt& a, const node_evidence& e) {
  detail::fill_failure(c, a, true, e, "cuMem (VMM) GPU memory");
  c.result.summary +=
      fmt::format(" (cudaMalloc memory registers on the same path: NCCL >= 2.19 allocates with cuMem{})",
                  h.gpu.vmm_gdr_attr ? "" : "; the GPU reports GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED 0");
  c.result.hint = "set NCCL_CUMEM_ENABLE=0 (NCCL allocates with cudaMalloc, which registers here); " + c.result.hint;
}

}  // namespace

probe_check mr_gpu_check(const mr_probe_outcome& o, const node_evidence& e) {
  probe_check c;
  c.result.id = "mr_gpu";
  if (not_applicable(c, o, e)) return c;
  for (const auto& h : o.hcas) {
    if (!h.gpu.attempted) continue;
    if (!h.gpu.error.empty()) {
      c.result.result = verdict::error;
      c.result.summary = fmt::format("{}: {}", h.device, h.gpu.error);
      return c;
    }
    describe_hca(c.result, o, h);
  }
  if (gdr_off_by_distance(c, o)) return c;

  std::vector<std::string> ok_lines;
  bool any_gdr = false;
  for (const auto& h : o.hcas) {
    if (!h.gpu.attempted || beyond(h.gpu_path, gdr_level(o.estimate))) continue;
    hca_gpu_verdict v = judge_hca(o, h, e);
    any_gdr = any_gdr || v.gdr;
    if (!v.no_handle.empty()) {
      c.result.result = verdict::fail;
      c.result.summary = fmt::format("{}: NCCL would use DMA-BUF but cuMemGetHandleForAddressRange failed: {}",
                                     h.device, v.no_handle);
      c.result.hint =
          "update the NVIDIA driver to the open kernel modules (DMA-BUF needs them) or set NCCL_DMABUF_ENABLE=0";
      return c;
    }
    if (v.failed != nullptr) {
      if (v.failed_vmm) {
        fail_vmm(c, h, *v.failed, e);
      } else {
        detail::fill_failure(c, *v.failed, true, e, "GPU memory");
      }
      return c;
    }
    if (!v.ok_line.empty()) ok_lines.push_back(std::move(v.ok_line));
  }
  if (!any_gdr) {
    warn_no_gdr_path(c, o, e);
    return c;
  }
  c.result.result = verdict::pass;
  c.result.summary = fmt::format("GPU memory ({} on {}) registers: {}", format_bytes(o.hcas.front().gpu.bytes),
                                 o.hcas.front().gpu.pci_bdf, fmt::join(ok_lines, ", "));
  return c;
}

}  // namespace mrcheck
