// parse_propagated_limit(): SLURM_RLIMIT_MEMLOCK as it arrives in the job environment ("65536", "U65536",
// RLIM_INFINITY as 18446744073709551615). Forgeable by the user. Invariants: only an optional 'U' followed by
// decimal digits is accepted (what slurmstepd's strtoul would take without junk), the value is exactly that
// number, format_propagated_limit() of it parses back to it, and errors are one printable line.
// fuzz-requires: memlock_chain.h
#include "fuzz_common.h"

#include <mrcheck/memlock_chain.h>

#include <charconv>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_propagated_limit(text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == 'U') digits.remove_prefix(1);
  MRCHECK_FUZZ_REQUIRE(r->user_requested == (digits.size() + 1 == text.size()), text);
  MRCHECK_FUZZ_REQUIRE(!digits.empty(), text);
  for (char c : digits) MRCHECK_FUZZ_REQUIRE(c >= '0' && c <= '9', text);
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  MRCHECK_FUZZ_REQUIRE(ec == std::errc() && v == r->value, text);
  auto back = parse_propagated_limit(format_propagated_limit(r->value));
  MRCHECK_FUZZ_REQUIRE(back && back->value == r->value && !back->user_requested, text);
  return 0;
}
