// parse_proc_stat(): /proc/PID/stat of each process of the chain. comm is chosen by the process itself
// (prctl(PR_SET_NAME), the executable's name) and may hold spaces, '(' and ')': a job can name itself
// "x) R 1 (" to try to confuse the walk to its parent.
// Invariants: pid > 0, ppid >= 0, the state is one non-blank byte, comm is what lies between the first '(' and the
// last ')', and "pid (comm) S ppid" rebuilt from the fields parses back to the same fields; errors are one
// printable line (comm in them is escaped).
#include "fuzz_common.h"

#include <mrcheck/facts.h>

#include <fmt/format.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_proc_stat(text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(r->pid > 0 && r->ppid >= 0, text);
  char st = r->state;
  MRCHECK_FUZZ_REQUIRE(st != ' ' && st != '\t' && st != '\r' && st != '\v' && st != '\f', text);
  std::size_t open = text.find('(');
  std::size_t close = text.rfind(')');
  MRCHECK_FUZZ_REQUIRE(open != std::string_view::npos && close != std::string_view::npos && close > open, text);
  MRCHECK_FUZZ_REQUIRE(r->comm == text.substr(open + 1, close - open - 1), r->comm);

  std::string rebuilt = fmt::format("{} ({}) {} {} 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 77 ...\n", r->pid,
                                    r->comm, st, r->ppid);
  auto again = parse_proc_stat(rebuilt);
  MRCHECK_FUZZ_REQUIRE(again, rebuilt);
  MRCHECK_FUZZ_REQUIRE(again->pid == r->pid && again->ppid == r->ppid && again->state == st && again->comm == r->comm,
                       rebuilt);
  return 0;
}
