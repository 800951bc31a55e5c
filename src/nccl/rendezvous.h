// node-pair rendezvous: the orchestrators of the step's first two nodes meet on a TCP port derived from the job
// and step ids (nccl_pair_port), so rank 0's ncclUniqueId can travel from the first node to the second.
//
// Who the peer is: the hello is only a filter. The server answers a hello of its job.step with a MUNGE credential
// (include/mrcheck/munge_auth.h: purpose "nccl-pair", cluster, job, step, both nonces) that only the job's uid
// may decode and that only the job's uid (and gid) can have made; the joiner checks it and answers with its own.
// A listener that is not the job's (a user who bound the port first) is refused and the joiner walks on to the
// next port, where the job's server then listens; a connection that is not the job's is refused and the server
// accepts on. Every refusal is one line in `refused` naming the peer. After the meeting every line on the socket
// (the unique id, "noid", "peer-result") is a credential of the same session: it crosses encrypted, and only
// the job's peer can read or write it. munged unreachable: an error that says the probe could not authenticate.
//
// Why not NCCL_COMM_ID=<first node>:<port> alone: with a fixed port, a collision (another job's listener, a
// stale socket) can only be seen by the node that binds; the other node would connect to the wrong process.
// Here the first node binds the first free port of the sequence, the second node walks the same sequence and
// accepts only a peer that answers the hello with the same job.step; a different job that derived the same
// port answers "busy" and the walk goes on. The unique id itself then carries rank 0's bootstrap address as
// NCCL chose it (NCCL_SOCKET_IFNAME applies), exactly as in the same-node modes.
#pragma once

#include <mrcheck/munge_auth.h>
#include <mrcheck/status.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck::detail {

// What one kind of pair meets on: the same walk, hello, credentials and refusals for the NCCL pair and the
// data-plane probe's node pairs (include/mrcheck/rdma_probe.h), each with its own purpose, hello and ports.
struct pair_channel {
  std::string name;     // the prefix of every error and refusal line: "nccl rendezvous", "rdma pair 0"
  std::string hello;    // what a joining node says first (then " <nonce>"): "mrcheck-nccl 2 <job>.<step>"
  std::string purpose;  // the MUNGE binding's purpose: "nccl-pair", "rdma-pair 0"
  std::uint64_t job_id = 0;
  std::uint64_t step_id = 0;
  std::uint64_t port_salt = 0;  // the ports are nccl_pair_port(job, step ^ port_salt, attempt)
  int port_attempts = 0;        // 0: k_nccl_port_attempts
};
// The NCCL pair's channel for (job, step).
pair_channel nccl_pair_channel(std::uint64_t job_id, std::uint64_t step_id, int port_attempts = 0);

struct rendezvous {
  int fd = -1;             // connected TCP socket (owned by the caller)
  std::uint16_t port = 0;  // the port of the sequence it met on
  int attempt = -1;
  std::optional<munge_session> auth;  // the authenticated session every later line goes through
};

// First node: bind the first free port of the (job, step) sequence on every address, accept until a peer says
// hello with the same job.step or `deadline` passes. `port_attempts` defaults to k_nccl_port_attempts.
// Each refused peer adds one line to `refused`.
result<rendezvous> rendezvous_serve(std::uint64_t job_id, std::uint64_t step_id,
                                    std::chrono::steady_clock::time_point deadline, const munge_settings& auth,
                                    std::vector<std::string>& refused, int port_attempts = 0);
// Second node: walk the sequence on `host` (name or address) until a server of the same job.step answers.
result<rendezvous> rendezvous_join(const std::string& host, std::uint64_t job_id, std::uint64_t step_id,
                                   std::chrono::steady_clock::time_point deadline, const munge_settings& auth,
                                   std::vector<std::string>& refused, int port_attempts = 0);
// The same on any channel.
result<rendezvous> rendezvous_serve(const pair_channel& ch, std::chrono::steady_clock::time_point deadline,
                                    const munge_settings& auth, std::vector<std::string>& refused);
result<rendezvous> rendezvous_join(const pair_channel& ch, const std::string& host,
                                   std::chrono::steady_clock::time_point deadline, const munge_settings& auth,
                                   std::vector<std::string>& refused);
// After the meeting: one line to the peer as a credential of the session ("m CRED"), and the peer's next such
// line opened, within `until` (silence, EOF, a line over 64 KiB or one that does not open: an error naming why).
status send_sealed_line(rendezvous& rv, std::string_view body);
result<std::string> read_sealed_line(rendezvous& rv, std::chrono::steady_clock::time_point until);

// The session both sides of a channel use: this process's uid and gid may speak.
munge_session pair_session(const pair_channel& ch, bool server, const munge_settings& auth);

// The session both sides of a job's rendezvous use: the job's uid and gid (this process's) may speak.
munge_session nccl_pair_session(std::uint64_t job_id, std::uint64_t step_id, bool server, const munge_settings& auth);

// The hello a joining node sends and the server checks: "mrcheck-nccl 2 <job>.<step>" (then " <nonce>").
std::string rendezvous_hello(std::uint64_t job_id, std::uint64_t step_id);

}  // namespace mrcheck::detail
