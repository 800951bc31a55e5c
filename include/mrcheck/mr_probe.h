// The registration probe: register memory the way NCCL will - same library, same symbols, same flags,
// page-aligned, iova = addr, the size NCCL would register for this step - as the job user under the task's
// real limits, and turn the errno into a cause and a fix through the shared diagnosis (diagnosis.h).
//
// Parts, each usable alone:
//   nccl_env / estimate_nccl_registration  what NCCL would register (an ESTIMATE from NCCL's defaults and env)
//   parse_nccl_ib_hca / select_hcas         which HCAs NCCL would use (NCCL_IB_HCA, else those nearest the GPUs)
//   run_mr_probe                            open, alloc PD, register, probe DMA-BUF, release - per HCA
//   mr_probe_report                         the checks mr_host, dmabuf, mr_gpu as a report
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/diagnosis.h>
#include <mrcheck/log.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/verbs.h>

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// ------------------------------------------------------------------------------------------------------------
// NCCL's view of its settings: the environment, then NCCL_CONF_FILE (or ~/.nccl.conf), then /etc/nccl.conf,
// each file filling only unset names ([N] src/misc/param.cc initEnvFunc: setenv(..., 0)).
struct nccl_env {
  std::map<std::string, std::string, std::less<>> vars;
  std::vector<std::string> files_read;  // the files that existed and were read, in order

  // The value, or nullopt when unset. NCCL treats an empty value as unset for numeric params.
  std::optional<std::string> get(std::string_view name) const;
};

// `environ` is "KEY=VALUE" strings (the job's environment). `home` is the user's home directory ("" = none);
// `etc_file` is /etc/nccl.conf (a parameter so tests can point it elsewhere). Unreadable files are skipped,
// as NCCL skips them.
nccl_env load_nccl_env(std::span<const std::string> environ, std::string_view home,
                       const std::string& etc_file = "/etc/nccl.conf");

// NCCL's ncclLoadParam: strtoll(value, nullptr, 0); unset/empty -> `def`. Like NCCL, "4M" reads as 4; when
// that happens (trailing junk) a note is appended to `notes` so the report can show it.
std::int64_t nccl_param(const nccl_env& env, std::string_view name, std::int64_t def,
                        std::vector<std::string>* notes = nullptr);

// ------------------------------------------------------------------------------------------------------------
// How much memory NCCL registers with the HCA for one rank (one process) of this step. An ESTIMATE: NCCL's real
// channel count comes from its topology search at init time; the inputs and the formula are in the report.
//
// Per network connection NCCL allocates and registers one buffer per protocol ([N] v2.28.9
// src/transport/net.cc sendProxyConnect l.879-882 / recvProxyConnect l.1046-1049), sized by computeBuffSizes
// ([N] src/init.cc l.697-713): LL = NCCL_LL_BUFFSIZE or 8 lines x 512 threads x 8 steps x 16 B = 512 KiB,
// LL128 = NCCL_LL128_BUFFSIZE or 120 x 640 threads x 8 steps x 8 B = 4.6875 MiB, SIMPLE = NCCL_BUFFSIZE or 4 MiB.
// Without GPUDirect RDMA they are all host memory (ncclCudaHostCalloc, net.cc l.917) and pinned again by
// ibv_reg_mr: charged to RLIMIT_MEMLOCK. With GDR through nvidia_peermem they are GPU memory but still charged
// (docs/facts/memlock.md §3); with GDR through DMA-BUF only the send side's LL buffer stays in host memory (net.cc
// l.881). Each channel that leaves the node has a send and a receive connection per network peer (ring: 1 peer).
// Channels: NCCL's search yields about 2 per NIC, which connect.cc l.452 doubles, clamped to
// [NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS] (connect.cc l.328-350, l.487-491), at most MAXCHANNELS = 64.
struct nccl_estimate {
  // Inputs, as read.
  std::uint64_t buff_ll = 0;
  std::uint64_t buff_ll128 = 0;
  std::uint64_t buff_simple = 0;
  int channels = 0;
  std::string channels_from;  // "default: 2 per HCA x 1 HCA, doubled" / "NCCL_MIN_NCHANNELS=16"
  int net_peers = 1;          // network peers per channel (1 = ring)
  // The HCAs NCCL would use; 0 when none was found (then sized as for one, and said so).
  int hcas = 1;
  std::int64_t p2p_chunk = 0;      // NCCL_P2P_NET_CHUNKSIZE (128 KiB)
  int p2p_channels = 0;            // min(channels, NCCL_MAX_P2P_NCHANNELS)
  int nchannels_per_net_peer = 0;  // NCCL_NCHANNELS_PER_NET_PEER, 0 = NCCL's default (2, reduced with scale)
  bool gdr_off = false;            // NCCL_NET_GDR_LEVEL=LOC/0: no GPUDirect, host buffers for sure
  bool ib_disabled = false;        // NCCL_IB_DISABLE=1 or NCCL_NET=Socket: NCCL registers nothing with an HCA
  std::string ib_disabled_why;
  bool dmabuf_enabled = true;    // NCCL_DMABUF_ENABLE != 0 (default 1, [N] src/init.cc)
  int cumem = -2;                // NCCL_CUMEM_ENABLE: -2 = NCCL decides (on with a CUDA 12+ driver and VMM)
  std::string gdr_level;         // NCCL_NET_GDR_LEVEL as set ("" = NCCL's default, PXB)
  bool relaxed_ordering = true;  // NCCL_IB_PCI_RELAXED_ORDERING != 0 (default 2): NCCL uses ibv_reg_mr_iova2
  std::vector<std::string> notes;
  std::vector<std::string> inputs;  // "NCCL_BUFFSIZE=4194304 (default)", ... for the report

