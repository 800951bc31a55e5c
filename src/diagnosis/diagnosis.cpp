// errno + node evidence -> cause, summary, evidence, fix. The rules follow docs/facts/verbs-and-nccl.md §2 (where each
// errno comes from in the kernel) and the reports cited in docs/facts/verbs-and-nccl.md §3; every branch has a unit
// test.
#include <mrcheck/diagnosis.h>

#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>

namespace mrcheck {

namespace {

// The kernel's default vm.max_map_count (DEFAULT_MAX_MAP_COUNT = 65530): every registration can split VMAs
// (madvise DONTFORK), so a node at the default runs out first.
constexpr std::uint64_t k_default_max_map_count = 65530;

// The kernel's ENOTSUPP (include/linux/errno.h), internal to the kernel but seen from ibv_reg_dmabuf_mr.
constexpr int k_kernel_enotsupp = 524;

constexpr std::string_view k_memlock_fix_slurm =
    "set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf and LimitMEMLOCK=infinity for slurmd (systemd "
    "drop-in), restart slurmd; to test now run `ulimit -l unlimited` in the shell that starts srun";
constexpr std::string_view k_tcp_fallback =
    "last resort: NCCL_IB_DISABLE=1 runs NCCL over TCP sockets; the job starts, but inter-node bandwidth drops to "
    "what the Ethernet/IPoIB interface gives (often 5-20x lower) and CPU load rises";
constexpr std::string_view k_gdr_fallback =
    "workaround: NCCL_NET_GDR_LEVEL=LOC keeps InfiniBand but stages GPU data through host memory (lower bandwidth, "
    "more host memory pinned); last resort NCCL_IB_DISABLE=1 (TCP sockets, often 5-20x slower)";

// Under a net plugin (aws-ofi-nccl) NCCL never uses its own NET/IB, so NCCL_IB_DISABLE=1 changes nothing;
// NCCL_NET=Socket selects NCCL's socket transport by name (docs/transports.md).
constexpr std::string_view k_net_plugin_fallback =
    "last resort: NCCL_NET=Socket makes NCCL use TCP sockets instead of the aws-ofi-nccl plugin (NCCL_IB_DISABLE=1 "
    "does nothing under a net plugin); the job starts, but inter-node bandwidth drops to what the Ethernet "
    "interface gives and CPU load rises";
constexpr std::string_view k_ucx_fallback =
    "last resort: UCX_TLS=tcp,self,sm,cuda_copy,cuda_ipc keeps UCX off RDMA; the job starts, but inter-node "
    "bandwidth drops to what the Ethernet interface gives";
// EFA's own limit (libfabric #9739): the device can register only so many host pages; huge pages cover the same
// memory with far fewer pages.
constexpr std::string_view k_efa_pages_fix =
    "the EFA device limits how many host pages it can register (ofiwg/libfabric #9739): back large buffers with huge "
    "pages (reserve vm.nr_hugepages; libfabric's EFA provider uses them for its own buffers unless "
    "FI_EFA_USE_HUGE_PAGE=0) or register less memory at once";

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

struct builder {
  const failure& f;
  const node_evidence& e;
  diagnosis d;

  void errno_line() {
    if (f.err != 0) {
      d.evidence.push_back(fmt::format("{} failed with {}", call_or(f.call), errno_text(f.err)));
    } else if (!f.call.empty()) {
      d.evidence.push_back(fmt::format("{} failed; the errno is not known", f.call));
    }
    if (f.size) {
      d.evidence.push_back(fmt::format("size: {} of {} memory", format_bytes(*f.size),
                                       f.gpu_buffer ? (*f.gpu_buffer ? "GPU" : "host") : "unknown"));
    }
  }

  void limit_lines() {
    std::string who = e.memlock_source.empty() ? "the task" : e.memlock_source;
    if (e.memlock_soft) {
      std::string line = fmt::format("RLIMIT_MEMLOCK of {}: soft {}", who, limit_text(*e.memlock_soft));
      if (e.memlock_hard) line += fmt::format(", hard {}", limit_text(*e.memlock_hard));
      d.evidence.push_back(std::move(line));
    } else {
      d.evidence.push_back(fmt::format("RLIMIT_MEMLOCK of {}: not known (check `srun bash -c 'ulimit -l'`)", who));
    }
    if (!e.memlock_hop.empty()) d.evidence.push_back(fmt::format("lowered at: {}", e.memlock_hop));
    if (e.cap_ipc_lock) {
      d.evidence.push_back(*e.cap_ipc_lock ? "CAP_IPC_LOCK: yes (the kernel skips the memlock check)"
                                           : "CAP_IPC_LOCK: no");
    } else if (e.is_root && *e.is_root) {
      d.evidence.push_back("running as root (normally CAP_IPC_LOCK, which skips the memlock check)");
    }
    if (e.in_container && *e.in_container) {
      d.evidence.push_back(e.container_why.empty() ? std::string("running in a container")
                                                   : fmt::format("running in a container ({})", e.container_why));
    } else if (!e.container_why.empty()) {
      d.evidence.push_back(fmt::format("not counted as a container: {}", e.container_why));
    }
  }

  void version_lines() {
    if (e.kernel_stack != rdma_flavour::unknown || !e.kernel_stack_detail.empty()) {
      d.evidence.push_back(fmt::format("kernel RDMA stack: {}{}{}", to_string(e.kernel_stack),
                                       e.kernel_stack_detail.empty() ? "" : ", ", e.kernel_stack_detail));
    }
    if (e.user_stack != rdma_flavour::unknown || !e.rdma_core_version.empty()) {
      std::string line = fmt::format("user-space rdma-core: {}",
                                     e.rdma_core_version.empty() ? "?" : e.rdma_core_version);
      if (e.user_stack != rdma_flavour::unknown) line += fmt::format(" ({})", to_string(e.user_stack));
      if (e.has_iova2) line += fmt::format(", IBVERBS_1.8 {}", *e.has_iova2 ? "yes" : "no");
      if (e.has_dmabuf_mr) line += fmt::format(", IBVERBS_1.12 {}", *e.has_dmabuf_mr ? "yes" : "no");
      d.evidence.push_back(std::move(line));
    }
  }

