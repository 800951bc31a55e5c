// Diagnosis: one failed verbs call (or NCCL failure line) plus what we know about the node -> the cause, a
// one-line summary with numbers, the evidence behind it and one actionable fix.
//
// This is the single place that knows the errno -> cause table of docs/facts/verbs-and-nccl.md §2. The registration
// probe, the SPANK plugin, the prolog, the NCCL smoke test and `mrcheck explain` all call diagnose(); none of them
// keeps its own copy of these rules.
//
// Inputs are plain values: a `failure` (what failed, with which errno) and a `node_evidence` (what is known
// about the node and the task, every field optional). Missing evidence never makes diagnose() fail: it picks
// the most likely cause for the errno and says, through `confirmed`, whether the evidence backed it.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/container_runtime.h>
#include <mrcheck/facts.h>

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// Stable strings (JSON, logs, tests); README.md's JSON section lists them. Never renumber or rename.
enum class cause {
  memlock,              // RLIMIT_MEMLOCK (soft) too low for the pinned memory
  capability,           // memlock 0 / no CAP_IPC_LOCK (EPERM), or a container without IPC_LOCK
  pinning_resources,    // limit is fine but pinning still failed: max_map_count, hugepages, RAM, BAR1
  rdma_stack_mismatch,  // kernel RDMA modules vs user-space rdma-core vs driver out of step
  gpu_peer_memory,      // GPU buffer that no peer-memory client (nvidia_peermem) claims
  dmabuf_unsupported,   // DMA-BUF registration not supported by kernel/rdma-core/GPU driver
  duplicate_gpu,        // two ranks on one GPU
  no_rdma_device,       // NCCL found no usable RDMA device
  unknown,
  hca_resources,  // the HCA refused an object (PD, UAR, QP, CQ, MKEY): its own limits, not pinned memory
  // Added with the open-world reader (docs/transports.md, "Causes beyond registration"):
  gpu_out_of_memory,  // the GPU was full (CUDA 'out of memory' in NCCL or a framework's OutOfMemoryError)
  imex_channel,       // MNNVL fabric memory refused: no IMEX channel in the job, or the IMEX daemon not connected
  socket_interface,   // NCCL_SOCKET_IFNAME (or the node) leaves NCCL no socket interface
  stack_limit,        // a crash after NCCL warned that RLIMIT_STACK is unlimited
  open_files,         // EMFILE / ENFILE: RLIMIT_NOFILE (or the system's file table) exhausted
  gpu_peer_limit,     // CUDA's peer mappings exhausted (more than 8 peers of one GPU, 'peer mapping resources')
  data_plane,         // RDMA traffic failed on a port or between nodes (link, GID, route, MTU, firewall), as
                      // mrcheck's own data-plane probe reported it (src/checks/data_plane.cpp)
};

inline constexpr std::array<cause, 17> k_all_causes = {cause::memlock,           cause::capability,
                                                       cause::pinning_resources, cause::rdma_stack_mismatch,
                                                       cause::gpu_peer_memory,   cause::dmabuf_unsupported,
                                                       cause::duplicate_gpu,     cause::no_rdma_device,
                                                       cause::unknown,           cause::hca_resources,
                                                       cause::gpu_out_of_memory, cause::imex_channel,
                                                       cause::socket_interface,  cause::stack_limit,
                                                       cause::open_files,        cause::gpu_peer_limit,
                                                       cause::data_plane};

std::string_view to_string(cause c);

// What failed. For a verbs call: its name and errno. For NCCL failures that have no errno (duplicate GPU, no
// device, a completion error) `kind` says which.
struct failure {
  enum class kind {
    call,              // a verbs (or other library) call returned an error; `call` and `err` set when known
    duplicate_gpu,     // NCCL "Duplicate GPU detected"
    no_device,         // NCCL "NET/IB : No device found"
    completion_error,  // NCCL "NET/IB : Got completion from peer ... with error/status=N"; `wc_status` set
    system_error,      // NCCL "unhandled system error" with no preceding warning naming the call
    fatal_warning,     // an NCCL WARN outside the taxonomy that NCCL then failed on (its "-> N" return trace, or
                       // a terminal "unhandled ... error" line): CUDA out of memory, socket creation, topology...
    own_verdict,       // mrcheck's own FAIL line (the plugin, a probe, `mrcheck report`: src/report/check.cpp's
                       // failure_lines): `call` is its check id, `detail` its summary, `fix_given` the fix it names
  };
  kind what = kind::call;
  std::string call;                   // "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_create_cq", ...; "" unknown
  int err = 0;                        // positive errno; 0 when unknown
  std::optional<std::uint64_t> size;  // bytes registered, when the caller knows (the probe does)
  std::optional<bool> gpu_buffer;     // true: cudaMalloc/cuMem memory; false: host memory; nullopt: unknown
  std::optional<int> wc_status;       // ibv_wc_status of a completion error
  std::string peer;                   // completion error: the peer NCCL named ("10.0.0.2<43521>")
  // What carried the failure (docs/transports.md): "" NCCL's NET/IB or another verbs user, "ofi" the aws-ofi-nccl
  // net plugin (NET/OFI), "libfabric" a libfabric provider's own line, "kernel" an RDMA driver's dmesg line,
  // "ucx" UCX. The fix and the fallback depend on it: NCCL_IB_DISABLE=1 does nothing under a net plugin.
  std::string transport;
  std::string provider;                      // libfabric provider or kernel device when printed: "efa", "efa_0"
  std::string detail;                        // fatal_warning: the library's own error text ("out of memory")
  std::optional<std::uint64_t> log_memlock;  // a memlock limit the log line itself printed (UCX: "current: 64 kbytes")
  std::string fix_given;                     // own_verdict: the fix mrcheck's line named ("" when it named none)
  bool hca_limit_in_log = false;  // the same log shows the HCA refusing this kind of object ("limits exceeded")
};

