// The NCCL pair probe (`mrcheck probe nccl`, `--mr-check=nccl`): a real 2-rank all-reduce through NCCL's
// network path, bounded by a hard timeout and explained.
//
// Process layout: the orchestrator (this API, run_nccl_pair) links no CUDA or NCCL; it re-executes the mrcheck
// binary once per rank (`mrcheck probe nccl --rank R ...`, a hidden form) and only those rank children dlopen
// libcuda.so.1 and libnccl.so.2. Rank 0 sends its ncclUniqueId to the orchestrator on a control pipe; the
// orchestrator hands it to rank 1 on a second pipe (same node) or to the other node's orchestrator over a TCP
// rendezvous on a port derived from the job and step ids (node-pair). Each rank child has its own process
// group and dies with the orchestrator (PR_SET_PDEATHSIG); a timeout, or a rank that fails while its peer
// waits, kills the rest: no orphans.
//
// Modes (docs/facts/nccl-test-harness.md §1, §4):
//   local-pair  both ranks on one GPU, a distinct NCCL_HOSTID each, so NCCL treats them as two hosts and
//               uses NET (IB loopback through the HCA, or NET/Socket when there is none).
//   gpu-pair    two GPUs of one node with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, so only NET is left.
//   node-pair   one rank on each of two nodes (the first task of each), real host ids.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/child.h>
#include <mrcheck/facts.h>
#include <mrcheck/munge_auth.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

enum class nccl_mode { local_pair, gpu_pair, node_pair };

std::string_view to_string(nccl_mode m);  // "local-pair", "gpu-pair", "node-pair"
std::optional<nccl_mode> parse_nccl_mode(std::string_view s);

// The best mode an allocation allows: a step on >= 2 nodes -> node-pair; else >= 2 visible GPUs -> gpu-pair;
// 1 GPU -> local-pair; 0 -> no mode, with the reason ("no GPU visible ...") for a skip verdict.
struct nccl_mode_choice {
  std::optional<nccl_mode> mode;
  std::string reason;  // why this mode (or why none)
};
nccl_mode_choice choose_nccl_mode(int visible_gpus, int step_nodes);

// GPUs a rank child would see, without loading CUDA: CUDA_VISIBLE_DEVICES when set (CUDA stops at the first
// invalid entry; "", "-1", "NoDevFiles" mean none), else the entries of /proc/driver/nvidia/gpus, else the
// /dev/nvidiaN nodes. `cuda_visible_devices` is nullptr when the variable is unset.
int count_visible_gpus(const sysroot& root, const char* cuda_visible_devices);

// node-pair rendezvous port for (job, step), attempt 0, 1, ... (k_nccl_port_attempts of them). Deterministic,
// so both nodes compute the same sequence; kept below Linux's default ephemeral range (32768-60999) so an
// outgoing connection never holds it, and away from torch's 29500.
inline constexpr int k_nccl_port_attempts = 8;
inline constexpr std::uint16_t k_nccl_port_base = 20000;
inline constexpr std::uint16_t k_nccl_port_span = 9000;  // 20000..28999
std::uint16_t nccl_pair_port(std::uint64_t job_id, std::uint64_t step_id, int attempt);

// The first host of a Slurm node list ("gpu[003-005,9],cpu1" -> "gpu003"; "n1,n2" -> "n1"), the node-pair
// rendezvous server (SLURM_STEP_NODELIST / SLURM_JOB_NODELIST). "" when the list is empty or malformed.
std::string first_host_of_nodelist(std::string_view nodelist);

// What NCCL's own log says (INFO with NCCL_DEBUG_SUBSYS=INIT,NET; WARN lines at any level).
struct nccl_init_timing {
  int rank = -1;
  int nranks = 0;
  double total_s = 0;
  std::vector<std::pair<std::string, double>> parts;  // (kernels 0.25), (bootstrap 0.02), ... in NCCL's order
  std::string line;                                   // the line as NCCL printed it (escaped)
};
struct nccl_log_facts {
  std::string version;                  // "2.28.3+cuda13.0" from "NCCL version ..."
  std::string network;                  // "IB", "Socket", a plugin's name: "Using network X"
  std::vector<std::string> transports;  // distinct, in order seen: "NET/Socket", "NET/IB", "P2P", "SHM", ...
  std::vector<std::string> channels;    // distinct "via" targets as printed: "NET/IB/0/GDRDMA", "NET/Socket/0"
  std::vector<std::string> ib_devices;  // "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:..." -> "mlx5_0:1/IB [RO]"
  std::string socket_devices;           // "NET/Socket : Using [0]lo:127.0.0.1<0>" -> "[0]lo:127.0.0.1<0>"
  bool ib_no_device = false;            // "NET/IB : No device found."
  std::optional<bool> gdr;              // GPUDirect RDMA used: a NET channel "via NET/IB/0/GDRDMA"; without NET
                                        // channels, what NCCL said of the HCA ("GPU Direct RDMA Enabled for HCA")
  std::string gdr_note;                 // why not: "GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 8 > 5)"
  std::optional<bool> dmabuf;           // "DMA-BUF is available on GPU device N" -> true
  std::optional<int> nnodes;            // "nNodes 2"
  std::vector<nccl_init_timing> init_timings;
  std::vector<std::string> warnings;  // text after "NCCL WARN ", escaped, in order
};
// What NCCL's log says, one line at a time: a listener of explain's line reader (through nccl_path_scan, which
// has found the "NCCL INFO " marker already and hands over the text after it) and of parse_nccl_log below.
class nccl_log_reader {
 public:
  void feed(std::string_view line);          // a whole line: finds "NCCL WARN " or "NCCL INFO " itself
  void feed_info(std::string_view rest);     // the text after "NCCL INFO "
  void feed_warn(std::string_view message);  // the text after "NCCL WARN "
  nccl_log_facts facts() const;              // what the lines fed so far say

