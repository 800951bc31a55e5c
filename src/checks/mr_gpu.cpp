// Check mr_gpu: GPU memory registers with the HCA through the path NCCL would pick for GPUDirect RDMA.
// NCCL's choice ([N] src/transport/net.cc l.729: useDmaBuf = useGdr && dmaBufSupport && NCCL_PTR_DMABUF): DMA-BUF
// when the HCA answers the fd -1 probe, CUDA reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and NCCL_DMABUF_ENABLE
// is not 0; else the device pointer through nvidia_peermem when that module is loaded ([N] net_ib.cc
// ibGdrSupportInitOnce); else no GDR at all - the job runs, staging through pinned host memory (mr_host).
// A path NCCL would take that fails is a failed job; no GDR path is a warning.
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
      "no GPUDirect RDMA path NCCL would use: DMA-BUF {} and no nvidia_peermem ({} of GPU memory -> {}); NCCL "
      "will stage through pinned host memory (mr_host)",
      h.dmabuf.support == dmabuf_support::supported
          ? (h.gpu.dmabuf_attr ? "disabled" : "not supported by the GPU driver")
          : "not supported by the HCA stack",
      h.gpu.peermem.call, f.err == 0 ? std::string("ok") : detail::errno_words(f.err));
  c.result.hint = d.fix;
  c.result.detail = fmt::format("cause={}\n", to_string(d.what)) + c.result.detail;
  c.what = f;
  c.diag = std::move(d);
}

}  // namespace

probe_check mr_gpu_check(const mr_probe_outcome& o, const node_evidence& e) {
  probe_check c;
  c.result.id = "mr_gpu";
  if (not_applicable(c, o, e)) return c;

  const hca_probe_result* bad = nullptr;
  const mr_attempt* bad_attempt = nullptr;
  std::vector<std::string> ok_lines;
  bool any_gdr = false;
  bool peermem = e.peer_memory.value_or(false);
  for (const auto& h : o.hcas) {
    const gpu_probe_result& g = h.gpu;
    if (!g.attempted) continue;
    c.result.detail +=
        fmt::format("gpu: CUDA device {} ({}), driver API {}, DMA_BUF_SUPPORTED {}, GPU_DIRECT_RDMA_SUPPORTED {}\n",
                    g.cuda_device, g.pci_bdf.empty() ? "?" : g.pci_bdf, g.driver_version, g.dmabuf_attr ? 1 : 0,
                    g.gdr_attr ? 1 : 0);
    if (!g.error.empty()) {
      c.result.result = verdict::error;
      c.result.summary = fmt::format("{}: {}", h.device, g.error);
      return c;
    }
    c.result.detail += fmt::format("{}: peer-memory path {} {} -> {}\n", h.device, g.peermem.call,
                                   format_bytes(g.bytes),
                                   g.peermem.ok ? std::string("ok") : detail::errno_words(g.peermem.err));
    c.result.detail += fmt::format("{}: DMA-BUF path ibv_reg_dmabuf_mr {} -> {}\n", h.device, format_bytes(g.bytes),
                                   g.dmabuf.attempted
                                       ? (g.dmabuf.ok ? std::string("ok") : detail::errno_words(g.dmabuf.err))
                                       : "not tried: " + g.dmabuf_handle_error);
    bool nccl_dmabuf = o.estimate.dmabuf_enabled && h.dmabuf.support == dmabuf_support::supported && g.dmabuf_attr &&
                       g.driver_version >= 11070;
    if (nccl_dmabuf) {
      any_gdr = true;
      if (g.dmabuf.ok) {
        ok_lines.push_back(fmt::format("{} via DMA-BUF", h.device));
      } else if (bad == nullptr) {
        bad = &h;
        bad_attempt = &g.dmabuf;
        if (!g.dmabuf.attempted) {
          c.result.result = verdict::fail;
          c.result.summary = fmt::format("{}: NCCL would use DMA-BUF but cuMemGetHandleForAddressRange failed: {}",
                                         h.device, g.dmabuf_handle_error);
          c.result.hint =
              "update the NVIDIA driver to the open kernel modules (DMA-BUF needs them) or set NCCL_DMABUF_ENABLE=0";
          return c;
        }
      }
    } else if (peermem) {
      any_gdr = true;
      if (g.peermem.ok) {
        ok_lines.push_back(fmt::format("{} via nvidia_peermem", h.device));
      } else if (bad == nullptr) {
        bad = &h;
        bad_attempt = &g.peermem;
      }
    }
  }
  if (bad != nullptr) {
    detail::fill_failure(c, *bad_attempt, true, e, "GPU memory");
    return c;
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
