// The cause rows behind diagnose() (src/explain/causes/diagnosis.cpp): each row is
//   (failure kind, errno, call class, memory, evidence predicate) -> (evidence lines, cause, confirmed, summary,
//   fix, fallback)
// and the first row that matches a failure gives its diagnosis. The rows live by family, one file each:
// causes_memory.cpp (ENOMEM, EPERM, the HCA's own limits, open files), causes_gpu.cpp (EFAULT, DMA-BUF, the kernel's
// ENOTSUPP), causes_stack.cpp (EINVAL, EOPNOTSUPP, no device, no errno, the rest), causes_nccl.cpp (NCCL's failures
// without an errno and its fatal warnings), causes_own.cpp (mrcheck's own FAIL lines). What the rows share (evidence lines, predicates, fix texts) is in
// cause_context.cpp. Internal to src/explain/causes/.
#pragma once

#include <mrcheck/diagnosis.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

// Rows are written with designated initializers that leave out the columns they do not use (their defaults:
// any kind of call, any errno, no fallback...). GCC 12 warns about every such row (GCC bug 96868, fixed in 13);
// this header is included only by the files that hold rows.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace mrcheck::cause_rows {

// The kernel's default vm.max_map_count (DEFAULT_MAX_MAP_COUNT = 65530): every registration can split VMAs
// (madvise DONTFORK), so a node at the default runs out first.
inline constexpr std::uint64_t k_default_max_map_count = 65530;

// The kernel's ENOTSUPP (include/linux/errno.h), internal to the kernel but seen from ibv_reg_dmabuf_mr.
inline constexpr int k_kernel_enotsupp = 524;

inline constexpr std::string_view k_memlock_fix_slurm =
    "set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf and LimitMEMLOCK=infinity for slurmd (systemd "
    "drop-in), restart slurmd; to test now run `ulimit -l unlimited` in the shell that starts srun";
inline constexpr std::string_view k_tcp_fallback =
    "last resort: NCCL_IB_DISABLE=1 runs NCCL over TCP sockets; the job starts, but inter-node bandwidth drops to "
    "what the Ethernet/IPoIB interface gives (often 5-20x lower) and CPU load rises";
inline constexpr std::string_view k_gdr_fallback =
    "workaround: NCCL_NET_GDR_LEVEL=LOC keeps InfiniBand but stages GPU data through host memory (lower bandwidth, "
    "more host memory pinned); last resort NCCL_IB_DISABLE=1 (TCP sockets, often 5-20x slower)";
// Under a net plugin (aws-ofi-nccl) NCCL never uses its own NET/IB, so NCCL_IB_DISABLE=1 changes nothing;
// NCCL_NET=Socket selects NCCL's socket transport by name (docs/transports.md).
inline constexpr std::string_view k_net_plugin_fallback =
    "last resort: NCCL_NET=Socket makes NCCL use TCP sockets instead of the aws-ofi-nccl plugin (NCCL_IB_DISABLE=1 "
    "does nothing under a net plugin); the job starts, but inter-node bandwidth drops to what the Ethernet "
    "interface gives and CPU load rises";
inline constexpr std::string_view k_ucx_fallback =
    "last resort: UCX_TLS=tcp,self,sm,cuda_copy,cuda_ipc keeps UCX off RDMA; the job starts, but inter-node "
    "bandwidth drops to what the Ethernet interface gives";
// EFA's own limit (libfabric #9739): the device can register only so many host pages; huge pages cover the same
// memory with far fewer pages.
inline constexpr std::string_view k_efa_pages_fix =
    "the EFA device limits how many host pages it can register (ofiwg/libfabric #9739): back large buffers with huge "
    "pages (reserve vm.nr_hugepages; libfabric's EFA provider uses them for its own buffers unless "
    "FI_EFA_USE_HUGE_PAGE=0) or register less memory at once";

// Call classes (the `call` column).
bool is_registration(std::string_view call);
bool is_dmabuf_call(std::string_view call);
bool is_queue_call(std::string_view call);
bool is_device_lookup(std::string_view call);

std::string limit_text(std::uint64_t v);
std::string call_or(std::string_view call);  // "the registration" for an unknown call
std::string errno_text(int err);             // "ENOMEM 12 (Cannot allocate memory)"

