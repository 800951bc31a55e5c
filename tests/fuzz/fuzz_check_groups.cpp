// parse_check_groups(): the value of --mr-check=LIST, typed by any user on any login node and carried to every
// node of the step. Untrusted. Invariants: more than 128 bytes or any byte outside [a-z,_] is refused; "off"
// never comes with a group; an accepted list always selects something or is exactly "off"; its canonical
// to_string() re-parses to the same groups ("off" drops a meaningless "verbose"); errors are one printable line
// (the value is quoted escaped).
#include "fuzz_common.h"

#include <mrcheck/config.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_check_groups(text);
  bool clean = text.size() <= 128;
  for (unsigned char c : text) clean = clean && ((c >= 'a' && c <= 'z') || c == ',' || c == '_');
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    MRCHECK_FUZZ_REQUIRE(r.error().message().size() <= 512, r.error().message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(clean, text);
  const check_groups& g = *r;
  MRCHECK_FUZZ_REQUIRE(!(g.off && g.any()), g.to_string());
  MRCHECK_FUZZ_REQUIRE(g.off || g.any(), g.to_string());
  auto again = parse_check_groups(g.to_string());
  if (g.off) {
    // "off" is the whole canonical form: a "verbose" next to it means nothing and is not kept.
    MRCHECK_FUZZ_REQUIRE(again && again->off && !again->any(), g.to_string());
  } else {
    MRCHECK_FUZZ_REQUIRE(again && *again == g, g.to_string());
  }
  return 0;
}
