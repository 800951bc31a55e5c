// Facts about a node: plain values read through a sysroot (or, for libraries, with dlopen on the host).
// A fact that could not be read is a result<> holding the reason, never a guessed value.
#pragma once

#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <nlohmann/json_fwd.hpp>

#include <sys/types.h>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// RLIMIT_MEMLOCK as /proc/PID/limits shows it; k_unlimited for "unlimited".
struct memlock_limit {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
  bool operator==(const memlock_limit&) const = default;
};

// One process of a chain (the pid itself first, then its ancestors up to pid 1).
struct process_fact {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;          // from /proc/PID/stat, escaped when printed
  std::optional<uid_t> uid;  // real uid from /proc/PID/status
  result<memlock_limit> memlock = status::error("not read");
  // RLIMIT_STACK (bytes) and RLIMIT_NOFILE (descriptors), the same soft/hard pair (include/mrcheck/limit_chain.h).
  result<memlock_limit> stack = status::error("not read");
  result<memlock_limit> nofile = status::error("not read");
  bool lowered = false;  // soft or hard limit lower than its parent's: the hop that dropped it
};

// True when a process's comm is the Slurm daemon `name` ("slurmd", "slurmstepd", "slurmctld"). Debian 13 and
// later ship the daemons as NAME-wlm behind /etc/alternatives/NAME: started as NAME a daemon's comm is NAME,
// but one that re-executes itself (slurmd and slurmctld on `scontrol reconfigure`, Slurm 23.11 and later)
// runs as NAME-wlm (docs/slurm-releases.md).
inline bool is_slurm_daemon(std::string_view comm, std::string_view name) {
  if (!comm.starts_with(name)) return false;
  comm.remove_prefix(name.size());
  return comm.empty() || comm == "-wlm";
}

struct hugepages_fact {
  std::uint64_t total = 0;                 // HugePages_Total
  std::uint64_t free = 0;                  // HugePages_Free
  std::uint64_t page_size = 0;             // Hugepagesize in bytes
  std::uint64_t mem_total = 0;             // MemTotal in bytes
  std::uint64_t mem_available = 0;         // MemAvailable in bytes
  std::optional<std::uint64_t> cma_total;  // CmaTotal in bytes (absent without CONFIG_CMA)
  std::optional<std::uint64_t> cma_free;   // CmaFree in bytes
};

struct rdma_port_fact {
  int number = 0;
  std::string state;       // "4: ACTIVE"
  std::string phys_state;  // "5: LinkUp"
  std::string rate;        // "400 Gb/sec (4X NDR)"
  std::string link_layer;  // "InfiniBand" | "Ethernet"
};

struct rdma_device_fact {
  std::string name;      // mlx5_0
  std::string fw_ver;    // 28.39.1002
  std::string board_id;  // MT_0000000838 (PSID)
  std::string hca_type;  // MT4129
  std::string node_guid;
  std::string node_type;
  std::string pci_bdf;  // from the `device` link, "" if unknown
  std::string driver;   // the kernel driver bound to the device (`device/driver` link): mlx5_core, efa,
                        // irdma, bnxt_en, ionic; "" for soft devices (rxe, siw) and when unknown
  std::vector<rdma_port_fact> ports;
};

// The NIC family of an RDMA device, from its driver and name: the name of its row in the family table
// (include/mrcheck/nic_family.h), or "" when no row matches.
std::string rdma_family(const rdma_device_fact& d);

// What the package database says about the RDMA user space (docs/transports.md): the flavour of rdma-core and
// the libfabric / aws-ofi-nccl versions. dpkg's status file is read; an rpm database is found but not read
// (it is SQLite or Berkeley DB) and reported as such.
struct rdma_packages_fact {
  std::string source;              // "/var/lib/dpkg/status"
  std::string libibverbs_package;  // "libibverbs1" or "rdma-core"; "" when not installed
  std::string libibverbs_version;  // "44.0-2", "2410mlnx54-1"
  bool ofed = false;               // an MLNX/DOCA-OFED build (the version carries "mlnx")
  std::string libfabric_version;   // "1.19.0amzn4.0-1" (libfabric1-aws or libfabric1); "" when absent
  std::string ofi_nccl_version;    // aws-ofi-nccl's package, "" when absent
};