  void gpu_lines() {
    if (e.peer_memory) {
      d.evidence.push_back(*e.peer_memory ? "peer memory: nvidia_peermem / memory_peers present"
                                          : "peer memory: no nvidia_peermem, no memory_peers client");
    }
    if (e.driver_flavour != nvidia_flavour::unknown || !e.driver_version.empty()) {
      std::string_view fl = e.driver_flavour == nvidia_flavour::open          ? "open kernel modules"
                            : e.driver_flavour == nvidia_flavour::proprietary ? "proprietary kernel module"
                                                                              : "flavour unknown";
      d.evidence.push_back(fmt::format("NVIDIA driver {} ({})", e.driver_version.empty() ? "?" : e.driver_version, fl));
    }
  }

  void resource_lines() {
    if (e.max_map_count) {
      d.evidence.push_back(fmt::format("vm.max_map_count: {}{}", *e.max_map_count,
                                       *e.max_map_count <= k_default_max_map_count ? " (the kernel default)" : ""));
    }
    if (e.hugepages_total && *e.hugepages_total > 0) {
      std::string line = fmt::format("hugepages: {} reserved", *e.hugepages_total);
      if (e.hugepages_free) line += fmt::format(", {} free", *e.hugepages_free);
      if (e.hugepage_size) {
        line += fmt::format(" of {} ({} held back from normal allocations)", format_bytes(*e.hugepage_size),
                            format_bytes(*e.hugepages_total * *e.hugepage_size));
      }
      d.evidence.push_back(std::move(line));
    } else if (e.hugepages_total) {
      d.evidence.push_back("hugepages: none reserved");
    }
    if (e.mem_available) {
      std::string line = fmt::format("MemAvailable: {}", format_bytes(*e.mem_available));
      if (e.mem_total) line += fmt::format(" of {}", format_bytes(*e.mem_total));
      d.evidence.push_back(std::move(line));
    }
    if (e.gpu_bar1 && f.gpu_buffer.value_or(false)) {
      d.evidence.push_back(
          fmt::format("GPU BAR1: {} (GPU registrations are mapped through it)", format_bytes(*e.gpu_bar1)));
    }
  }

  bool bypasses_memlock() const {
    if (e.cap_ipc_lock) return *e.cap_ipc_lock;
    // Root outside a container keeps CAP_IPC_LOCK; inside one it may have been dropped.
    return e.is_root.value_or(false) && e.in_container.has_value() && !*e.in_container;
  }

  void set(cause c, bool confirmed, std::string summary, std::string fix, std::string_view fallback) {
    d.what = c;
    d.confirmed = confirmed;
    d.summary = std::move(summary);
    d.fix = std::move(fix);
    d.fallback = std::string(fallback);
  }

  std::string whose_limit() const {
    return e.memlock_source.empty() ? std::string("the task's RLIMIT_MEMLOCK soft limit")
                                    : fmt::format("the RLIMIT_MEMLOCK soft limit of {}", e.memlock_source);
  }

  // A known hop is the fix's target even inside a container: a shell's `ulimit -l 64` propagated by srun is
  // fixed in Slurm, not in the container runtime. Only an unknown hop in a container points at the runtime.
  std::string memlock_fix() const {
    if (!e.memlock_hop.empty())
      return fmt::format("the limit was lowered at {}: {}", e.memlock_hop, k_memlock_fix_slurm);
    return e.in_container.value_or(false) ? container_memlock_fix(e.runtime) : std::string(k_memlock_fix_slurm);
  }

  // CMA pageblocks a long-term pin cannot use (docs/transports.md, "Long-term pinning and CMA"): the kernel must
  // migrate every page out of them before it pins it for the NIC, and a page the GPU driver holds cannot move.
  // CmaFree above CmaTotal means pageblocks marked MIGRATE_CMA outside any CMA area (KHO scratch memory).
  bool cma_suspect() const {
    if (!e.cma_free) return false;
    const std::uint64_t total = e.cma_total.value_or(0);
    return *e.cma_free > total || *e.cma_free >= (std::uint64_t{1} << 30);
  }

  void cma_lines() {
    if (e.cma_free || e.cma_total) {
      d.evidence.push_back(
          fmt::format("CmaTotal {}, CmaFree {}{}", e.cma_total ? format_bytes(*e.cma_total) : "?",
                      e.cma_free ? format_bytes(*e.cma_free) : "?",
                      cma_suspect() ? " (free CMA pageblocks that a long-term pin must migrate away from)" : ""));
    }
  }