  // Results.
  int connections = 0;                  // channels x net_peers x 2 (send + receive)
  std::uint64_t per_connection = 0;     // LL + LL128 + SIMPLE
  std::uint64_t host_bytes = 0;         // charged to memlock: host path, or GDR through nvidia_peermem
  std::uint64_t dmabuf_host_bytes = 0;  // host memory left when GDR goes through DMA-BUF (LL send buffers)
  std::uint64_t gpu_bytes = 0;          // GPU memory NCCL registers per rank with GDR
  std::uint64_t p2p_bytes = 0;          // send/recv shared buffers (2 x p2p_channels x 16 x chunk), only if used
  std::vector<std::uint64_t> buffers;   // host buffers in NCCL's order, one registration each
  std::string formula;                  // "4 channels x 1 peer x 2 x (512 KiB + 4.69 MiB + 4 MiB) = 73.5 MiB"
};

nccl_estimate estimate_nccl_registration(const nccl_env& env, int hcas);

// ------------------------------------------------------------------------------------------------------------
// NCCL_IB_HCA, parsed exactly like NCCL ([N] src/misc/utils.cc parseStringList/matchIfList, net_ib.cc l.701):
// leading '^' excludes, then leading '=' makes names exact (else prefixes), items are comma separated, an item
// may carry ":port". At most 32 items, names cut at 15 characters (NCCL's MAX_IF_NAME_SIZE buffer).
struct nccl_hca_filter {
  struct item {
    std::string prefix;
    int port = -1;  // -1 = any port
  };
  bool set = false;      // NCCL_IB_HCA was present
  bool exclude = false;  // '^'
  bool exact = false;    // '='
  std::vector<item> items;
  std::string raw;

  // NCCL's test: matchIfList(name, port) XOR exclude; an empty list matches everything (so "^" alone
  // excludes everything, as in NCCL).
  bool matches(std::string_view device, int port) const;
};
nccl_hca_filter parse_nccl_ib_hca(std::optional<std::string_view> value);

struct hca_candidate {
  std::string name;
  std::vector<verbs_port> ports;
  std::string pci_bdf;  // "" when unknown (sysfs has no device link)
};

struct hca_choice {
  std::string name;
  std::vector<int> ports;  // the ports NCCL would use
  std::string why;         // "NCCL_IB_HCA=mlx5_0", "nearest to GPU 0000:3b:00.0", "all active HCAs"
};

struct hca_selection {
  std::vector<hca_choice> chosen;
  std::vector<std::string> skipped;  // "mlx5_1: no ACTIVE InfiniBand/Ethernet port (port 1 DOWN)"
  std::string rule;                  // one line: how the choice was made
};

// Larger = nearer (e.g. the depth of the common ancestor in the PCI tree); negative = unknown.
using locality_fn = std::function<int(const std::string& hca_bdf, const std::string& gpu_bdf)>;

// `device` (--device) wins over everything; then NCCL_IB_HCA; then, with GPUs and a locality answer, for each
// GPU the HCAs nearest to it; else all HCAs with a usable port.
hca_selection select_hcas(const std::vector<hca_candidate>& hcas, const nccl_hca_filter& filter,
                          std::string_view device, const std::vector<std::string>& gpu_bdfs,
                          const locality_fn& locality);

