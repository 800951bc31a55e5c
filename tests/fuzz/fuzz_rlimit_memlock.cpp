// parse_propagated_limit(): SLURM_RLIMIT_MEMLOCK as it arrives in the job environment ("65536", "U65536",
// RLIM_INFINITY as 18446744073709551615). Forgeable by the user. Invariants: it is read exactly as slurmstepd's
// _get_env_val() reads it (docs/slurm-rlimit-memlock.md), with the C library's own strtoul() as the
// oracle: accepted exactly when strtoul leaves nothing after the number, with strtoul's value; `canonical` only
// for [U] and plain digits that format back the same; format_propagated_limit() of a value parses back to it;
// errors are one printable line.
// fuzz-requires: memlock_chain.h
#include "fuzz_common.h"

#include <mrcheck/step.h>

#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_propagated_limit(text);
  // An environment value holds no NUL byte; strtoul would stop at one, so the oracle does not apply.
  if (text.find('\0') != std::string_view::npos) {
    if (!r) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  std::string rest(text);
  bool user = !rest.empty() && rest.front() == 'U';
  if (user) rest.erase(0, 1);
  char* end = nullptr;
  unsigned long want = std::strtoul(rest.c_str(), &end, 10);
  bool accepted = end != nullptr && *end == '\0';
  MRCHECK_FUZZ_REQUIRE(r.is_ok() == accepted, text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(r->value == want, text);
  MRCHECK_FUZZ_REQUIRE(r->user_requested == user, text);
  MRCHECK_FUZZ_REQUIRE(r->canonical == (!rest.empty() && format_propagated_limit(want) == rest), text);
  auto back = parse_propagated_limit(format_propagated_limit(r->value));
  MRCHECK_FUZZ_REQUIRE(back && back->value == r->value && !back->user_requested && back->canonical, text);
  return 0;
}