// The EFA installer's record (/opt/amazon/efa_installed_packages): installer, libfabric and aws-ofi-nccl versions.
struct efa_installer_fact {
  std::string installer_version;  // "1.29.1"
  std::string libfabric_version;  // from libfabric1-aws_<v>_<arch> / libfabric-aws-<v>.<arch>
  std::string ofi_nccl_version;   // from an aws-ofi-nccl / libnccl-ofi package entry
};

struct kmodule_fact {
  std::string name;
  bool loaded = false;                 // /sys/module/NAME exists (built-in modules too)
  std::optional<std::string> version;  // /sys/module/NAME/version (absent for inbox mlx5_core)
  std::string taint;                   // /sys/module/NAME/taint ("O" = out of tree, "P" = proprietary, "" = none)
  std::optional<std::string> srcversion;
};

enum class nvidia_flavour { unknown, open, proprietary };

struct nvidia_driver_fact {
  std::string version;  // 580.82.09
  nvidia_flavour flavour = nvidia_flavour::unknown;
  std::string raw;   // first line of /proc/driver/nvidia/version
  std::string note;  // set when /sys/module/nvidia/taint disagrees with the version line
};
std::string_view to_string(nvidia_flavour f);

struct gpu_fact {
  std::string pci_bdf;                        // 0000:3b:00.0
  std::string device_id;                      // 0x2335
  std::uint64_t bar1_bytes = 0;               // the largest prefetchable 64-bit memory BAR
                                              // (docs/facts/kernel-and-drivers.md §5)
  int bar1_resource_line = -1;                // which line of /sys/bus/pci/devices/BDF/resource held it
  std::optional<std::uint64_t> memory_bytes;  // from NVML when loaded, else unknown
  std::string bar1_error;                     // why bar1_bytes is 0 (resource file unreadable or no prefetchable BAR)
};

// A shared library as the dynamic loader would load it (host only; skip under --root).
struct library_fact {
  std::string requested;                // "libibverbs.so.1"
  std::string path;                     // realpath of the file that loaded
  std::string version;                  // from the file name: libibverbs.so.1.14.44.0 -> "1.14.44.0"
  std::map<std::string, bool> symbols;  // "ibv_reg_mr_iova2@IBVERBS_1.8" -> present
};

struct node_facts {
  std::string hostname;
  result<std::string> kernel_release = status::error("not read");                  // /proc/sys/kernel/osrelease
  std::vector<process_fact> chain;                                                 // start pid first, then ancestors
  result<std::uint64_t> max_map_count = status::error("not read");                 // /proc/sys/vm/max_map_count
  result<hugepages_fact> hugepages = status::error("not read");                    // /proc/meminfo
  result<std::vector<rdma_device_fact>> rdma_devices = status::error("not read");  // /sys/class/infiniband
  result<int> uverbs_abi = status::error("not read");  // /sys/class/infiniband_verbs/abi_version
  std::map<std::string, kmodule_fact> modules;         // ib_core mlx5_core mlx5_ib nvidia nvidia_peermem nv_peer_mem
  bool memory_peers = false;                           // /sys/kernel/mm/memory_peers exists (PeerDirect ib_core)
  std::vector<std::string> memory_peer_clients;        // e.g. nv_mem, nv_mem_nc
  result<nvidia_driver_fact> nvidia = status::error("not read");   // /proc/driver/nvidia/version
  result<std::vector<gpu_fact>> gpus = status::error("not read");  // NVIDIA PCI functions (vendor 0x10de, class 0x03xx)
  result<library_fact> libibverbs = status::error("not read");
  result<int> cuda_driver_version = status::error("not read");  // cuDriverGetVersion: 13000 = 13.0
  result<int> nccl_version = status::error("not read");         // ncclGetVersion: 22809 = 2.28.9
  // The NCCL the job's program would load (include/mrcheck/job_nccl.h), when the caller knows the job (`mrcheck
  // report` from the user's shell): its version read from the file, and "PATH (origin)". The `nccl` rule judges
  // it instead of the system's. Empty source: not looked for (prolog, --root).
  result<int> job_nccl_version = status::error("not looked for");
  std::string job_nccl_source;
  result<process_fact> slurmd = status::error("not read");               // via its pid file
  result<library_fact> libcuda = status::error("not read");              // libcuda.so.1 as it loads
  result<library_fact> libnccl = status::error("not read");              // libnccl.so.2 as it loads
  result<rdma_packages_fact> rdma_packages = status::error("not read");  // /var/lib/dpkg/status
  result<efa_installer_fact> efa_installer = status::error("not read");  // /opt/amazon/efa_installed_packages
  std::vector<std::string> verbs_providers;  // rdma-core providers on disk (libibverbs/lib<NAME>-rdmav*.so)
  // FI_*, OFI_NCCL_*, NCCL_NET*, NCCL_IB_* and UCX_* settings of the start pid (/proc/PID/environ, only these
  // names are kept): what the transports will do.
  std::map<std::string, std::string> net_env;
  std::string slurmd_pid_file;                                      // the pid file that was used
  status chain_status;                                              // why `chain` is empty, when it is
  result<std::string> hostname_status = status::error("not read");  // hostname with the reason when unknown
};

