// The forms a failed registration (or a neighbouring RDMA failure) takes in a log, as data, and the generic
// readers every form shares: one prefix reader (launchers, collectors, the libraries' own headers), one errno
// reader (every notation libraries print), and a cheap rejection of lines no form can match.
// Private to src/nccl; the scanner (nccl_log.cpp) is its user. Each reader has its file: line_prefix.cpp,
// errno_reader.cpp, form_table.cpp (rows and their matchers, form_matchers*.cpp), open_reader.cpp, prefilter.cpp.
// The table and why each row exists: docs/transports.md, "Line forms".
#pragma once

#include <mrcheck/diagnosis.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace mrcheck::forms {

// What the prefixes of a line said, and the message after them.
struct prefix {
  std::optional<int> rank;   // srun -l "3: ", "[rank3]:", OpenMPI "[1,3]<stderr>:"
  std::string host;          // NCCL "host:pid:tid", UCX "[host:pid:tid]", pdsh "host: " (escaped, <= 64)
  std::optional<long> pid;   // from host:pid:tid
  std::string thread;        // "host:pid:tid", or a glog thread id; "" when the line names none
  std::string_view rest;     // the line after launcher/collector/timestamp prefixes
  std::string_view message;  // after "NCCL WARN " / "NCCL INFO " / glog "file:line] " when present, else rest
  bool warn = false;         // NCCL WARN (or NCCL 2.3's " WARN ")
  bool info = false;         // NCCL INFO
};
prefix read_prefix(std::string_view line);

// The errno a message prints, in any notation: explicit ("errno=1", "errno 14", "errno:22", "error code: 14",
// "Os { code: 12", "Unknown error 524"), negative returns ("failed -12", "return -12", "RC: -12", "ret is:-12",
// "err(-12)", "status -12", "code -93"), a number right after a strerror text ("Cannot allocate memory (12)",
// "Invalid argument(22)", "Bad address [14]"), the glibc strerror text itself, an errno name ("ENOMEM").
// Explicit markers win over text, text over return codes; "-1" alone is the C failure convention, not an errno.
// 0 when none is printed.
int errno_in(std::string_view text);

// Scanner-level classes of lines, set by the cheap rejection.
enum anchor_class : unsigned {
  k_form = 1u,       // a form of the table may match
  k_warn = 2u,       // a WARN line (pending warnings, src/explain/read/nccl_log.cpp)
  k_rank = 4u,       // "rank N nranks M" announcements
  k_container = 8u,  // lines the container evidence reads (src/explain/causes/container_runtime.cpp)
  k_net_ib = 16u,    // "NET/IB" (the socket-fallback note needs one)
  k_path = 32u,      // NCCL's GPUDirect RDMA and DMA-BUF lines (the path note, src/explain/path_note.cpp)
  k_env = 64u,       // what the job asked for (NCCL_NET, NCCL_IB_HCA) and NCCL's notes on limits (stack size)
};

// One pass over the line (multi-pattern Wu-Manber over the anchors of the table plus the scanner's own), OR of
// the classes whose anchor occurs. 0 for the ordinary line, the common case.
unsigned classify(std::string_view line);

// The event a form recognised on one line.
struct match {
  failure what;
  bool gpu_text = false;  // the message says the buffer is GPU memory ("GPU MR", "(cuda)", "VRAM")
};
// Tries the table's rows in order, then the open-world reader; nullopt when neither reads the line.
std::optional<match> match_line(const prefix& p);

// The open-world reader (src/explain/read/open_reader.cpp): a non-INFO line naming a failed RDMA, fabric or GPU-memory
// operation (a call of a known API family or a library's wording) with a failure word and an errno is an event
// even when no row names its library.
bool open_world_event(const prefix& p, match& out);

// One row of the table, for the documentation test and the tests that run every sample through match_line().
struct form_row {
  std::string_view anchor;    // a literal the line contains (>= 5 bytes: the cheap rejection is built from these)
  std::string_view library;   // who prints it
  std::string_view call;      // the call it reports ("" = named on the line)
  std::string_view errno_at;  // where the errno is ("strerror text", "RC: -N", "-", ...)
  std::string_view host_at;   // where the host is
  std::string_view sample;    // a real line
  std::string_view source;    // its public source
};
std::span<const form_row> rows();

}  // namespace mrcheck::forms