// hwloc's PCI tree (sysfs): the depth of the deepest common ancestor of the two PCI functions. Loads the
// topology on first use. Returns -1 for unknown BDFs or when built without hwloc.
locality_fn hwloc_locality();

// NCCL's distance between two PCI functions (its topology's path types, docs/facts/verbs-and-nccl.md §4), from the
// sysfs tree under `root` (/sys/bus/pci/devices/<bdf>: the link names the chain from the host bridge down, and
// numa_node): PIX = both below one PCIe switch, PXB = through several switches but not the CPU,
// PHB = through the CPU's host bridge (same NUMA node), SYS = across NUMA nodes. unknown when either function has
// no sysfs entry. NCCL uses GPUDirect RDMA only up to NCCL_NET_GDR_LEVEL, by default PXB.
enum class pci_path { unknown, loc, pix, pxb, phb, sys };
std::string_view to_string(pci_path p);
pci_path nccl_pci_path(const sysroot& root, const std::string& a_bdf, const std::string& b_bdf);
// NCCL_NET_GDR_LEVEL as NCCL reads it: a name (LOC, PIX, PXB, PHB, SYS) or the old numbering 0-4; unknown for
// anything else (NVL, C2C, ...: not judged).
pci_path parse_gdr_level(std::string_view value);

// The PCI functions of the GPUs this task may use: /proc/driver/nvidia/gpus/<bdf>/information "Device Minor"
// matched against SLURM_STEP_GPUS / SLURM_JOB_GPUS (GRES indices = minors) or integer CUDA_VISIBLE_DEVICES;
// all NVIDIA GPUs when none is set. Empty when the NVIDIA driver is absent.
std::vector<std::string> visible_gpu_bdfs(const nccl_env& env, const sysroot& root);

// ------------------------------------------------------------------------------------------------------------
// One registration attempt (a set of buffers registered together, all pinned at the same time as NCCL's are).
struct mr_attempt {
  bool attempted = false;
  bool ok = false;
  std::string device;
  std::string call;              // "ibv_reg_mr_iova2" | "ibv_reg_mr" | "ibv_reg_dmabuf_mr" | a setup call
  std::string failed_step;       // "" | "ibv_open_device" | "ibv_alloc_pd" | "mmap" | "cuMemAlloc" | the call
  std::uint64_t bytes = 0;       // all buffers
  std::uint64_t registered = 0;  // bytes registered before the failure (== bytes on success)
  int buffers = 0;
  int failed_buffer = -1;  // index of the buffer that failed
  std::uint64_t failed_bytes = 0;
  unsigned access = 0;
  int err = 0;          // errno of the failure
  std::string message;  // "ibv_reg_mr_iova2: Cannot allocate memory"
  std::chrono::microseconds elapsed{0};
};

enum class dmabuf_support { unknown, supported, unsupported };
std::string_view to_string(dmabuf_support s);

struct dmabuf_probe_result {
  bool attempted = false;
  bool symbol = false;  // ibv_reg_dmabuf_mr@IBVERBS_1.12 exported
  int err = 0;          // errno of ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)
  dmabuf_support support = dmabuf_support::unknown;
};

struct gpu_probe_result {
  bool attempted = false;
  std::string skip_reason;  // "built without CUDA headers", "no GPU visible", "libcuda.so.1: ..."
  std::string error;        // CUDA failed in a way that says nothing about registration
  int cuda_device = 0;
  std::string pci_bdf;
  int driver_version = 0;    // cuDriverGetVersion
  bool dmabuf_attr = false;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  bool gdr_attr = false;     // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  std::uint64_t bytes = 0;
  mr_attempt peermem;               // cuMemAlloc pointer through ibv_reg_mr_iova2 / ibv_reg_mr
  mr_attempt dmabuf;                // cuMemGetHandleForAddressRange fd through ibv_reg_dmabuf_mr
  std::string dmabuf_handle_error;  // cuMemGetHandleForAddressRange failed: "CUDA_ERROR_NOT_SUPPORTED"
  // The same two paths for a buffer allocated as NCCL >= 2.19 allocates by default (cuMemCreate + cuMemMap, with
  // gpuDirectRDMACapable when the device reports GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED; docs/facts/verbs-and-nccl.md
  // §4). Not attempted when the device has no VMM.
  bool vmm_attr = false;      // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  bool vmm_gdr_attr = false;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
  std::string vmm_error;      // cuMemCreate/cuMemMap failed: the VMM buffer was not registered at all
  mr_attempt vmm_peermem;
  mr_attempt vmm_dmabuf;
  std::string vmm_dmabuf_handle_error;
};