struct collect_options {
  pid_t start_pid = 0;  // 0: the pid /proc/self points to (in a dump: the captured one)
  // Tried first; when it does not exist, SlurmdPidFile from `slurm_conf` (read through the sysroot), then
  // /var/run/slurmd.pid. A pid whose comm is not slurmd* is a stale file and reported as such.
  std::string slurmd_pid_file = "/run/slurmd.pid";
  std::string slurm_conf = "/etc/slurm/slurm.conf";  // the front ends pass slurm_conf_path() (slurm_conf.h)
  std::string verbs_library = "libibverbs.so.1";
  bool load_libraries = true;  // dlopen libibverbs/libcuda/libnccl (host only; never in slurmstepd)
};

// Reads every fact. Never fails as a whole: each fact carries its own status.
node_facts collect_facts(const sysroot& root, const collect_options& opts);

// Parsers, exposed for unit tests and for the checks that read one fact alone.
// The "Max locked memory  <soft> <hard> bytes" line of /proc/PID/limits; "unlimited" -> k_unlimited. Any
// spacing; a missing line, a line without its "bytes" column (truncated) or a bad number is an error.
result<memlock_limit> parse_memlock_from_limits(std::string_view limits_file);
// The same for any line of /proc/PID/limits: `name` ("Max stack size", "Max open files") and the units column
// it must carry ("bytes", "files").
result<memlock_limit> parse_rlimit_from_limits(std::string_view limits_file, std::string_view name,
                                               std::string_view units);
struct stat_fields {
  pid_t pid = 0;
  std::string comm;
  char state = '?';
  pid_t ppid = 0;
};
// "PID (comm) S PPID ...": comm may contain spaces and ')', so it is taken up to the LAST ')'.
result<stat_fields> parse_proc_stat(std::string_view stat_line);
// The real uid (first column of the "Uid:" line of /proc/PID/status).
result<uid_t> parse_status_uid(std::string_view status_file);
// This process as the kernel shows it (/proc/self/limits and /proc/self/status, read through `root`): what the
// children of a probe inherit. A part that cannot be read stays unknown.
struct own_process_facts {
  pid_t pid = 0;  // 0 when /proc/self/stat cannot be read
  std::optional<memlock_limit> memlock;
  std::optional<uid_t> euid;
  std::optional<bool> cap_ipc_lock;  // CAP_IPC_LOCK in the effective set
};
own_process_facts read_own_process(const sysroot& root);
// One process: stat is required (error if missing or malformed), limits and uid are read when possible
// (an unreadable limits file leaves memlock as an error with the reason).
result<process_fact> read_process(const sysroot& root, pid_t pid);
// Sets `lowered` on every entry whose soft or hard limit is below its parent's (the next entry); an entry
// whose limits or parent's limits are unknown is never marked.
void mark_lowered(std::vector<process_fact>& chain);
// PID first, then its ancestors up to pid 1. Error only when PID itself cannot be read; an ancestor that
// vanished ends the chain with what was read. Guarded against loops and absurd depth.
result<std::vector<process_fact>> read_chain(const sysroot& root, pid_t pid);

// PCI: one line of /sys/bus/pci/devices/BDF/resource, "start end flags" in hex.
struct pci_resource {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t flags = 0;
  std::uint64_t size() const { return (start == 0 && end == 0) || end < start ? 0 : end - start + 1; }
};
// include/linux/ioport.h
inline constexpr std::uint64_t k_ioresource_mem = 0x200;
inline constexpr std::uint64_t k_ioresource_prefetch = 0x2000;
inline constexpr std::uint64_t k_ioresource_mem_64 = 0x100000;
// Every line; a malformed line is an error (never a guessed BAR).
result<std::vector<pci_resource>> parse_pci_resources(std::string_view resource_file);
// Index of BAR1 (the frame-buffer aperture): the largest prefetchable 64-bit memory resource among the six
// standard BAR lines (0-5; 6 is the ROM, later lines are SR-IOV BARs and bridge windows); when there is no
// 64-bit one, the largest prefetchable memory resource (old 32-bit layouts). -1 when there is none.
int find_bar1(const std::vector<pci_resource>& resources);

