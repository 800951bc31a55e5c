// One port's loopback in the data-plane probe (rdma_probe.h): the two queue pairs, their memory, and the
// traffic over them. Private to src/rdma (data_plane.cpp sets up, dp_traffic.cpp moves and checks bytes).
#pragma once

#include "nccl/rendezvous.h"
#include "rdma/dp_verbs.h"

#if MRCHECK_HAVE_DP_VERBS

#include <mrcheck/log.h>
#include <mrcheck/rdma_probe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mrcheck::dp {

// Where and why a port failed (rdma_port_result's fields of the same names).
struct failure {
  std::string step;
  std::string cause;
  int err = 0;
  std::string wc_status;
  std::string message;
};

// "errno": a call failed with `err` (a negative return is taken as -errno, as some providers return it).
failure call_failed(std::string step, std::string call, int err);

// A result (a port's loopback, rdma_port_result, or a pair between nodes, rdma_pair_result) failed with `f`.
template <class Result>
void set_failure(Result& r, const failure& f) {
  r.ok = false;
  r.step = f.step;
  r.cause = f.cause;
  r.err = f.err;
  r.wc_status = f.wc_status;
  r.message = f.message;
}

// Side 0 ("A") sends and writes, side 1 ("B") receives and echoes. The memory is one registration of three
// regions of `region` bytes each: A's source, B's destination, A's destination for the echo.
struct session {
  const verbs* v = nullptr;
  ibv_context* ctx = nullptr;
  std::uint8_t port = 0;
  log_sink* log = nullptr;
  std::chrono::milliseconds wait{2000};
  ibv_pd* pd = nullptr;
  unsigned char* buf = nullptr;
  std::size_t region = 0;
  ibv_mr* mr = nullptr;
  ibv_cq* cq[2] = {nullptr, nullptr};
  ibv_qp* qp[2] = {nullptr, nullptr};
  // A node pair's RDMA writes go to the peer's memory: its address and rkey (remote; else the loopback, B's
  // region here).
  bool remote = false;
  std::uint64_t remote_addr = 0;
  std::uint32_t remote_rkey = 0;
  std::string cleanup_error;  // the first release that failed (a note, not the verdict)

  unsigned char* a_tx() const { return buf; }
  unsigned char* b_rx() const { return buf + region; }
  unsigned char* a_rx() const { return buf + 2 * region; }
  session() = default;
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() { release(); }
  // Destroys what was made, in reverse order, once; the first release that failed is in cleanup_error.
  void release();
};

inline constexpr int k_queue_depth = 16;  // send window and receive queue of each QP

// Moves `size` bytes: the send/recv ping-pong, then RDMA writes; fills `out` (latency, bandwidth, verified).
std::optional<failure> run_size(session& s, std::uint64_t size, int iters, rdma_size_result& out);

// --- a node pair (rdma_peers.cpp): one QP here, the other on the peer node -----------------------------------
// What each side tells the other of its QP (the "qp" line of the pair's exchange).
struct qp_info {
  std::uint32_t qpn = 0;
  std::uint16_t lid = 0;
  bool has_gid = false;
  ibv_gid gid{};
  int mtu = 0;  // ibv_mtu of the port (1 = 256 ... 5 = 4096)
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
};

// This node's half on an ACTIVE port: the GID (RoCE) or LID, the memory, side `side`'s CQ and QP in INIT; fills
// `mine` (and r's path fields).
std::optional<failure> pair_prepare(session& s, const ibv_port_attr& pa, rdma_port_result& r, std::uint64_t max_size,
                                    int side, qp_info& mine);
// RTR and RTS towards the peer's QP, at path MTU `mtu`.
std::optional<failure> pair_connect(session& s, int side, const rdma_port_result& r, const qp_info& peer, int mtu);

// Side A (0) of a pair: the ping-pong and the writes of one size into the peer's memory (s.remote_*).
std::optional<failure> pair_send(session& s, std::uint64_t size, int iters, rdma_size_result& out);
// Side B (1): its first receive of a size (before A may send), the echoes of `iters` messages (the next
// receive posted after each but the last), and the check of what A wrote.
std::optional<failure> pair_post_first_recv(session& s, std::uint64_t size);
std::optional<failure> pair_echo(session& s, std::uint64_t size, int iters);
std::optional<failure> pair_verify_written(session& s, std::uint64_t size);

// The channel pair `pair` of a job step meets on: its hello, MUNGE purpose and ports (src/nccl/rendezvous.h).
detail::pair_channel rdma_pair_channel(std::uint64_t job, std::uint64_t step, int pair, int port_attempts = 0);

// The pairs between the step's nodes (req.peers) on the port that passed its loopback (o.ports), each role of
// this node in a thread of its own; fills o.pairs (or o.peers_note).
void run_peers(const verbs& v, ibv_device** list, int n, const rdma_probe_request& req, log_sink& lg,
               rdma_probe_outcome& o);

// One ACTIVE port (`pa` is its ibv_query_port): the GID or LID, the pair, then every size of `req`; fills `r`
// (r.device and r.port set by the caller).
void run_port(const verbs& v, ibv_context* ctx, const ibv_port_attr& pa, const rdma_probe_request& req, log_sink& lg,
              rdma_port_result& r);

}  // namespace mrcheck::dp

#endif
