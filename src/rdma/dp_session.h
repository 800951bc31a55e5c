// One port's loopback in the data-plane probe (rdma_probe.h): the two queue pairs, their memory, and the
// traffic over them. Private to src/rdma (data_plane.cpp sets up, dp_traffic.cpp moves and checks bytes).
#pragma once

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

// One ACTIVE port (`pa` is its ibv_query_port): the GID or LID, the pair, then every size of `req`; fills `r`
// (r.device and r.port set by the caller).
void run_port(const verbs& v, ibv_context* ctx, const ibv_port_attr& pa, const rdma_probe_request& req, log_sink& lg,
              rdma_port_result& r);

}  // namespace mrcheck::dp

#endif
