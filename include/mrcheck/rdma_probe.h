// The data-plane probe (`mrcheck probe rdma`, check data_plane): what ibv_rc_pingpong and ib_write_bw tell an
// admin, as the job user and bounded in time. On each ACTIVE port of each device (or the ones --device and
// NCCL_IB_HCA name) it connects two RC queue pairs of this process to each other (loopback: one PD, one CQ per
// QP) through INIT, RTR and RTS - on RoCE with a GID index chosen from the port's GID table, on InfiniBand with
// the port's LID - then moves NCCL-sized messages both ways NCCL does: send/recv ping-pong (latency) and RDMA
// write (bandwidth), and compares every byte that arrived with what was sent.
//
// Between the step's nodes (rdma_peer_request): node k and node k+1 (mod n; one pair for two nodes) each put
// one RC QP on the port that passed its loopback and connect them to each other, node k sending and writing,
// node k+1 echoing and checking what arrived. The QP numbers, GIDs, MTUs and the rkey cross on the channel
// between nodes the NCCL pair uses (src/nccl/rendezvous.h): a port derived from job, step and pair, and every
// line a MUNGE credential of the job's uid bound to the pair (docs/DESIGN.md, "The channel between nodes"), so
// a stranger's listener or answer is refused and named, never connected to.
//
// A failure names its step and cause: the port (DOWN, no GID: an empty RoCE GID table means no IP address on
// the netdev; an InfiniBand port without a LID means no subnet manager), a verbs call with its errno (ibv_modify_qp
// to RTR: EINVAL for a bad GID index or MTU, ETIMEDOUT when the route to the GID cannot be resolved), a work
// completion by its IBV_WC_* name, a completion that does not come before its deadline, bytes that differ.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/log.h>
#include <mrcheck/munge_auth.h>

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// The step the probe runs in, for the pairs between its nodes (`mrcheck probe rdma` fills it from SLURM_JOB_ID,
// SLURM_STEP_ID, SLURM_NODEID and SLURM_STEP_NODELIST in a step of two nodes or more).
struct rdma_peer_request {
  std::uint64_t job_id = 0;
  std::uint64_t step_id = 0;
  int node_index = 0;                     // this node's place in `nodes`
  std::vector<std::string> nodes;         // the step's nodes in Slurm's order (host names the peers are reached by)
  munge_settings auth;                    // munged and the cluster (munge_settings_from_slurm_conf)
  std::chrono::milliseconds meet{12000};  // the most a pair waits for its peer node, and for each of its answers
  int port_attempts = 0;                  // 0: k_nccl_port_attempts
};

// Node `index` of `nodes`: the pairs it takes part in. Pair k is node k (serve: sends and writes) with node
// k+1 mod n (join: echoes and checks); two nodes make one pair, one node none.
struct rdma_pair_role {
  int pair = 0;
  bool serve = false;
  int peer = 0;  // the other node's index
};
std::vector<rdma_pair_role> rdma_pair_roles(int nodes, int index);

// Slurm's hostlist syntax expanded ("gpu[003-005,9],cpu1" -> gpu003 gpu004 gpu005 gpu9 cpu1), in order;
// nullopt when malformed or longer than `max` names.
std::optional<std::vector<std::string>> expand_nodelist(std::string_view list, std::size_t max = 4096);

struct rdma_probe_request {
  // Message sizes, each run both ways (send/recv ping-pong, RDMA write). NCCL's small messages and its
  // 1 MiB-class chunks (NCCL_P2P_NET_CHUNKSIZE 128 KiB, NCCL_BUFFSIZE 4 MiB) by default.
  std::vector<std::uint64_t> sizes{4096, 1u << 20};
  int iters = 0;                           // per size; 0 = k_rdma_default_bytes / size, within [4, 1000]
  std::string device;                      // only this device ("" = every device, filtered by NCCL_IB_HCA)
  std::optional<std::string> nccl_ib_hca;  // the job's NCCL_IB_HCA (parsed like NCCL, mr_probe.h)
  std::chrono::milliseconds wait{2000};    // the deadline of each completion wait
  std::optional<rdma_peer_request> peers;  // set: also the pairs between the step's nodes
};