  std::string pinning_fix() const {
    if (is_ofi_family(f)) return std::string(k_efa_pages_fix);
    if (cma_suspect()) {
      return "long-term pinning fails on CMA pageblocks: boot with kho=off where the kernel enables kexec handover "
             "by default (MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark #259, NVIDIA/NV-Kernels PR #590), or keep "
             "more memory truly free (MemFree) before NCCL init";
    }
    if (e.max_map_count && *e.max_map_count <= k_default_max_map_count) {
      return "raise vm.max_map_count (sysctl -w vm.max_map_count=1048576, persist in /etc/sysctl.d/) and retry";
    }
    if (e.hugepages_total && e.hugepage_size && e.mem_total &&
        *e.hugepages_total * *e.hugepage_size > *e.mem_total / 4) {
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

  // The HCA refused an object (docs/transports.md, "HCA resource limits"): a PD, UAR, QP, CQ or MKEY is firmware
  // state with a per-device maximum, not pinned memory; memlock and max_map_count do not move it.
  bool hca_limit() const {
    if (f.detail.find("limits exceeded") != std::string::npos) return true;
    if (f.err != ENOMEM && f.err != EREMOTEIO) return false;
    if (f.hca_limit_in_log) return true;
    // Allocations that pin no user memory: an ENOMEM from them is the device's (or its UAR space's) limit.
    const std::string_view o = hca_object(f.call);
    return f.err == ENOMEM && (o == "pd" || o == "uar" || o == "devx") && f.call != "efa_reg_mr";
  }

  void hca_resources() {
    const std::string_view o = hca_object(f.call);
    if (!e.rdma_device_list.empty()) d.evidence.push_back("RDMA devices of the node: " + e.rdma_device_list);
    if (!f.detail.empty()) d.evidence.push_back(fmt::format("firmware status: {}", f.detail));
    const bool uar = o == "uar";
    set(cause::hca_resources, f.detail.find("limits exceeded") != std::string::npos,
        fmt::format("{} failed{}: the HCA refused another {} object (its per-device limit, or on ConnectX the UAR "
                    "space of the BAR); this pins no memory, so RLIMIT_MEMLOCK and max_map_count do not matter",
                    call_or(f.call), f.err ? fmt::format(" with {}", errno_name(f.err)) : std::string(),
                    o.empty() ? std::string_view("firmware") : o),
        uar ? "the UAR space ran out (many processes per HCA): raise PF_LOG_BAR_SIZE with mlxconfig and reboot, or "
              "run fewer ranks per HCA (openucx/ucx #6049)"
            : "compare `rdma resource show` (objects in use) with `ibv_devinfo -v` (max_qp, max_cq, max_mr, max_pd) on "
              "that node; reduce the objects the job creates (fewer processes or connections per HCA, UCX_TLS without "
              "rc for many peers, smaller FI_VERBS_TX_SIZE/RX_SIZE) or spread ranks over more HCAs",
        k_tcp_fallback);
  }

  void enomem() {
    limit_lines();
    resource_lines();
    cma_lines();
    const std::string call = call_or(f.call);
    const bool container = e.in_container.value_or(false);
    if (is_ofi_family(f)) {
      d.evidence.push_back(
          "EFA also limits the host pages one device can register (ofiwg/libfabric #9739): with an "
          "unlimited memlock limit that limit is the next suspect");
    }
    if (f.transport == "kernel" && f.call == "efa_reg_mr") {
      // The efa driver's REG_MR admin command failed: the pages were pinned and charged already, the device refused.
      set(cause::pinning_resources, e.memlock_soft.has_value(),
          fmt::format("the efa kernel driver's REG_MR command failed with ENOMEM on {}: the pages were already pinned "
                      "(memlock passed), the EFA device refused more registered pages",
                      f.provider.empty() ? "the device" : f.provider),
          std::string(k_efa_pages_fix), k_net_plugin_fallback);
      return;
    }
    // What pinning ran out of, once the memlock limit is out of the picture.
    const std::string what = is_ofi_family(f) ? "the EFA device's limit on registered host pages"
                             : cma_suspect()
                                 ? "long-term pinning of pages that sit in CMA pageblocks and cannot be migrated"
                                 : fmt::format("memory, max_map_count, hugepages{}",
                                               f.gpu_buffer.value_or(false) ? ", BAR1" : "");
    if (bypasses_memlock()) {
      set(cause::pinning_resources, true,
          fmt::format("{} got ENOMEM with CAP_IPC_LOCK, which skips the memlock limit: the kernel could not pin "
                      "the pages ({})",
                      call, what),
          pinning_fix(), k_tcp_fallback);
      return;
    }
    if (!e.memlock_soft) {
      if (container || is_queue_call(f.call)) {
        set(cause::memlock, false,
            fmt::format("{} got ENOMEM{}: the queue/registration memory must be locked and RLIMIT_MEMLOCK (or "
                        "a missing CAP_IPC_LOCK) is the usual limit; the task's limit is not known here",
                        call, container ? " in a container" : ""),
            memlock_fix(), k_tcp_fallback);
        return;
      }
      set(cause::memlock, false,
          fmt::format("{} got ENOMEM: pinned memory is charged to RLIMIT_MEMLOCK (soft), the usual cause; the "
                      "failed task's limit is not known here",
                      call),
          memlock_fix(), k_tcp_fallback);
      return;
    }
    const std::uint64_t soft = *e.memlock_soft;
    if (soft == k_unlimited) {
      set(cause::pinning_resources, true,
          fmt::format("{} got ENOMEM although RLIMIT_MEMLOCK is unlimited: the kernel could not pin the pages ({})",
                      call, what),
          pinning_fix(), k_tcp_fallback);
      return;
    }
    if (f.size && *f.size > soft) {
      set(cause::memlock, true,
          fmt::format("registration of {} needs locked memory but {} is {}", format_bytes(*f.size), whose_limit(),
                      limit_text(soft)),
          memlock_fix(), k_tcp_fallback);
      return;
    }
    // A limit at or above physical memory cannot be what stopped the pinning.
    if (e.mem_total && soft >= *e.mem_total) {
      set(cause::pinning_resources, true,
          fmt::format("{} got ENOMEM with RLIMIT_MEMLOCK {} (not below MemTotal {}): the kernel could not pin "
                      "the pages",
                      call, limit_text(soft), format_bytes(*e.mem_total)),
          pinning_fix(), k_tcp_fallback);
      return;
    }
    // Finite and below RAM: every MR of the process counts against it (pinned_vm), so NCCL's many buffers add
    // up past it even when each one fits. NCCL's documentation asks for unlimited.
    set(cause::memlock, true,
        fmt::format("{} got ENOMEM and {} is {}: all of a process's registrations count against it, and NCCL "
                    "needs unlimited",
                    call, whose_limit(), limit_text(soft)),
        memlock_fix(), k_tcp_fallback);
  }

  void eperm() {
    limit_lines();
    const bool zero = e.memlock_soft && *e.memlock_soft == 0;
    const bool no_cap = e.cap_ipc_lock && !*e.cap_ipc_lock;
    const bool container = e.in_container.value_or(false);
    std::string why;
    if (zero) {
      why = "RLIMIT_MEMLOCK soft limit is 0 and without CAP_IPC_LOCK the kernel refuses to pin any page";
    } else if (no_cap && container) {
      why = "the container has no CAP_IPC_LOCK and the kernel refuses to pin pages";
    } else {
      why = "the kernel refuses to pin pages when RLIMIT_MEMLOCK is 0 and the process has no CAP_IPC_LOCK";
    }
    set(cause::capability, zero || no_cap, fmt::format("{} got EPERM: {}", call_or(f.call), why),
        container || (no_cap && !zero)
            ? container_memlock_fix(e.runtime)
            : std::string("give the task a memlock limit above 0: ") + std::string(k_memlock_fix_slurm),
        k_tcp_fallback);
  }

  void efault() {
    gpu_lines();
    version_lines();
    if (f.gpu_buffer && !*f.gpu_buffer) {
      set(cause::unknown, false,
          fmt::format("{} got EFAULT for host memory: the buffer is not mapped (a bug in the caller, or memory "
                      "freed before registration)",
                      call_or(f.call)),
          "run `mrcheck probe mr` on the node; if it passes, report the failing application's buffer handling",
          k_tcp_fallback);
      return;
    }
    if (!f.gpu_buffer) {  // neither the log nor the node says what memory it was
      set(cause::unknown, false,
          fmt::format("{} got EFAULT: the buffer was not mapped for the device; the log does not say whether it is "
                      "GPU memory (then no peer-memory client, nvidia_peermem, or DMA-BUF claimed it) or host memory "
                      "(then it was not mapped or was freed before registration)",
                      call_or(f.call)),
          "run `mrcheck probe mr --gpu` on the node: it registers host and GPU memory and names which fails",
          k_tcp_fallback);
      return;
    }
    if (e.peer_memory && *e.peer_memory && e.peer_memory_client && !*e.peer_memory_client) {
      set(cause::gpu_peer_memory, true,
          fmt::format("{} got EFAULT: nvidia_peermem is loaded but no nv_mem peer-memory client is registered "
                      "(/sys/kernel/mm/memory_peers/nv_mem absent), so no one claims the GPU buffer; NCCL still "
                      "takes the peermem path because it only checks that the module is loaded",
                      call_or(f.call)),
          "reload nvidia-peermem after the MLNX/DOCA-OFED kernel stack is up (`modprobe -r nvidia-peermem; modprobe "
          "nvidia-peermem`) and check /sys/kernel/mm/memory_peers/nv_mem; or use DMA-BUF (open GPU kernel "
          "modules, NCCL_DMABUF_ENABLE=1)",
          k_gdr_fallback);
      return;
    }
    if (e.peer_memory && *e.peer_memory) {
      set(cause::gpu_peer_memory, false,
          fmt::format("{} got EFAULT although a peer-memory client is loaded: the GPU buffer was not claimed "
                      "(cuMem memory without gpuDirectRDMACapable, mscclpp #657, or nvidia_peermem not matching "
                      "the driver)",
                      call_or(f.call)),
          "check that nvidia_peermem's version equals the NVIDIA driver's (reload it after driver updates) and "
          "run `mrcheck probe mr --gpu`; or use DMA-BUF (open GPU kernel modules, NCCL_DMABUF_ENABLE=1)",
          k_gdr_fallback);
      return;
    }
    const bool inbox = e.kernel_stack == rdma_flavour::inbox;
    std::string fix;
    if (inbox || e.driver_flavour == nvidia_flavour::open) {
      fix =
          "use DMA-BUF: open GPU kernel modules, kernel >= 5.12, rdma-core >= 34, NCCL_DMABUF_ENABLE=1 (the inbox "
          "RDMA stack cannot load nvidia-peermem); or install MLNX/DOCA-OFED and `modprobe nvidia-peermem`";
    } else {
      fix =
          "`modprobe nvidia-peermem` (needs the MLNX/DOCA-OFED kernel stack), or use DMA-BUF with the open GPU "
          "kernel modules (kernel >= 5.12, rdma-core >= 34, NCCL_DMABUF_ENABLE=1)";
    }
    set(cause::gpu_peer_memory, e.peer_memory.has_value() && !*e.peer_memory,
        fmt::format("{} got EFAULT: a GPU buffer can only be registered through a peer-memory client "
                    "(nvidia_peermem) or DMA-BUF, and {}",
                    call_or(f.call),
                    e.peer_memory ? "no peer-memory client is loaded" : "none was confirmed on this node"),
        std::move(fix), k_gdr_fallback);
  }

  std::string stack_mismatch_text() const {
    return fmt::format("the kernel RDMA stack is {}{}{} but user-space rdma-core{}{} is {}", to_string(e.kernel_stack),
                       e.kernel_stack_detail.empty() ? "" : " (",
                       e.kernel_stack_detail.empty() ? "" : e.kernel_stack_detail + ")",
                       e.rdma_core_version.empty() ? "" : " ", e.rdma_core_version, to_string(e.user_stack));
  }

  std::string stack_mismatch_fix() const {
    if (e.kernel_stack == rdma_flavour::ofed) {
      return "install the rdma-core/libibverbs that ships with the MLNX/DOCA-OFED kernel modules (same release), or "
             "remove OFED and use the distribution's stack on both sides";
    }
    return "rebuild/reinstall the MLNX/DOCA-OFED kernel modules for this kernel (DKMS) so they match its user space, "
           "or "
           "return to the distribution's rdma-core";
  }

  bool mismatch() const {
    return e.kernel_stack != rdma_flavour::unknown && e.user_stack != rdma_flavour::unknown &&
           e.kernel_stack != e.user_stack;
  }

  void einval() {
    version_lines();
    gpu_lines();
    if (is_ofi_family(f)) {
      if (is_registration(f.call)) {
        // awsome-distributed-ai #203: libfabric of EFA installers before 1.29.1 with NCCL >= 2.19.
        set(cause::rdma_stack_mismatch, false,
            fmt::format("{} got EINVAL under aws-ofi-nccl: the known incompatibility of the libfabric from EFA "
                        "installers before 1.29.1 with NCCL 2.19 and later (CUDA sync memops)",
                        call_or(f.call)),
            "set FI_EFA_SET_CUDA_SYNC_MEMOPS=0, or upgrade the EFA installer to 1.29.1 or later "
            "(awslabs/awsome-distributed-ai #203); `mrcheck report` shows the libfabric and aws-ofi-nccl versions",
            k_net_plugin_fallback);
        return;
      }
      set(cause::unknown, false,
          fmt::format("{} got EINVAL from libfabric: the provider rejected the request (a libfabric or aws-ofi-nccl "
                      "that does not match the EFA driver, or an EFA device not usable from this process)",
                      call_or(f.call)),
          "check `fi_info -p efa -t FI_EP_RDM` on the node and that libfabric and aws-ofi-nccl come from one EFA "
          "installer (`mrcheck report` lists their versions)",
          k_net_plugin_fallback);
      return;
    }
    if (mismatch()) {
      set(cause::rdma_stack_mismatch, true, fmt::format("{} got EINVAL and {}", call_or(f.call), stack_mismatch_text()),
          stack_mismatch_fix(), k_tcp_fallback);
      return;
    }
    if (f.call == "ibv_modify_qp") {
      set(cause::unknown, false,
          "ibv_modify_qp got EINVAL: the QP attributes do not fit the port (on RoCE usually the GID index, on IB a "
          "port that is not ACTIVE)",
          "check the port state (`mrcheck report`, ibstat) and, on RoCE, set NCCL_IB_GID_INDEX to a RoCE v2 GID",
          k_tcp_fallback);
      return;
    }
    set(cause::unknown, false,
        fmt::format("{} got EINVAL: the kernel rejected the arguments (address vs iova page offset, access flags "
                    "the device does not support, zero or overflowing size); NCCL's calls are page-aligned, so "
                    "this usually points at the driver stack",
                    call_or(f.call)),
        "run `mrcheck report` to check mlx5_core vs rdma-core vs NVIDIA driver; as an experiment set "
        "NCCL_IB_PCI_RELAXED_ORDERING=0 (it did not help in NVIDIA/nccl #1842)",
        k_tcp_fallback);
  }

  void eopnotsupp() {
    version_lines();
    gpu_lines();
    if (is_dmabuf_call(f.call)) {
      std::string why;
      bool confirmed = false;
      if (e.has_dmabuf_mr && !*e.has_dmabuf_mr) {
        why = "; this rdma-core lacks ibv_reg_dmabuf_mr (IBVERBS_1.12, rdma-core >= 34)";
        confirmed = true;
      } else if (e.driver_flavour == nvidia_flavour::proprietary) {
        why = "; the NVIDIA driver is the proprietary flavour, DMA-BUF needs the open kernel modules";
        confirmed = true;
      }
      set(cause::dmabuf_unsupported, confirmed,
          fmt::format("{} got {}: the kernel, rdma-core or GPU driver does not support DMA-BUF registration{}", f.call,
                      errno_name(f.err), why),
          "set NCCL_DMABUF_ENABLE=0 (NCCL then uses nvidia-peermem if loaded), or move to kernel >= 5.12, rdma-core "
          ">= 34 and the open GPU kernel modules (NVIDIA/nccl #778)",
          k_gdr_fallback);
      return;
    }
    if (mismatch()) {
      set(cause::rdma_stack_mismatch, true,
          fmt::format("{} got {} and {}", call_or(f.call), errno_name(f.err), stack_mismatch_text()),
          stack_mismatch_fix(), k_tcp_fallback);
      return;
    }
    set(cause::unknown, false,
        fmt::format("{} got {}: the provider or kernel does not implement this request (no matching libibverbs "
                    "provider for the device, or an access flag such as ODP the device lacks)",
                    call_or(f.call), errno_name(f.err)),
        "run `mrcheck report` to check that the rdma-core provider (libmlx5) matches the kernel driver",
        k_tcp_fallback);
  }

  // ENODEV from a call on a device that is already open (modify_qp, create_qp): the device exists; its port or
  // GID does not work for this QP (NVIDIA/nccl #925).
  void enodev_on_open_device() {
    version_lines();
    if (e.rdma_devices) d.evidence.push_back(fmt::format("RDMA devices in /sys/class/infiniband: {}", *e.rdma_devices));
    set(cause::unknown, false,
        fmt::format("{} got {} on a device NCCL had already opened: the device exists, but the port or GID the QP "
                    "was moved to is not usable (a port that is down, on RoCE a GID index with no address, or the "
                    "netdev missing from the container's network namespace)",
                    call_or(f.call), errno_name(f.err)),
        "check port state and GIDs (`mrcheck report`, `ibv_devinfo -v`); on RoCE set NCCL_IB_GID_INDEX to a RoCE v2 "
        "GID with an address, and run containers with the host network namespace",
        k_tcp_fallback);
  }

  void efa_not_found() {
    const bool container = e.in_container.value_or(false);
    if (e.rdma_devices) d.evidence.push_back(fmt::format("RDMA devices in /sys/class/infiniband: {}", *e.rdma_devices));
    if (container) d.evidence.push_back("running in a container");
    set(cause::no_rdma_device, e.rdma_devices.has_value() && *e.rdma_devices == 0,
        fmt::format("libfabric found no usable EFA provider ({}): no EFA device is visible to the process (a "
                    "container started without /dev/infiniband, or no EFA interface attached to the instance)",
                    f.err ? errno_text(f.err) : std::string("no provider")),
        "pass the EFA devices into the container (docker --device=/dev/infiniband/uverbsN for each, Kubernetes "
        "vpc.amazonaws.com/efa resources) and check `fi_info -p efa -t FI_EP_RDM` inside it (aws/aws-ofi-nccl #1020)",
        k_net_plugin_fallback);
  }

  // errno 524 is the kernel's ENOTSUPP (include/linux/errno.h), not a user-space errno: glibc prints "Unknown error
  // 524". From ibv_reg_dmabuf_mr on GB200 it means the GPU memory was exported with the PCIe (Direct-NIC) mapping
  // and imported through the generic verb, which needs the host mapping (openucx/ucx PR #11571).
  void enotsupp_kernel() {
    version_lines();
    gpu_lines();
    if (is_dmabuf_call(f.call)) {
      set(cause::dmabuf_unsupported, false,
          fmt::format(
              "{} got errno 524, the kernel's internal ENOTSUPP: the RDMA driver refused this DMA-BUF. On GB200 "
              "with Direct-NIC the GPU memory was exported with the PCIe mapping, which only the data-direct "
              "registration accepts, while the generic verb needs the host mapping (openucx/ucx PR #11571)",
              f.call),
          "check that the Direct-NIC (data-direct) port is up (`ibv_devinfo`); use a UCX/NIXL release that matches the "
          "dmabuf mapping to the registration verb (openucx/ucx PR #11571), or turn DMA-BUF off in the library that "
          "failed (NCCL: NCCL_DMABUF_ENABLE=0) so that it registers through nvidia-peermem",
          k_gdr_fallback);
      return;
    }
    set(cause::unknown, false,
        fmt::format("{} got errno 524, the kernel's internal ENOTSUPP leaking to user space: the driver does not "
                    "support this request",
                    call_or(f.call)),
        "run `mrcheck report` to compare the kernel RDMA driver with rdma-core and the NVIDIA driver", k_tcp_fallback);
  }

  // A WARN outside the taxonomy that NCCL failed on. The cause stays unknown; the summary and the fix say what the
  // library's message means where it is a known one.
  void fatal_warning() {
    if (f.err != 0) d.evidence.push_back(fmt::format("{} failed with {}", call_or(f.call), errno_text(f.err)));
    const std::string_view det = f.detail;
    if (fatal_warning_beyond_nccl()) return;
    if (f.call == "cuda" && det == "out of memory") {
      set(cause::gpu_out_of_memory, false,
          "NCCL could not allocate GPU memory for its buffers (CUDA 'out of memory'): the GPU was full when NCCL set "
          "up a connection; this is GPU memory, not pinned host memory or RLIMIT_MEMLOCK",
          "leave GPU memory for NCCL: lower the framework's share (e.g. PyTorch's caching allocator, vLLM "
          "gpu_memory_utilization) or shrink NCCL's buffers (NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS, NCCL_NVLS_ENABLE=0)",
          "");
      return;
    }
    if (f.call == "cuda") {
      set(cause::unknown, false,
          fmt::format("a CUDA call inside NCCL failed ('{}') and NCCL gave up", det.empty() ? "?" : det),
          "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC; check with `mrcheck report` that the CUDA driver "
          "matches the runtime and that each rank sees the GPU it expects",
          "");
      return;
    }
    if (f.call == "socket" || f.call == "connect") {
      const bool family = f.err == EAFNOSUPPORT;
      set(cause::unknown, false,
          family ? "NCCL could not create a socket: the address family of the interface it chose is not available "
                   "(no usable IPv4/IPv6 interface, or IPv6 disabled)"
                 : fmt::format("NCCL's socket call {} failed{}: bootstrap or socket transport could not reach a peer",
                               f.call, f.err ? fmt::format(" with {}", errno_name(f.err)) : std::string()),
          family ? "set NCCL_SOCKET_IFNAME to an interface with an address (and NCCL_SOCKET_FAMILY=AF_INET where IPv6 "
                   "is off); check that the node has an IP interface besides lo (NVIDIA/nccl #210)"
                 : "read the peer's log first (it often died earlier); check NCCL_SOCKET_IFNAME and firewalls between "
                   "the nodes",
          "");
      return;
    }
    if (f.call == "realpath") {
      set(cause::unknown, false,
          "NCCL could not resolve the GPU's PCI path in /sys while building the topology (WSL2, or a container that "
          "does not show the host's /sys/class/pci_bus)",
          "run where /sys shows the GPU's PCI device (not WSL2), or give NCCL a topology file (NCCL_TOPO_FILE) "
          "(NVIDIA/nccl #573)",
          "");
      return;
    }
    set(cause::unknown, false,
        fmt::format("NCCL failed after a warning mrcheck has no rule for{}",
                    f.err ? fmt::format(" ({})", errno_text(f.err)) : ""),
        "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV to see the failing call; run `mrcheck report` "
        "on that node",
        f.err ? k_tcp_fallback : std::string_view());
  }

  // The fatal warnings of the open-world rows (src/nccl/form_table.cpp, m_fatal_warn): MNNVL, sockets, CUDA limits.
  bool fatal_warning_beyond_nccl() {
    const std::string_view det = f.detail;
    if (f.err == EMFILE || f.err == ENFILE) {
      set(cause::open_files, false,
          fmt::format("NCCL failed with {}: the process (RLIMIT_NOFILE) or the system ran out of file descriptors",
                      errno_text(f.err)),
          "raise the job's open-files limit (`ulimit -n`, Slurm PropagateResourceLimits NOFILE, LimitNOFILE= of "
          "slurmd)",
          "");
      return true;
    }
    if (f.call == "mnnvl" || (f.call == "cuMemCreate" && det == "CUDA_ERROR_NOT_PERMITTED")) {
      set(cause::imex_channel, false,
          "NCCL (or the program) could not create or import NVLink fabric memory (MNNVL): the job has no IMEX channel "
          "(/dev/nvidia-caps-imex-channels) or the IMEX daemon's nodes are not connected; since NCCL 2.27.3 that is "
          "fatal",
          "give the job an IMEX channel (Slurm switch/nvidia_imex, or a ComputeDomain on Kubernetes) and check "
          "`nvidia-imex-ctl -N`; NCCL_MNNVL_ENABLE=0 runs without MNNVL",
          "");
      return true;
    }
    if (f.call == "libmlx5_symbol") {
      set(cause::rdma_stack_mismatch, false,
          "the program's RDMA user space is older than what loads it: libmlx5 lacks a symbol the caller (NCCL, UCX) "
          "was built against, typically a container's rdma-core older than the library bundled with the framework",
          "update rdma-core (libibverbs1, ibverbs-providers) in the image to the version the framework expects, or "
          "mount the host's RDMA user space into the container",
          "");
      return true;
    }
    if (f.call == "socket_interface") {
      set(cause::socket_interface, false,
          "NCCL found no socket interface for its bootstrap: NCCL_SOCKET_IFNAME names no interface of this node (or "
          "the node has none but lo)",
          "set NCCL_SOCKET_IFNAME to an interface that exists and has an address on every node (`ip -br addr`), or "
          "unset it",
          "");
      return true;
    }
    if (f.call == "net_plugin") {
      set(cause::no_rdma_device, false,
          "NCCL could not initialize the network it was told to use (NCCL_NET): no RDMA device for NET/IB, or a net "
          "plugin that failed to load, and NCCL does not fall back when NCCL_NET is set",
          "check that the node has an HCA (/sys/class/infiniband) and that /dev/infiniband and the plugin are in the "
          "container; on nodes without RDMA unset NCCL_NET (or NCCL_NET=Socket)",
          "");
      return true;
    }
    if (f.call == "no_peermem") {
      set(cause::gpu_peer_memory, false,
          "the library found no peer-memory client (neither nv_peer_mem nor nvidia_peermem is loaded), so it cannot "
          "register GPU memory with the HCA and drops its RDMA transport",
          "`modprobe nvidia-peermem` on the node (MLNX/DOCA-OFED kernel stack), or use DMA-BUF with the open GPU "
          "kernel modules where the library supports it",
          "");
      return true;
    }
    if (f.call == "gdr_pin_buffer") {
      set(cause::gpu_peer_memory, false,
          "UCX's gdrcopy transport could not pin GPU memory: the gdrdrv module (gdrcopy) is not loaded or does not "
          "match the driver",
          "load gdrdrv on the node (`modprobe gdrdrv`, the gdrcopy package), or leave gdrcopy out (UCX_TLS without "
          "gdr_copy)",
          "");
      return true;
    }
    if (f.call == "cuda" && det == "framework: out of memory") {
      set(cause::gpu_out_of_memory, false,
          "the program ran out of GPU memory outside NCCL (the framework's allocator); no RDMA or NCCL setting is "
          "involved",
          "lower the batch size or model share per GPU, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
          "against fragmentation",
          "");
      return true;
    }
    if (f.call == "cuda" && det == "peer mapping resources exhausted") {
      set(cause::gpu_peer_limit, false,
          "CUDA ran out of peer mappings (Cuda failure 711): one GPU can map at most 8 peers, and this process "
          "enables peer access to more (NVIDIA/nccl #1874)",
          "use at most 8 GPUs per process (one process per GPU), or NCCL_P2P_LEVEL / NCCL_P2P_DISABLE=1 for the "
          "extra peers",
          "");
      return true;
    }
    if (f.call == "cuda" && det == "mapping of buffer object failed") {
      set(cause::pinning_resources, false,
          "CUDA could not map NCCL's buffer (Cuda failure 205 in ncclMemAlloc): the GPU's BAR1 or the driver's "
          "mappings are exhausted",
          "check BAR1 free space (`nvidia-smi -q -d MEMORY`) and the driver; NCCL_CUMEM_ENABLE=0 avoids cuMem "
          "buffers",
          "");
      return true;
    }
    return false;
  }

  void no_device() {
    version_lines();
    std::string found;
    if (e.rdma_devices) found = fmt::format(" (this node shows {} RDMA device(s))", *e.rdma_devices);
    if (e.rdma_devices) d.evidence.push_back(fmt::format("RDMA devices in /sys/class/infiniband: {}", *e.rdma_devices));
    set(cause::no_rdma_device, e.rdma_devices.has_value() && *e.rdma_devices == 0,
        fmt::format("NCCL found no usable RDMA device and uses TCP sockets{}", found),
        "check that the node has an HCA (/sys/class/infiniband), that mlx5_ib and ib_uverbs are loaded, that "
        "/dev/infiniband is passed into containers, and that NCCL_IB_HCA does not filter every device out",
        "");
  }

  void completion() {
    const int st = f.wc_status.value_or(-1);
    std::string_view name = wc_status_name(st);
    std::string head = fmt::format("RDMA completion error {} ({}){}", name.empty() ? "status" : name, st,
                                   f.peer.empty() ? "" : fmt::format(" with peer {}", f.peer));
    d.evidence.push_back(head);
    std::string summary;
    std::string fix;
    switch (st) {
      case 12:  // RETRY_EXC_ERR
      case 13:  // RNR_RETRY_EXC_ERR
      case 20:  // RESP_TIMEOUT_ERR
        summary = head +
                  ": the peer stopped answering (its process died first, a link went down, or the fabric "
                  "does not route between the ports)";
        fix =
            "read the peer's log first (it often failed earlier), then check port state on both nodes (`mrcheck "
            "report`, ibstat); on RoCE check NCCL_IB_GID_INDEX and NCCL_IB_TC";
        break;
      case 4:   // LOC_PROT_ERR
      case 8:   // LOC_ACCESS_ERR
      case 10:  // REM_ACCESS_ERR
        summary = head +
                  ": a memory region was not accessible as registered (with GPU buffers: GPUDirect RDMA "
                  "through nvidia_peermem/DMA-BUF not working)";
        fix =
            "run `mrcheck probe mr --gpu` on both nodes; as an experiment NCCL_NET_GDR_LEVEL=LOC to take GPU "
            "buffers off the wire";
        break;
      case 5:  // WR_FLUSH_ERR
        summary = head + ": the queue pair had already failed; this is a consequence of an earlier error";
        fix = "look for the first completion error or WARN before this line, on this rank and on the peer";
        break;
      default:
        summary = head + ": the RDMA transfer failed";
        fix = "read the peer's log and check port state on both nodes (`mrcheck report`, ibstat)";
        break;
    }
    set(cause::unknown, false, std::move(summary), std::move(fix), k_tcp_fallback);
  }
};

// The fallback must fit the transport: NCCL_IB_DISABLE=1 does nothing under aws-ofi-nccl or in UCX.
diagnosis finish(diagnosis d, const failure& f) {
  if (d.fallback.empty()) return d;
  if (is_ofi_family(f)) {
    d.fallback = std::string(k_net_plugin_fallback);
  } else if (f.transport == "ucx") {
    d.fallback = std::string(k_ucx_fallback);
  }
  return d;
}

}  // namespace

bool is_ofi_family(const failure& f) {
  return f.transport == "ofi" || f.transport == "libfabric" ||
         (f.transport == "kernel" && f.provider.starts_with("efa"));
}

std::string_view to_string(cause c) {
  switch (c) {
    case cause::memlock: return "memlock";
    case cause::capability: return "capability";
    case cause::pinning_resources: return "pinning_resources";
    case cause::rdma_stack_mismatch: return "rdma_stack_mismatch";
    case cause::gpu_peer_memory: return "gpu_peer_memory";
    case cause::dmabuf_unsupported: return "dmabuf_unsupported";
    case cause::duplicate_gpu: return "duplicate_gpu";
    case cause::no_rdma_device: return "no_rdma_device";
    case cause::unknown: return "unknown";
    case cause::hca_resources: return "hca_resources";
    case cause::gpu_out_of_memory: return "gpu_out_of_memory";
    case cause::imex_channel: return "imex_channel";
    case cause::socket_interface: return "socket_interface";
    case cause::stack_limit: return "stack_limit";
    case cause::open_files: return "open_files";
    case cause::gpu_peer_limit: return "gpu_peer_limit";
  }
  return "unknown";
}

std::string_view hca_object(std::string_view call) {
  auto has = [&](std::string_view w) { return call.find(w) != std::string_view::npos; };
  if (has("devx_alloc_uar") || has("alloc_uar") || call == "ibv_open_device") return "uar";
  if (has("devx_obj_create")) return "devx";
  if (has("alloc_pd")) return "pd";
  if (has("create_qp") || call == "fi_enable" || call == "fi_endpoint") return "qp";
  if (has("create_cq") || call == "fi_cq_open") return "cq";
  if (has("mkey") || has("reg_mr") || has("mr_reg") || has("reg_dmabuf")) return "mkey";
  return {};
}

std::string_view to_string(rdma_flavour f) {
  switch (f) {
    case rdma_flavour::inbox: return "inbox";
    case rdma_flavour::ofed: return "MLNX/DOCA-OFED";
    case rdma_flavour::unknown: return "unknown";
  }
  return "unknown";
}

diagnosis diagnose(const failure& f, const node_evidence& given) {
  // A limit the failing process printed itself (UCX: "current: 64 kbytes") is the task's own, better than the
  // limit of whatever process explain runs in.
  node_evidence with_log_limit;
  const bool use_log_limit = f.log_memlock && !given.memlock_soft;
  if (use_log_limit) {
    with_log_limit = given;
    with_log_limit.memlock_soft = *f.log_memlock;
    with_log_limit.memlock_source = "the failed process (its own message)";
  }
  const node_evidence& e = use_log_limit ? with_log_limit : given;
  builder b{f, e, {}};
  switch (f.what) {
    case failure::kind::duplicate_gpu:
      b.set(cause::duplicate_gpu, true,
            "two ranks of one communicator run on the same GPU; NCCL refuses that (NVIDIA/nccl #418)",
            "give each rank its own GPU: srun --gpus-per-task=1 (or --gpu-bind=single:1, CUDA_VISIBLE_DEVICES per "
            "local rank) and no more tasks per node than GPUs",
            "");
      return finish(std::move(b.d), f);
    case failure::kind::no_device: b.no_device(); return finish(std::move(b.d), f);
    case failure::kind::completion_error: b.completion(); return finish(std::move(b.d), f);
    case failure::kind::system_error:
      b.set(cause::unknown, false,
            "NCCL reported a fatal error ('unhandled system error' or similar) but no preceding warning names the "
            "failed call",
            "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the failing call and errno, or run "
            "`mrcheck probe mr` on the node",
            k_tcp_fallback);
      return finish(std::move(b.d), f);
    case failure::kind::fatal_warning: b.fatal_warning(); return finish(std::move(b.d), f);
    case failure::kind::call: break;
  }
  b.errno_line();
  if (b.hca_limit()) {
    b.hca_resources();
    return finish(std::move(b.d), f);
  }
  switch (f.err) {
    case ENOMEM: b.enomem(); break;
    case EPERM: b.eperm(); break;
    case EFAULT: b.efault(); break;
    case EINVAL: b.einval(); break;
    case EOPNOTSUPP:
    case EPROTONOSUPPORT: b.eopnotsupp(); break;
    case ENODEV:
    case ENXIO:
      if (!f.call.empty() && !is_device_lookup(f.call)) {
        b.enodev_on_open_device();
      } else {
        b.no_device();
      }
      break;
    case ENODATA:
      if (f.call == "fi_getinfo") {
        b.efa_not_found();
        break;
      }
      b.set(cause::unknown, false, fmt::format("{} failed with {}", call_or(f.call), errno_text(f.err)),
            "run `mrcheck report` and `mrcheck probe mr` on that node", k_tcp_fallback);
      break;
    case k_kernel_enotsupp: b.enotsupp_kernel(); break;
    case EMFILE:
    case ENFILE:
      b.set(cause::open_files, false,
            fmt::format("{} failed with {}: the process (RLIMIT_NOFILE) or the system ran out of file descriptors; "
                        "each RDMA context, QP and socket takes some",
                        call_or(f.call), errno_text(f.err)),
            "raise the job's open-files limit (`ulimit -n`, Slurm PropagateResourceLimits NOFILE, "
            "LimitNOFILE= of slurmd) and check `mrcheck report` for the NOFILE of the task",
            "");
      break;
    case 0:
      if (f.call == "fi_getinfo") {
        b.efa_not_found();
        break;
      }
      if (f.call == "ibv_open_device" || f.call == "ibv_get_device_list") {
        // NCCL prints no errno here; the device exists in sysfs but cannot be opened: /dev/infiniband missing or
        // not accessible (a container without --device=/dev/infiniband), or the provider library is absent.
        b.no_device();
        b.d.summary = fmt::format(
            "{} failed: the RDMA device is listed but cannot be opened (/dev/infiniband not "
            "passed into the container, permissions, or no libibverbs provider for it)",
            f.call);
        break;
      }
      if (f.gpu_buffer.value_or(false) && is_registration(f.call)) {
        // A GPU buffer whose registration fails without an errno: the usual cause is that no peer-memory client
        // claims it (EFAULT when the errno is printed).
        b.gpu_lines();
        b.set(cause::gpu_peer_memory, false,
              fmt::format("{} of a GPU buffer failed (no errno printed): a GPU buffer can only be registered through "
                          "a peer-memory client (nvidia_peermem) or DMA-BUF",
                          call_or(f.call)),
              "check that nvidia_peermem is loaded (`lsmod | grep peermem`, or the nv_peer_mem service) and matches "
              "the driver; or use DMA-BUF (open GPU kernel modules, kernel >= 5.12, rdma-core >= 34)",
              k_gdr_fallback);
        break;
      }
      b.limit_lines();
      b.set(cause::unknown, false, fmt::format("{} failed and the log does not say with which errno", call_or(f.call)),
            is_registration(f.call) || is_queue_call(f.call)
                ? "run `mrcheck probe mr` as the job user on that node (registers memory the way NCCL does and "
                  "names the errno), or rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
                : "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the errno",
            k_tcp_fallback);
      break;
    default:
      b.set(cause::unknown, false, fmt::format("{} failed with {}", call_or(f.call), errno_text(f.err)),
            "run `mrcheck report` and `mrcheck probe mr` on that node", k_tcp_fallback);
      break;
  }
  return finish(std::move(b.d), f);
}

void to_json(nlohmann::json& j, const diagnosis& d) {
  j = nlohmann::json{{"cause", to_string(d.what)},
                     {"confirmed", d.confirmed},
                     {"summary", d.summary},
                     {"evidence", d.evidence},
                     {"fix", d.fix},
                     {"fallback", d.fallback}};
}

}  // namespace mrcheck