// One fabric-handle buffer as NCCL's multi-node NVLink set-up makes it ([NCCL@v2.27.3-1] src/mnnvl.cc,
// docs/facts/mnnvl.md §5): cuMemCreate with requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC, then
// cuMemExportToShareableHandle to a CUmemFabricHandle and cuMemImportFromShareableHandle back; released after.
struct fabric_handle_attempt {
  bool attempted = false;
  bool ok = false;
  std::string call;        // the call that failed ("cuMemCreate", "cuMemExportToShareableHandle", ...), "" on success
  int cu_error = 0;        // its CUresult
  std::string error_name;  // "CUDA_ERROR_NOT_PERMITTED"
  std::uint64_t bytes = 0;
};
// The two CUresults the mnnvl_handle check tells apart (cuda.h, CUDA 12.3+; docs/facts/mnnvl.md §5).
inline constexpr int k_cuda_error_not_permitted = 800;
inline constexpr int k_cuda_error_not_supported = 801;

// What the mnnvl_handle check reads: whether this node's GPUs report a multi-node NVLink fabric (NVML, as the
// mnnvl check reads it), the GPU's fabric-handle support, the attempt, and the IMEX channels the probe itself
// sees (its own mount namespace: the job's, when the job runs the probe).
struct fabric_probe_result {
  bool asked = false;              // --gpu: the check applies
  bool node_fabric = false;        // a GPU reports a completed fabric with a cluster UUID (NCCL's condition)
  std::string no_fabric;           // why not: "no GPU reports ..." or why NVML could not say
  std::string fabric_line;         // "GPU 0: clique 0x7ffe of cluster 4f3c9e2a-..."
  std::string cuda_problem;        // CUDA could not be set up: the attempt was not made
  bool cuda_problem_skip = false;  // ... and that means "not applicable" (no GPU visible), not a broken CUDA
  int cuda_device = 0;
  std::string pci_bdf;
  bool handle_attr = false;  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED
  fabric_handle_attempt attempt;
  bool channels_dir = false;       // /dev/nvidia-caps-imex-channels in the probe's namespace
  std::vector<unsigned> channels;  // the channelN it sees
  std::vector<unsigned> usable;    // ... and may open read-write
};

struct hca_probe_result {
  std::string device;
  std::vector<int> ports;
  std::string why;
  mr_attempt host;
  dmabuf_probe_result dmabuf;
  gpu_probe_result gpu;
  std::string pci_bdf;                    // the HCA's PCI function, "" when sysfs does not say
  pci_path gpu_path = pci_path::unknown;  // NCCL's distance from the probed GPU to this HCA
  status release = status::ok();          // the first release call that failed (dereg/dealloc/close/munmap)
};

struct mr_probe_request {
  std::optional<std::uint64_t> size;  // --size: one buffer of this size instead of the estimate
  std::string device;                 // --device: this HCA only
  bool gpu = false;                   // --gpu
  std::vector<std::string> env;       // the job's environment ("KEY=VALUE")
  std::string home;                   // for ~/.nccl.conf
  std::string nccl_etc_file = "/etc/nccl.conf";
  // Where /sys/class/infiniband/<dev>/device, the PCI tree and /proc/driver/nvidia/gpus are read (the HCAs' and
  // GPUs' places, for NCCL's locality): the host, or a test's tree.
  sysroot root;
};

struct mr_probe_outcome {
  nccl_estimate estimate;
  std::uint64_t size = 0;  // what each HCA's host attempt registers in total
  bool size_from_user = false;
  std::string device_requested;  // --device, "" = NCCL's choice
  std::vector<std::uint64_t> buffers;
  std::string library;  // libibverbs path, "" when it did not load
  status load_error = status::ok();
  bool explicit_library = false;  // the library was named by the user/config as a path
  bool iova2 = false;
  bool dmabuf_symbol = false;
  bool relaxed_ordering = false;     // NCCL would register with RELAXED_ORDERING through ibv_reg_mr_iova2
  status list_error = status::ok();  // ibv_get_device_list / query failed
  std::vector<std::string> devices;  // all devices the library listed
  hca_selection selection;
  std::vector<hca_probe_result> hcas;
  std::vector<std::string> gpu_bdfs;
  bool gpu_requested = false;
  gpu_probe_result gpu_setup;  // when the GPU side could not even start (no CUDA / no GPU)
  fabric_probe_result fabric;  // the mnnvl_handle check's facts (probe_fabric_handle), with --gpu
  // The process that registered: its limit and privileges (a probe as root proves nothing about memlock).
  std::uint64_t memlock_soft = 0;
  std::uint64_t memlock_hard = 0;
  bool is_root = false;
  std::optional<bool> cap_ipc_lock;
  std::string slurm_rlimit_memlock;  // the job's SLURM_RLIMIT_MEMLOCK: the submit side's limit Slurm propagated
};