// The HCA object a call creates ("qp", "cq", "pd", "uar", "mkey", "devx"); "" for calls that create none.
// A registration creates an MKEY on mlx5 (an MR on other devices).
std::string_view hca_object(std::string_view call);

// True for the transports of the EFA family (aws-ofi-nccl, libfabric, the efa kernel driver).
bool is_ofi_family(const failure& f);

// Which RDMA stack a part of the node comes from.
enum class rdma_flavour { unknown, inbox, ofed };
std::string_view to_string(rdma_flavour f);

// What is known about the node and the task. Every field is optional: unset means "not known", never "no".
// The memlock values should be the failing task's; when they come from another process (explain reads this
// process or a --root tree) `memlock_source` says so and the evidence line repeats it.
struct node_evidence {
  // Limits of the task (or of `memlock_source`).
  std::optional<std::uint64_t> memlock_soft;  // bytes, k_unlimited for unlimited
  std::optional<std::uint64_t> memlock_hard;
  std::string memlock_source;        // "task 12345", "this shell (pid 77)"; "" = the failing task
  std::string memlock_hop;           // where it was lowered: describe_lowering_hop() (memlock_hop.h),
                                     // "pid 4242 (bash), soft 64 KiB (its parent ... had soft 8 MiB)"
  std::optional<bool> is_root;       // euid 0
  std::optional<bool> cap_ipc_lock;  // CAP_IPC_LOCK in the effective set (bypasses the memlock check)
  std::optional<bool> in_container;
  std::string container_why;  // what in_container rests on, or why a marker file alone was not counted
  container_runtime runtime =
      container_runtime::none;  // which one, for the fix text (src/explain/causes/container_runtime.cpp)

  // Pinning resources.
  std::optional<std::uint64_t> max_map_count;
  std::optional<std::uint64_t> hugepages_total;  // pages
  std::optional<std::uint64_t> hugepages_free;   // pages
  std::optional<std::uint64_t> hugepage_size;    // bytes
  std::optional<std::uint64_t> mem_total;        // bytes
  std::optional<std::uint64_t> mem_available;    // bytes
  std::optional<std::uint64_t> gpu_bar1;         // bytes, smallest BAR1 of the node's GPUs
  std::optional<std::uint64_t> cma_total;        // bytes, /proc/meminfo CmaTotal
  std::optional<std::uint64_t> cma_free;         // bytes, /proc/meminfo CmaFree

  // The RDMA stack.
  rdma_flavour kernel_stack = rdma_flavour::unknown;  // mlx5_core: OFED (version file / taint O) or inbox
  std::string kernel_stack_detail;                    // "mlx5_core 24.10-1.1.4 (out of tree)", "inbox (6.1.0-18)"
  rdma_flavour user_stack = rdma_flavour::unknown;    // rdma-core: MLNX/DOCA build or upstream/distro
  std::string rdma_core_version;                      // "44.0"; "" unknown
  std::optional<bool> has_iova2;                      // ibv_reg_mr_iova2@IBVERBS_1.8 present
  std::optional<bool> has_dmabuf_mr;                  // ibv_reg_dmabuf_mr@IBVERBS_1.12 present
  std::optional<int> rdma_devices;                    // entries in /sys/class/infiniband
  std::string rdma_device_list;                       // "mlx5_0 (MT4129, fw 28.39.1002), mlx5_1 (...)"

  // GPU side.
  std::optional<bool> peer_memory;  // nvidia_peermem / nv_peer_mem loaded or memory_peers/nv_mem
  // A peer-memory client registered with ib_core's PeerDirect (/sys/kernel/mm/memory_peers/nv_mem[_nc]); false
  // with peer_memory true: the module is loaded but claims no GPU memory.
  std::optional<bool> peer_memory_client;
  nvidia_flavour driver_flavour = nvidia_flavour::unknown;
  std::string driver_version;  // "580.82.09"; "" unknown
  // An nvidia-imex daemon runs (a process whose comm is nvidia-imex); unset where the node has no IMEX at all.
  std::optional<bool> imex_daemon;
};

// Builds the evidence from collected facts: memlock of chain[0] (the start pid), meminfo, max_map_count,
// mlx5_core / nvidia_peermem module facts, libibverbs version and symbols, NVIDIA driver flavour.
// `memlock_source` is set to "pid N (comm)" because the start pid is rarely the failed task; the caller
// clears it when it is. Unreadable facts stay unset.
node_evidence evidence_from_facts(const node_facts& facts);