 private:
  nccl_log_facts f_;
  std::optional<bool> hca_gdr_;  // what NCCL said of the HCAs ("GPU Direct RDMA Enabled/Disabled for HCA")
  bool channel_gdr_ = false;     // a channel "via NET/.../GDRDMA"
};
// A whole captured output (a rank's stdout or stderr), line by line through nccl_log_reader.
nccl_log_facts parse_nccl_log(std::string_view text);
// Adds what `more` found (another rank's log) to `into`: distinct lists merged, flags or-ed.
void merge_nccl_log_facts(nccl_log_facts& into, const nccl_log_facts& more);

// What a rank child reports on its control pipe ("result {json}"), parsed by the orchestrator.
struct nccl_rank_report {
  int rank = -1;
  std::string stage;             // last stage reached: load, cuda, id, init, allreduce, verify, destroy, done
  bool ok = false;               // the all-reduce ran and every element was right
  bool no_gpu = false;           // CUDA says there is no (such) device: skip, not fail
  bool missing_library = false;  // libcuda.so.1 or libnccl.so.2 not found: skip
  std::string error;             // what failed, one line: "ncclCommInitRank: unhandled system error (2)"
  int nccl_result = 0;           // ncclResult_t of the failed call, 0 when none failed
  std::string nccl_last_error;   // ncclGetLastError() text when available
  int nccl_version = 0;          // ncclGetVersion(): 22803
  int cuda_driver_version = 0;   // cuDriverGetVersion(): 13000
  std::string nccl_library;      // the file dlopen found
  std::string device;            // "0000:00:06.0" (cuDeviceGetPCIBusId)
  std::uint64_t count = 0;       // floats all-reduced
  std::uint64_t mismatches = 0;
  std::int64_t first_bad_index = -1;
  double first_bad_value = 0;
  double expected = 0;
  std::vector<std::pair<std::string, double>> phases_ms;  // (load, 12.3), (cuda, 210.0), (init, 640.1), ...
};
void to_json(nlohmann::json& j, const nccl_rank_report& r);
void from_json(const nlohmann::json& j, nccl_rank_report& r);

// One rank child as the orchestrator saw it.
struct nccl_rank_run {
  int rank = -1;
  bool started = false;
  bool exited = false;
  int exit_code = -1;
  bool signaled = false;  // died of a signal we did not send (a crash)
  int term_signal = 0;
  bool killed = false;     // we killed it: timeout, or its peer failed and it did not finish in the grace time
  std::string last_stage;  // from "stage X" control lines, the latest
  std::optional<nccl_rank_report> report;
  std::string out;  // captured stdout (NCCL writes its log there), bounded
  std::string err;  // captured stderr, bounded
  bool truncated = false;
  std::chrono::milliseconds elapsed{0};
  // What the orchestrator saw of the rank, in ms since the pair began: "spawned", each "stage X" line as it came,
  // "result", "released" (the "go" sent), "reaped"; so the JSON shows process start, each phase and the exit of
  // the one process against the other (bench/nccl/README.md). Bounded: a rank's lines are the job's code.
  std::vector<std::pair<std::string, double>> timeline_ms;
  std::string describe() const;  // "exit 0", "killed by SIGSEGV", "killed by mrcheck (timeout)"
};