// GPU memory for the mr_gpu check, behind an interface (the CUDA driver API in cuda_gpu.cpp; a fake in tests).
class gpu_memory {
 public:
  virtual ~gpu_memory() = default;
  virtual int device() const = 0;                              // CUDA ordinal
  virtual std::string pci_bdf() const = 0;                     // "0000:3b:00.0"
  virtual int driver_version() const = 0;                      // cuDriverGetVersion
  virtual bool dmabuf_supported() const = 0;                   // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  virtual bool gdr_supported() const = 0;                      // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  virtual result<std::uint64_t> alloc(std::size_t bytes) = 0;  // cuMemAlloc: a device pointer
  // cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD): a dma-buf fd the caller closes.
  virtual result<int> dmabuf_fd(std::uint64_t ptr, std::size_t bytes) = 0;
  virtual void free(std::uint64_t ptr) = 0;
  // CUDA VMM, as NCCL allocates its buffers by default since 2.19: CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_
  // SUPPORTED, ..._GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, and cuMemCreate (gpuDirectRDMACapable when the second is
  // set) + cuMemAddressReserve + cuMemMap + cuMemSetAccess of at least `bytes`; free_vmm undoes all of it.
  virtual bool vmm_supported() const { return false; }
  virtual bool vmm_gdr_supported() const { return false; }
  virtual result<std::uint64_t> alloc_vmm(std::size_t /*bytes*/) {
    return status::error("CUDA VMM (cuMemCreate) not available");
  }
  virtual void free_vmm(std::uint64_t /*ptr*/) {}
  // Multi-node NVLink: CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, and one fabric-handle buffer of at least
  // `bytes` made, exported, imported and released as NCCL's MNNVL check does (fabric_handle_attempt).
  virtual bool fabric_handle_supported() const { return false; }
  virtual fabric_handle_attempt try_fabric_handle(std::size_t /*bytes*/) { return {}; }
};

// dlopen("libcuda.so.1") (the driver API: no CUDA runtime needed), cuInit, device 0 of what the task sees,
// its primary context. On failure `skip` says whether it means "not applicable here" (built without CUDA
// headers, no driver, no GPU visible) rather than a broken CUDA.
// `library` is what dlopen is given: the driver's libcuda.so.1, or a test's fake (tests/fakes/fake_cuda.c).
result<std::unique_ptr<gpu_memory>> open_cuda_gpu(bool& skip, const std::string& library = "libcuda.so.1");

// The mnnvl_handle facts: `nvml` is NVML's fabric answer (read_gpu_fabric_isolated, fabric.h); where a GPU reports
// a multi-node fabric, one fabric-handle buffer on `gpu` (null: `cuda_problem` says why, `cuda_problem_skip`
// whether that means not applicable) and the IMEX channels of this process's own mount namespace
// (read_task_imex of itself). Without a fabric, nothing is allocated and `no_fabric` says so.
struct fabric_facts;
fabric_probe_result probe_fabric_handle(const fabric_facts& nvml, gpu_memory* gpu, const std::string& cuda_problem,
                                        bool cuda_problem_skip, log_sink& log);

// Runs the probe. `verbs` may be null when the library did not load (then `load_error` says why). `log` gets
// one verbose line before every call that might hang ("mrcheck: mr_host: calling ibv_reg_mr_iova2 on mlx5_0
// (73.5 MiB)") so a parent that kills a hung probe can say where it hung.
// `gpu` is used when req.gpu; when it is null, `gpu_setup` carries skip_reason or error (see open_cuda_gpu).
mr_probe_outcome run_mr_probe(const mr_probe_request& req, verbs_api* verbs, status load_error, gpu_memory* gpu,
                              const gpu_probe_result& gpu_setup, log_sink& log);

}  // namespace mrcheck
