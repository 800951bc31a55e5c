// The admin handoff's lines and credentials (src/admin/handoff.cpp): the hello, bounded line reads and writes,
// and the two authenticated halves of one exchange (include/mrcheck/munge_auth.h), node 0's and the sender's.
#pragma once

#include <mrcheck/munge_auth.h>
#include <mrcheck/status.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace mrcheck::handoff_io {

using clock = std::chrono::steady_clock;

int ms_until(clock::time_point t);
// "mrcheck-admin 2 JOB.STEP" (the sender adds " NONCE").
std::string hello(std::uint64_t job, std::uint64_t step);
// Root (uid 0, gid 0) on both sides: "listener" on node 0, "collector" on the others.
munge_session admin_session(std::uint64_t job, std::uint64_t step, bool listener, const munge_settings& auth);
// One '\n'-terminated line of at most `max` bytes before `until`.
bool read_line(int fd, std::string& out, std::size_t max, clock::time_point until);
bool send_all(int fd, std::string_view s);

// Node 0's side once the peer's port and hello passed: its credential, then the peer's record in the peer's
// credential (the body), or why not ("refused peer FROM: ...").
result<std::string> accept_sealed(int c, munge_session& s, const std::string& nonce, clock::time_point until,
                                  const std::string& from);

// What one connected socket to a listener of the sequence said. kind: delivered, walk on (another step's
// listener, or one refused: then `why` says so), or stop with `why` (node 0 refused the record, munged down).
struct send_outcome {
  enum class kind { delivered, walk, stop } what = kind::walk;
  std::string why;
};
send_outcome send_sealed(int fd, std::uint64_t job_id, std::uint64_t step_id, const std::string& record,
                         clock::time_point deadline, const munge_settings& auth, const std::string& source);

}  // namespace mrcheck::handoff_io
