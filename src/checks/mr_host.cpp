// Check mr_host: NCCL's host-memory registrations (its bounce buffers, and on nvidia_peermem nodes the same
// pinned_vm budget its GPU buffers use) succeed on every HCA NCCL would use, under this process's limits.
#include <mrcheck/mr_probe.h>

#include "checks/mr_check_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mrcheck {

probe_check mr_host_check(const mr_probe_outcome& o, const node_evidence& e) {
  probe_check c;
  c.result.id = "mr_host";
  if (!detail::probe_ran(c, o, e)) return c;

  const nccl_estimate& est = o.estimate;
  if (est.ib_disabled && !o.size_from_user) {
    c.result.result = verdict::skip;
    c.result.summary = fmt::format("{}: NCCL registers no memory with an HCA (it runs over TCP sockets)",
                                   est.ib_disabled_why);
    return c;
  }

  // The numbers behind the size, always in the detail: an estimate is only as good as its inputs.
  std::string size_line =
      o.size_from_user ? fmt::format("size: {} (--size)\n", format_bytes(o.size))
                       : fmt::format("size: {} in {} buffers - ESTIMATE of NCCL's registrations for one rank: {}\n",
                                     format_bytes(o.size), o.buffers.size(), est.formula);
  std::string inputs;
  if (!o.size_from_user) {
    for (const auto& in : est.inputs) inputs += fmt::format("input: {}\n", in);
    for (const auto& n : est.notes) inputs += fmt::format("note: {}\n", n);
    inputs += fmt::format(
        "note: with GPUDirect RDMA over DMA-BUF only {} stays in host memory; send/recv (p2p) "
        "adds up to {} more if the job uses it\n",
        format_bytes(est.dmabuf_host_bytes), format_bytes(est.p2p_bytes));
  }
  std::string lib = fmt::format("library: {} (ibv_reg_mr_iova2@IBVERBS_1.8 {}, ibv_reg_dmabuf_mr@IBVERBS_1.12 {})\n",
                                o.library, o.iova2 ? "yes" : "no", o.dmabuf_symbol ? "yes" : "no");
  std::string limit = fmt::format("memlock: soft {}, hard {}{}\n", format_bytes(o.memlock_soft),
                                  format_bytes(o.memlock_hard), o.is_root ? " (running as root)" : "");
  std::string hcas = fmt::format("hca selection: {}\n", o.selection.rule);
  for (const auto& s : o.selection.skipped) hcas += fmt::format("skipped: {}\n", s);
  c.result.detail = size_line + inputs + lib + limit + hcas;

  // The first HCA that failed decides; the others are listed.
  const hca_probe_result* failed = nullptr;
  for (const auto& h : o.hcas) {
    c.result.detail += fmt::format("{}: {} {} via {}{} in {} us\n", h.device, h.host.ok ? "registered" : "FAILED",
                                   format_bytes(h.host.ok ? h.host.registered : h.host.bytes),
                                   h.host.call.empty() ? "-" : h.host.call,
                                   h.host.ok ? "" : fmt::format(" ({})", detail::errno_words(h.host.err)),
                                   h.host.elapsed.count());
    if (!h.host.ok && failed == nullptr) failed = &h;
  }
  if (failed != nullptr) {
    if (failed->host.failed_step == "mmap") {
      c.result.result = verdict::error;
      c.result.summary = fmt::format("could not allocate the probe's own buffer: {}", failed->host.message);
      return c;
    }
    detail::fill_failure(c, failed->host, false, e, "host memory");
    return c;
  }

  std::vector<std::string> devs;
  for (const auto& h : o.hcas) devs.push_back(h.device);
  const auto& first = o.hcas.front().host;
  c.result.result = verdict::pass;
  c.result.summary = fmt::format("registered {} ({} buffer{}{}) on {} via {} with {}", format_bytes(o.size),
                                 o.buffers.size(), o.buffers.size() == 1 ? "" : "s",
                                 o.size_from_user ? "" : ", NCCL estimate", fmt::join(devs, ", "), first.call,
                                 access_flags_string(first.access));
  bool bypass = e.cap_ipc_lock.value_or(o.is_root);
  if (bypass) {
    c.result.summary +=
        fmt::format("; {} has CAP_IPC_LOCK, so the memlock limit ({}) was NOT tested - probe as the job user",
                    o.is_root ? "running as root, this process" : "this process", format_bytes(o.memlock_soft));
  } else {
    c.result.summary += fmt::format(" under memlock soft limit {}", format_bytes(o.memlock_soft));
  }
  for (const auto& h : o.hcas) {
    if (!h.release.is_ok()) {
      c.result.result = verdict::warn;
      c.result.summary += fmt::format("; releasing failed: {}", h.release.message());
      break;
    }
  }
  return c;
}

}  // namespace mrcheck
