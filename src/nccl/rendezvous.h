// node-pair rendezvous: the orchestrators of the step's first two nodes meet on a TCP port derived from the job
// and step ids (nccl_pair_port), so rank 0's ncclUniqueId can travel from the first node to the second.
//
// Why not NCCL_COMM_ID=<first node>:<port> alone: with a fixed port, a collision (another job's listener, a
// stale socket) can only be seen by the node that binds; the other node would connect to the wrong process.
// Here the first node binds the first free port of the sequence, the second node walks the same sequence and
// accepts only a peer that answers the hello with the same job.step; a different job that derived the same
// port answers "busy" and the walk goes on. The unique id itself then carries rank 0's bootstrap address as
// NCCL chose it (NCCL_SOCKET_IFNAME applies), exactly as in the same-node modes.
#pragma once

#include <mrcheck/status.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace mrcheck::detail {

struct rendezvous {
  int fd = -1;             // connected TCP socket (owned by the caller)
  std::uint16_t port = 0;  // the port of the sequence it met on
  int attempt = -1;
};

// First node: bind the first free port of the (job, step) sequence on every address, accept until a peer says
// hello with the same job.step or `deadline` passes. `port_attempts` defaults to k_nccl_port_attempts.
result<rendezvous> rendezvous_serve(std::uint64_t job_id, std::uint64_t step_id,
                                    std::chrono::steady_clock::time_point deadline, int port_attempts = 0);
// Second node: walk the sequence on `host` (name or address) until a server of the same job.step answers.
result<rendezvous> rendezvous_join(const std::string& host, std::uint64_t job_id, std::uint64_t step_id,
                                   std::chrono::steady_clock::time_point deadline, int port_attempts = 0);

// The hello a joining node sends and the server checks: "mrcheck-nccl 1 <job>.<step>".
std::string rendezvous_hello(std::uint64_t job_id, std::uint64_t step_id);

}  // namespace mrcheck::detail
