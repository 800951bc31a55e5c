// What the cause rows share (src/explain/causes/cause_rows.h): the call classes, the evidence lines, the predicates and
// the fix texts that depend on the evidence. The rules follow docs/facts/verbs-and-nccl.md §2.
#include "cause_rows.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <cerrno>

namespace mrcheck::cause_rows {

bool is_registration(std::string_view call) {
  return call.starts_with("ibv_reg_mr") || call.starts_with("fi_mr_reg") || call == "ibv_reg_dmabuf_mr" ||
         call == "mlx5dv_reg_dmabuf_mr" || call == "efa_reg_mr" || call == "ibv_exp_reg_mr" || call.empty();
}

bool is_dmabuf_call(std::string_view call) { return call.find("dmabuf") != std::string_view::npos; }

bool is_queue_call(std::string_view call) {
  return call == "ibv_create_cq" || call == "ibv_create_qp" || call == "ibv_create_srq" || call == "ibv_create_cq_ex" ||
         call == "ibv_create_qp_ex" || call == "mlx5dv_create_qp" || call == "mlx5dv_create_cq" ||
         call == "rdma_create_qp" || call == "fi_cq_open" || call == "fi_enable" || call == "fi_endpoint";
}

bool is_device_lookup(std::string_view call) {
  return call == "ibv_open_device" || call == "ibv_get_device_list" || call == "fi_getinfo";
}

std::string limit_text(std::uint64_t v) { return v == k_unlimited ? "unlimited" : format_bytes(v); }

std::string call_or(std::string_view call) {
  return call.empty() ? std::string("the registration") : std::string(call);
}

std::string errno_text(int err) {
  std::string_view name = errno_name(err);
  std::string_view msg = errno_message(err);
  if (name.empty()) return fmt::format("errno {}", err);
  return fmt::format("{} {} ({})", name, err, msg);
}

bool case_ctx::bypasses_memlock() const {
  if (e.cap_ipc_lock) return *e.cap_ipc_lock;
  // Root outside a container keeps CAP_IPC_LOCK; inside one it may have been dropped.
  return e.is_root.value_or(false) && e.in_container.has_value() && !*e.in_container;
}

// CMA pageblocks a long-term pin cannot use (docs/transports.md, "Long-term pinning and CMA"): the kernel must
// migrate every page out of them before it pins it for the NIC, and a page the GPU driver holds cannot move.
// CmaFree above CmaTotal means pageblocks marked MIGRATE_CMA outside any CMA area (KHO scratch memory).
bool case_ctx::cma_suspect() const {
  if (!e.cma_free) return false;
  const std::uint64_t total = e.cma_total.value_or(0);
  return *e.cma_free > total || *e.cma_free >= (std::uint64_t{1} << 30);
}

// The HCA refused an object (docs/transports.md, "HCA resource limits"): a PD, UAR, QP, CQ or MKEY is firmware
// state with a per-device maximum, not pinned memory; memlock and max_map_count do not move it.
bool case_ctx::hca_limit() const {
  if (f.detail.find("limits exceeded") != std::string::npos) return true;
  if (f.err != ENOMEM && f.err != EREMOTEIO) return false;
  if (f.hca_limit_in_log) return true;
  // Allocations that pin no user memory: an ENOMEM from them is the device's (or its UAR space's) limit.
  const std::string_view o = hca_object(f.call);
  return f.err == ENOMEM && (o == "pd" || o == "uar" || o == "devx") && f.call != "efa_reg_mr";
}

bool case_ctx::mismatch() const {
  return e.kernel_stack != rdma_flavour::unknown && e.user_stack != rdma_flavour::unknown &&
         e.kernel_stack != e.user_stack;
}

std::string case_ctx::whose_limit() const {
  return e.memlock_source.empty() ? std::string("the task's RLIMIT_MEMLOCK soft limit")
                                  : fmt::format("the RLIMIT_MEMLOCK soft limit of {}", e.memlock_source);
}

// A known hop is the fix's target even inside a container: a shell's `ulimit -l 64` propagated by srun is
// fixed in Slurm, not in the container runtime. Only an unknown hop in a container points at the runtime.
std::string case_ctx::memlock_fix() const {
  if (!e.memlock_hop.empty()) return fmt::format("the limit was lowered at {}: {}", e.memlock_hop, k_memlock_fix_slurm);
  return container() ? container_memlock_fix(e.runtime) : std::string(k_memlock_fix_slurm);
}

std::string case_ctx::pinning_fix() const {
  if (ofi()) return std::string(k_efa_pages_fix);
  if (cma_suspect()) {
    return "long-term pinning fails on CMA pageblocks: boot with kho=off where the kernel enables kexec handover "
           "by default (MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark #259, NVIDIA/NV-Kernels PR #590), or keep "
           "more memory truly free (MemFree) before NCCL init";
  }
  if (e.max_map_count && *e.max_map_count <= k_default_max_map_count) {
    return "raise vm.max_map_count (sysctl -w vm.max_map_count=1048576, persist in /etc/sysctl.d/) and retry";
  }
  if (e.hugepages_total && e.hugepage_size && e.mem_total && *e.hugepages_total * *e.hugepage_size > *e.mem_total / 4) {
    return "release reserved hugepages that the job does not use (vm.nr_hugepages) or reduce NCCL's buffers "
           "(NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS)";
  }
  if (f.gpu_buffer.value_or(false)) {
    return "GPU registrations are limited by BAR1 and GPU memory: reduce NCCL's buffers (NCCL_BUFFSIZE, "
           "NCCL_MAX_NCHANNELS) or free GPU memory before NCCL init";
  }
  return "free memory on the node or reduce NCCL's pinned buffers (NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS); raise "
         "vm.max_map_count if it is low";
}

std::string case_ctx::pinning_what() const {
  if (ofi()) return "the EFA device's limit on registered host pages";
  if (cma_suspect()) return "long-term pinning of pages that sit in CMA pageblocks and cannot be migrated";
  return fmt::format("memory, max_map_count, hugepages{}", f.gpu_buffer.value_or(false) ? ", BAR1" : "");
}

std::string case_ctx::stack_mismatch_text() const {
  return fmt::format("the kernel RDMA stack is {}{}{} but user-space rdma-core{}{} is {}", to_string(e.kernel_stack),
                     e.kernel_stack_detail.empty() ? "" : " (",
                     e.kernel_stack_detail.empty() ? "" : e.kernel_stack_detail + ")",
                     e.rdma_core_version.empty() ? "" : " ", e.rdma_core_version, to_string(e.user_stack));
}

std::string case_ctx::stack_mismatch_fix() const {
  if (e.kernel_stack == rdma_flavour::ofed) {
    return "install the rdma-core/libibverbs that ships with the MLNX/DOCA-OFED kernel modules (same release), or "
           "remove OFED and use the distribution's stack on both sides";
  }
  return "rebuild/reinstall the MLNX/DOCA-OFED kernel modules for this kernel (DKMS) so they match its user space, "
         "or "
         "return to the distribution's rdma-core";
}

bool cause_row::match(const case_ctx& c) const {
  if (c.f.what != kind || !err.match(c.f.err)) return false;
  const std::string_view call = c.f.call;
  switch (call_class) {
    case calls::any: break;
    case calls::registration:
      if (!is_registration(call)) return false;
      break;
    case calls::dmabuf:
      if (!is_dmabuf_call(call)) return false;
      break;
    case calls::queue:
      if (!is_queue_call(call)) return false;
      break;
    case calls::opened_device:
      if (call.empty() || is_device_lookup(call)) return false;
      break;
  }
  if (!names.empty()) {
    bool found = false;
    for (std::string_view rest = names; !found;) {
      const std::size_t bar = rest.find('|');
      found = rest.substr(0, bar) == call;
      if (bar == std::string_view::npos) break;
      rest.remove_prefix(bar + 1);
    }
    if (!found) return false;
  }
  const std::optional<bool>& gpu = c.f.gpu_buffer;
  switch (mem) {
    case memory::any: break;
    case memory::gpu:
      if (!gpu.value_or(false)) return false;
      break;
    case memory::host:
      if (!gpu || *gpu) return false;
      break;
    case memory::unknown:
      if (gpu) return false;
      break;
  }
  return when(c);
}

}  // namespace mrcheck::cause_rows
