// parse_memlock_from_limits(): /proc/PID/limits of every process of the chain (slurmd, slurmstepd, the task, its
// ancestors) and of a dumped tree a user may hand to `mrcheck report --root`.
// Invariants: a limit is a decimal number or exactly "unlimited" (a number equal to RLIM_INFINITY is refused,
// so a crafted file cannot pose as unlimited); the accepted values are those of the first "Max locked memory"
// line, rebuilt in the kernel's layout they parse back the same; errors are one printable line.
#include "fuzz_common.h"

#include <mrcheck/facts.h>

#include <fmt/format.h>

namespace {

std::string kernel_line(std::uint64_t v) {
  return v == mrcheck::k_unlimited ? std::string("unlimited") : std::to_string(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_memlock_from_limits(text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  // Only a line that says "unlimited" can give k_unlimited.
  if (r->soft == k_unlimited || r->hard == k_unlimited) {
    MRCHECK_FUZZ_REQUIRE(text.find("unlimited") != std::string_view::npos, "unlimited from a number");
  }
  std::string rebuilt = fmt::format(
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max locked memory         {:<20} {:<20} bytes     \n",
      kernel_line(r->soft), kernel_line(r->hard));
  auto again = parse_memlock_from_limits(rebuilt);
  MRCHECK_FUZZ_REQUIRE(again && *again == *r, rebuilt);
  return 0;
}