// Per size and direction. Small: Soft-RoCE under emulation moves a few MB/s, and the probe must end well inside
// probe_timeout there too (README "The data-plane probe"); a real HCA moves this in well under a millisecond.
inline constexpr std::uint64_t k_rdma_default_bytes = 1u << 20;
inline constexpr std::uint64_t k_rdma_max_size = 64u << 20;

// Iterations for one size (request.iters, else the default rule above).
int rdma_iterations(const rdma_probe_request& req, std::uint64_t size);

struct rdma_size_result {
  std::uint64_t size = 0;
  int iters = 0;
  double send_latency_us = 0;  // half a send/recv round trip, mean over iters
  double write_mbps = 0;       // RDMA write, MB/s (10^6 bytes), iters writes back to back
  bool verified = false;       // every byte of every message compared
};

struct rdma_port_result {
  std::string device;
  int port = 0;
  std::string state;       // "ACTIVE", "DOWN", ...
  std::string link_layer;  // "InfiniBand", "Ethernet"
  bool tested = false;     // false: not selected (NCCL_IB_HCA, --device) or not ACTIVE beside an active port
  bool ok = false;
  // Where and why it failed; empty when ok.
  std::string step;       // "port", "gid", "alloc_pd", "reg_mr", "create_cq", "create_qp", "modify_qp INIT", ...
  std::string cause;      // "port_down", "no_gid", "no_lid", "errno", "completion", "timeout", "mismatch"
  int err = 0;            // errno of a failed call
  std::string wc_status;  // "IBV_WC_RETRY_EXC_ERR" of a failed completion
  std::string message;    // one line
  // The path that was set up.
  int gid_index = -1;
  std::string gid;       // "::ffff:10.0.0.1"
  std::string gid_type;  // "RoCE v2", "RoCE v1", "IB", "" (unknown: the library has no ibv_query_gid_ex)
  int lid = 0;
  int mtu = 0;  // bytes of the path MTU used (the port's active MTU)
  std::vector<rdma_size_result> sizes;
  double elapsed_ms = 0;
};

// One pair between two nodes, as this node saw it. Its failure fields are rdma_port_result's, and the cause
// adds "no_route" (the peer node's probe could not be reached), "no_peer" (it never came), "auth" (munged
// refused or was down: the line names why), "peer" (the peer node failed and said where) and "protocol" (it
// said something the pair does not take).
struct rdma_pair_result {
  int pair = 0;
  std::string role;  // "serve" or "join"
  std::string peer;  // the other node's name
  std::string device;
  int port = 0;
  bool ok = false;
  std::string step;
  std::string cause;
  int err = 0;
  std::string wc_status;
  std::string message;
  std::string gid;       // this node's GID ("" on InfiniBand)
  std::string peer_gid;  // the peer's
  int mtu = 0;           // the path MTU used: the smaller of both ports' active MTUs
  int peer_mtu = 0;      // the peer port's active MTU (this one's is `local_mtu`)
  int local_mtu = 0;
  std::uint16_t tcp_port = 0;        // where the pair met
  std::vector<std::string> refused;  // one line per stranger the meeting refused (escaped)
  std::vector<rdma_size_result> sizes;
  double elapsed_ms = 0;
};

struct rdma_probe_outcome {
  std::string library;            // the libibverbs that was loaded
  std::string load_error;         // the library did not load (then nothing ran)
  bool explicit_library = false;  // a path was given (--verbs-library, verbs_library=): not loading is an error
  std::string list_error;         // ibv_get_device_list failed
  std::vector<std::string> devices;
  std::vector<rdma_port_result> ports;
  std::vector<std::string> notes;       // a device that did not open, ports not tested and why
  std::string device_requested;         // --device
  std::string selection;                // "all devices", "--device rxe0", "NCCL_IB_HCA=mlx5_0"
  std::vector<rdma_pair_result> pairs;  // between the step's nodes (request.peers)
  std::string peers_note;               // why no pair ran though peers were asked for
  double elapsed_ms = 0;
};

// Loads `library` (a name or a path) with dlopen, like the registration probe, and runs the loopback on every
// selected port. Every wait has a deadline (request.wait); `log` gets a "calling ..." line before each verbs
// call at verbose level, so a parent that kills a hung probe can say where it hung.
rdma_probe_outcome run_rdma_probe(const rdma_probe_request& req, const std::string& library, log_sink& log);

}  // namespace mrcheck