struct nccl_pair_options {
  nccl_mode mode = nccl_mode::local_pair;
  std::string self_exe;          // absolute path of the mrcheck binary that runs the ranks
  std::vector<std::string> env;  // the job's environment, "KEY=VALUE"; the user's NCCL_* settings apply
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds peer_grace{3000};  // how long a rank may go on after its peer failed
  bool verbose = false;                        // NCCL_DEBUG_SUBSYS wider; the log is kept in the JSON
  std::uint64_t count = 1 << 20;               // floats per rank (4 MiB)
  std::string nccl_library;                    // "" = dlopen("libnccl.so.2") through the job's library path
  std::size_t max_output = 256 * 1024;         // per stream per rank
  // node-pair only.
  int pair_rank = 0;  // 0 on the step's first node (rendezvous server), 1 on the second
  std::string peer;   // pair_rank 1: the first node's host name or address
  std::uint64_t job_id = 0;
  std::uint64_t step_id = 0;
  // The munged the rendezvous authenticates through and the cluster it binds (munge_settings_from_slurm_conf).
  munge_settings auth;
  // Tests only, never set by the plugin nor the shipped CLI: starts the rank children instead of
  // child_process::spawn (empty). A test stands in for a rank's process with a scripted end and no process
  // (tests/unit/nccl_pair_fake_test.cpp), or runs a scripted program in its place, a real process given the
  // rank's own arguments (tests/doubles/stand_in_ranks.h, for CI without a GPU).
  child_spawner spawn;
};

struct nccl_pair_outcome {
  nccl_mode mode = nccl_mode::local_pair;
  std::string setup_error;           // could not start the ranks / rendezvous; the rest is empty
  std::vector<nccl_rank_run> ranks;  // local ranks: 2 (local-pair, gpu-pair) or 1 (node-pair)
  bool timed_out = false;
  std::chrono::milliseconds elapsed{0};    // wall time of the whole pair, spawn to last reap
  std::vector<std::string> env_set;        // what mrcheck set for the ranks ("NCCL_HOSTID=..."), per rank 0 first
  std::vector<std::string> nccl_conf;      // /etc/nccl.conf, ~/.nccl.conf when present (NCCL reads them)
  std::vector<std::string> user_nccl_env;  // NCCL_* the job's environment already had (escaped)
  std::uint16_t port = 0;                  // node-pair: the rendezvous port used
  std::vector<std::string> refused;        // node-pair: one line per peer the rendezvous refused (escaped)
  std::optional<int> rdma_devices;         // entries of /sys/class/infiniband (nullopt: unreadable)
  nccl_log_facts log;                      // merged over the local ranks
  // The process that started the ranks, which inherit its limits and credentials: the evidence for theirs
  // (read_own_process, facts.h; set by the caller, `mrcheck probe nccl`). Unknown when not set.
  own_process_facts parent;
};

// Runs the pair (or this node's half of node-pair). Never throws for expected failures; they are in the outcome.
nccl_pair_outcome run_nccl_pair(const nccl_pair_options& options);

// The extra keys of `mrcheck probe nccl --json` beside "verdict" and "checks": mode, transport, gdr, dmabuf,
// nccl_version, cuda_driver_version, timings, ranks, nccl_conf, env_set (stable; the plugin parses them).
void add_nccl_pair_json(nlohmann::json& j, const nccl_pair_outcome& o, bool with_logs);

// Inside a rank child (the hidden `mrcheck probe nccl --rank R` form). Returns the process exit code:
// 0 all-reduce verified, 1 wrong result, 3 NCCL/CUDA error, 4 skip (no GPU / no library), 2 usage.
struct nccl_rank_args {
  int rank = -1;
  int nranks = 2;
  int device = 0;   // CUDA device ordinal among the visible ones
  int ctl_fd = -1;  // write: "stage X", "id HEX", "result JSON" lines
  int id_fd = -1;   // read (rank != 0): "id HEX" line
  // read: "go" once every rank has verified its result (local-pair, gpu-pair). A verified rank then exits
  // without ncclCommDestroy, which a smoke test does not need and which took 0.4 s of 1.3 s on the H200
  // (bench/nccl/README.md); EOF instead of "go" (a peer failed, the orchestrator is gone) exits too. -1: destroy.
  int release_fd = -1;
  std::uint64_t count = 1 << 20;
  std::string nccl_library;
};
int nccl_rank_main(const nccl_rank_args& a);

// The rank arguments the orchestrator passes (--rank, --nranks, --device, --ctl-fd, --id-fd, --release-fd, --count,
// --nccl-library), parsed for `mrcheck probe nccl --rank` and the tests' stand-in. Returns the arguments, or the
// usage error.
result<nccl_rank_args> parse_nccl_rank_args(const std::vector<std::string>& a);

// 128-byte ncclUniqueId <-> 256 lowercase hex characters (the control-line encoding).
std::string hex_encode(const unsigned char* data, std::size_t n);
bool hex_decode(std::string_view hex, unsigned char* out, std::size_t n);

}  // namespace mrcheck