// /proc/meminfo: MemTotal is required; HugePages_* default to 0 when the kernel has no hugetlbfs.
result<hugepages_fact> parse_meminfo(std::string_view meminfo);
// Parses "CapEff:\t0000003fffffffff" out of /proc/PID/status text; CAP_IPC_LOCK is bit 14.
// nullopt when the line is missing or malformed.
std::optional<bool> cap_ipc_lock_from_status(std::string_view proc_status);

// dpkg's status file -> the RDMA packages. Error when none of libibverbs1/rdma-core/libfabric is installed.
result<rdma_packages_fact> parse_dpkg_rdma(std::string_view dpkg_status, std::string source);
// /opt/amazon/efa_installed_packages -> versions. Error without the "# EFA installer version:" line.
result<efa_installer_fact> parse_efa_installer(std::string_view text);
// First line of /proc/driver/nvidia/version: version and flavour ("Open Kernel Module" = open).
result<nvidia_driver_fact> parse_nvidia_version(std::string_view version_file);
// A pid file: one positive decimal number, optional trailing whitespace.
result<pid_t> parse_pid_file(std::string_view text);
// "libibverbs.so.1.14.44.0" -> "1.14.44.0"; "" when the name has no version after ".so.".
std::string library_version_from_path(std::string_view path);
// dlopen(name, RTLD_LAZY|RTLD_LOCAL), realpath of the loaded file, and for each "sym@VERSION" in `symbols`
// whether dlvsym finds it. The handle is closed again. Host only.
result<library_fact> load_library(const std::string& name, const std::vector<std::string>& symbols);
// The file the loader really opened for a dlopen handle (a bare name is searched as NCCL's dlopen searches it),
// its links resolved; "" when the loader does not say. The probes' verbs loaders name their library with it.
std::string loaded_library_path(void* handle);

// The library facts (dlopen results) as a dump records them in DIR/.mrcheck/libraries.json, and back.
inline constexpr std::string_view k_libraries_json = "/.mrcheck/libraries.json";
nlohmann::json libraries_to_json(const node_facts& f);
// Fills libibverbs, libcuda, libnccl, cuda_driver_version and nccl_version from that file; a missing key
// stays unknown with the reason "not recorded in the dump".
void libraries_from_json(const nlohmann::json& j, node_facts& f);

// Limits in bytes or "unlimited"; unknown as {"unknown": "<reason>"}.
nlohmann::json memlock_to_json(const result<memlock_limit>& m, bool hard);
// {"pid","ppid","comm","uid","memlock_soft","memlock_hard","stack_soft","stack_hard","nofile_soft","nofile_hard",
// "lowered"} (stack in bytes, nofile in files).
nlohmann::json process_to_json(const process_fact& p);
void to_json(nlohmann::json& j, const node_facts& f);

// The library facts of the host (libibverbs, libcuda, libnccl) on their own, so a caller can gather them on
// a second thread while it reads sysfs and procfs: each is a dlopen, together they are the slowest part of
// collect_facts() on a GPU node (bench/prolog/README.md). Host only; a tree under --root has libraries.json.
struct library_facts {
  result<library_fact> libibverbs = status::error("not read");
  result<library_fact> libcuda = status::error("not read");
  result<library_fact> libnccl = status::error("not read");
  result<int> cuda_driver_version = status::error("not read");
  result<int> nccl_version = status::error("not read");
};

// Exactly what collect_facts() does with load_libraries on: dlopen `verbs_library` and look up NCCL's
// symbols, dlopen libcuda.so.1 and libnccl.so.2 and call cuDriverGetVersion / ncclGetVersion (libcuda and
// libnccl stay loaded, see call_version). Never throws; each fact carries its own status.
library_facts load_library_facts(const std::string& verbs_library);

// Moves the facts into `f` (replacing whatever collect_facts left there).
void apply_library_facts(library_facts&& l, node_facts& f);

}  // namespace mrcheck
