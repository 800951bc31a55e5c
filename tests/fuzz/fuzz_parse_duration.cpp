// parse_duration(): probe_timeout= and nccl_timeout= in mrcheck.conf and plugstack arguments.
// Invariants: an accepted duration is within (0, 1 h] (a timeout of 0 or of days would turn a hung probe into a
// hung job step), it re-parses from "<ms>ms" to itself, and errors are one printable line.
#include "fuzz_common.h"

#include <mrcheck/units.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_duration(text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  auto ms = r->count();
  MRCHECK_FUZZ_REQUIRE(ms > 0 && ms <= 3600 * 1000, text);
  auto again = parse_duration(std::to_string(ms) + "ms");
  MRCHECK_FUZZ_REQUIRE(again && *again == *r, text);
  if (ms % 1000 == 0) {
    auto secs = parse_duration(std::to_string(ms / 1000));
    MRCHECK_FUZZ_REQUIRE(secs && *secs == *r, text);
  }
  return 0;
}