// What a row reads: the failure and the evidence. Its helpers are the predicates and texts rows share.
struct case_ctx {
  const failure& f;
  const node_evidence& e;

  std::string call() const { return call_or(f.call); }
  bool container() const { return e.in_container.value_or(false); }
  bool ofi() const { return is_ofi_family(f); }
  bool bypasses_memlock() const;
  bool cma_suspect() const;
  bool hca_limit() const;
  bool mismatch() const;
  std::string whose_limit() const;
  std::string memlock_fix() const;
  std::string pinning_fix() const;
  std::string pinning_what() const;  // what pinning ran out of, once the memlock limit is out of the picture
  std::string stack_mismatch_text() const;
  std::string stack_mismatch_fix() const;
};

// Evidence lines a row adds, in the order it lists them.
enum class lines : std::uint8_t {
  none,
  call_errno,      // "<call> failed with <errno>" (or "the errno is not known"), then the size
  warn_errno,      // "<call> failed with <errno>" when an errno is known
  limits,          // RLIMIT_MEMLOCK, the hop, CAP_IPC_LOCK, the container
  resources,       // max_map_count, hugepages, MemAvailable, BAR1
  cma,             // CmaTotal / CmaFree
  efa_pages,       // the EFA host-page limit, on the EFA family only
  versions,        // kernel RDMA stack, rdma-core
  gpu,             // peer memory, NVIDIA driver
  device_count,    // entries in /sys/class/infiniband
  device_list,     // the RDMA devices of the node
  firmware,        // the firmware's status text
  container_only,  // "running in a container" when it is
  completion,      // the completion error's status and peer
};
using line_list = std::array<lines, 5>;
void add_lines(const case_ctx& c, const line_list& which, std::vector<std::string>& out);
// "RDMA completion error IBV_WC_RETRY_EXC_ERR (12) with peer ...": the `completion` line, which its summary repeats.
std::string completion_summary_head(const failure& f);

// A text column: a fixed string, or a function of the case.
struct text {
  std::string_view fixed;
  std::string (*make)(const case_ctx&) = nullptr;
  constexpr text() = default;
  constexpr text(const char* s) : fixed(s) {}
  constexpr text(std::string_view s) : fixed(s) {}
  constexpr text(std::string (*m)(const case_ctx&)) : make(m) {}
  std::string operator()(const case_ctx& c) const { return make ? make(c) : std::string(fixed); }
};

using predicate = bool (*)(const case_ctx&);
inline bool yes(const case_ctx&) { return true; }
inline bool no(const case_ctx&) { return false; }

// The errno column: one or two errnos, or any.
inline constexpr int k_any_errno = -1;
struct errnos {
  int a = k_any_errno;
  int b = k_any_errno;
  constexpr errnos() = default;
  constexpr errnos(int x) : a(x), b(x) {}
  constexpr errnos(int x, int y) : a(x), b(y) {}
  bool match(int err) const { return a == k_any_errno || err == a || err == b; }
};

// The call-class column, with `names` ("a|b", exact) narrowing it further.
enum class calls : std::uint8_t { any, registration, dmabuf, queue, opened_device };
// The memory column: what the failure says about the buffer.
enum class memory : std::uint8_t { any, gpu, host, unknown };

struct cause_row {
  failure::kind kind = failure::kind::call;
  errnos err;
  calls call_class = calls::any;
  std::string_view names;  // "" any; else one of the '|'-separated call names
  memory mem = memory::any;
  predicate when = yes;  // the evidence predicate
  line_list evidence{};
  cause what = cause::unknown;
  predicate confirmed = no;
  text summary;
  text fix;
  std::string_view fallback;
  fix_owner owner = fix_owner::none;  // who fixes it (diagnosis::owner)

  bool match(const case_ctx& c) const;
};

// The families, in the order diagnose() tries them.
std::span<const cause_row> own_rows();  // mrcheck's own FAIL lines (causes_own.cpp)
std::span<const cause_row> nccl_rows();
std::span<const cause_row> memory_rows();
std::span<const cause_row> gpu_rows();
std::span<const cause_row> stack_rows();

}  // namespace mrcheck::cause_rows