// What one node_evidence is made from. Every caller names its sources here and gets the evidence from
// build_evidence(); what is particular to a caller (whose memlock it is, a probe's own numbers) it sets after.
struct evidence_inputs {
  const node_facts* facts = nullptr;  // collected facts (evidence_from_facts), or none collected
  // Where `facts` were read: chain[0]'s CAP_IPC_LOCK comes from its /proc/PID/status there. nullptr: not read.
  const sysroot* root = nullptr;
  // This process is the subject (a probe, or the parent of ranks that inherit its limits): its own
  // RLIMIT_MEMLOCK, euid and CAP_IPC_LOCK (read_own_process, facts.h) replace chain[0]'s. nullptr: not the subject.
  const own_process_facts* own = nullptr;
};
// The one builder of node_evidence (src/explain/causes/evidence.cpp).
node_evidence build_evidence(const evidence_inputs& in);
// Whether this node's shell (or a --root tree) is in a container, and which runtime: sets in_container, runtime
// and container_why, for `mrcheck probe mr` and `explain` alike. The runtimes' signs (guess_runtime,
// container_runtime.h) in `env` and in `root`; a marker an image keeps when it is made into a VM (/.dockerenv,
// /run/.containerenv) counts only with a second sign: an overlay file system as "/" or PID 1's cgroup naming a
// container engine, which also counts alone.
void container_evidence(const sysroot& root, const std::vector<std::string>& env, node_evidence& e);

// The rdma-core flavour from dpkg's status file (/var/lib/dpkg/status): the `Version:` of package
// libibverbs1 (or rdma-core); a version containing "mlnx" (MLNX_OFED / DOCA-OFED builds, e.g. "2410mlnx54-1")
// is ofed, any other is inbox. The library's file name cannot tell them apart (OFED's is libibverbs.so.1.14.N.0
// like upstream). `version` receives the Version string when found. unknown when no such package.
rdma_flavour user_stack_from_dpkg_status(std::string_view dpkg_status, std::string* version = nullptr);

struct diagnosis {
  cause what = cause::unknown;
  bool confirmed = false;             // the node evidence supports the cause (not only the errno)
  std::string summary;                // one line with numbers
  std::vector<std::string> evidence;  // ordered: errno, limits, versions, max_map_count/hugepages
  std::string fix;                    // one actionable line
  std::string fallback;               // last resort with its cost (NCCL_IB_DISABLE=1); "" when not applicable
  // Who fixes it, where a row knows and it is not the job's own: the node (its daemons, modules) or the site
  // (slurm.conf, its plugins); none elsewhere (include/mrcheck/owner.h for the checks' owners).
  fix_owner owner = fix_owner::none;
};

// The rules (docs/facts/verbs-and-nccl.md §2), in order:
//  ENOMEM on a registration/CQ/QP: a finite soft memlock below the size (or below MemTotal, or unknown size)
//    without CAP_IPC_LOCK -> memlock; unlimited/adequate limit or CAP_IPC_LOCK -> pinning_resources;
//    in a container with no limit evidence -> memlock with the container fix (mscclpp #335).
//  EPERM -> capability.  EFAULT -> gpu_peer_memory only when the buffer is known GPU memory (gpu_buffer), else
//    unknown naming both readings.  EMFILE / ENFILE -> open_files.
//  EINVAL -> rdma_stack_mismatch when kernel and user-space flavours differ, else unknown pointing at the stack
//    check (and NCCL_IB_PCI_RELAXED_ORDERING=0 as an experiment, NVIDIA/nccl #1842).
//  EOPNOTSUPP / EPROTONOSUPPORT on ibv_reg_dmabuf_mr -> dmabuf_unsupported (NVIDIA/nccl #778).
//  ENODEV / ENXIO, or failure::kind::no_device -> no_rdma_device.  failure::kind::duplicate_gpu -> duplicate_gpu.
// Never throws on odd input (unknown errno, empty call): the result is cause::unknown with the errno named.
diagnosis diagnose(const failure& f, const node_evidence& e);

// errno <-> names: 12 -> "ENOMEM"; glibc's strerror text "Cannot allocate memory" -> 12 (exact, case-insensitive,
// trailing punctuation ignored). Independent of the running libc so logs from any glibc node map the same.
std::string_view errno_name(int err);                       // "" when unknown
std::string_view errno_message(int err);                    // glibc's text, "" when unknown
std::optional<int> errno_from_name(std::string_view name);  // "ENOMEM" -> 12
// The errno whose glibc text occurs anywhere in `text`, the longest match winning ("No such device or address"
// over "No such device"), a tie to the lower errno; 0 when none occurs (case-sensitive, as strerror prints it).
int errno_message_in(std::string_view text);
// ibv_wc_status names: 12 -> "IBV_WC_RETRY_EXC_ERR"; "" when unknown.
std::string_view wc_status_name(int status);

void to_json(nlohmann::json& j, const diagnosis& d);

}  // namespace mrcheck
