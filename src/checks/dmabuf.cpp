// Check dmabuf: would NCCL find DMA-BUF registration supported on the HCAs it uses? Asked exactly as NCCL asks
// (ibv_reg_dmabuf_mr with fd -1: EOPNOTSUPP/EPROTONOSUPPORT = no, EBADF = yes). Without it, GPUDirect RDMA needs
// nvidia_peermem (an OFED kernel) or NCCL stages GPU data through pinned host memory.
#include <mrcheck/mr_probe.h>

#include "checks/mr_check_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mrcheck {

probe_check dmabuf_check(const mr_probe_outcome& o, const node_evidence& e) {
  probe_check c;
  c.result.id = "dmabuf";
  if (!detail::probe_ran(c, o, e)) return c;

  if (!o.estimate.dmabuf_enabled) {
    c.result.result = verdict::skip;
    c.result.summary = "NCCL_DMABUF_ENABLE=0: NCCL does not use DMA-BUF";
    return c;
  }
  std::vector<std::string> yes;
  const hca_probe_result* no = nullptr;
  for (const auto& h : o.hcas) {
    if (!h.dmabuf.attempted) continue;
    c.result.detail += fmt::format("{}: ibv_reg_dmabuf_mr(fd -1) -> {} = {}{}\n", h.device,
                                   h.dmabuf.err == 0 ? std::string("success") : detail::errno_words(h.dmabuf.err),
                                   to_string(h.dmabuf.support), h.dmabuf.symbol ? "" : " (symbol not exported)");
    if (h.dmabuf.support == dmabuf_support::supported)
      yes.push_back(h.device);
    else if (no == nullptr)
      no = &h;
  }
  if (yes.empty() && no == nullptr) {
    c.result.result = verdict::skip;
    c.result.summary = "no HCA could be opened to ask";
    return c;
  }
  if (no == nullptr) {
    c.result.result = verdict::pass;
    c.result.summary = fmt::format("DMA-BUF registration supported on {} (ibv_reg_dmabuf_mr with fd -1 answers {})",
                                   fmt::join(yes, ", "), detail::errno_words(o.hcas.front().dmabuf.err));
    return c;
  }

  failure f;
  f.what = failure::kind::call;
  f.call = "ibv_reg_dmabuf_mr";
  f.err = no->dmabuf.err;
  f.gpu_buffer = true;
  diagnosis d = diagnose(f, e);
  std::string why = no->dmabuf.symbol
                        ? fmt::format("ibv_reg_dmabuf_mr(fd -1) answers {}", detail::errno_words(f.err))
                        : fmt::format("{} does not export ibv_reg_dmabuf_mr@IBVERBS_1.12 (rdma-core < 34)", o.library);
  c.result.detail = fmt::format("cause={}\n", to_string(d.what)) + c.result.detail;
  for (const auto& ev : d.evidence) c.result.detail += fmt::format("evidence: {}\n", ev);
  c.result.hint = d.fix;
  // Not a job failure by itself: NCCL falls back to nvidia_peermem or host staging. It matters only with a GPU.
  if (o.gpu_bdfs.empty() && !o.gpu_requested) {
    c.result.result = verdict::skip;
    c.result.summary = fmt::format("DMA-BUF unsupported on {} ({}), but no GPU is visible, so NCCL would not use it",
                                   no->device, why);
  } else {
    c.result.result = verdict::warn;
    c.result.summary = fmt::format("DMA-BUF unsupported on {}: {}; {}", no->device, why, d.summary);
  }
  c.what = f;
  c.diag = std::move(d);
  return c;
}

}  // namespace mrcheck
