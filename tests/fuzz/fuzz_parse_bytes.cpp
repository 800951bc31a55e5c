// parse_bytes(): memlock_min= in mrcheck.conf and plugstack arguments, and sizes on the command line.
// Invariants beyond "no crash":
//  - k_unlimited comes only from the words unlimited/infinity, never from a number (a number that large
//    is an overflow and must be refused, or a typo would switch a minimum off);
//  - a value that parsed re-parses from its decimal form to itself, and equals the number times its suffix;
//  - every error message is one printable line (the input is quoted escaped).
#include "fuzz_common.h"

#include <mrcheck/units.h>

#include <cctype>
#include <charconv>

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_bytes(text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  std::string_view t = trim(text);
  bool starts_numeric = !t.empty() && std::isdigit(static_cast<unsigned char>(t.front()));
  if (*r == k_unlimited) {
    MRCHECK_FUZZ_REQUIRE(!starts_numeric, t);
    return 0;
  }
  // The decimal form is exact and reads back the same.
  auto again = parse_bytes(std::to_string(*r));
  MRCHECK_FUZZ_REQUIRE(again && *again == *r, t);
  // The value is the leading number shifted by the suffix's power of 1024.
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  MRCHECK_FUZZ_REQUIRE(ec == std::errc() && ptr != t.data(), t);
  bool exact = false;
  for (int shift : {0, 10, 20, 30, 40}) {
    if (n <= (k_unlimited >> shift) && (n << shift) == *r) exact = true;
  }
  MRCHECK_FUZZ_REQUIRE(exact, t);
  // Pure digits mean bytes.
  if (ptr == t.data() + t.size()) MRCHECK_FUZZ_REQUIRE(*r == n, t);
  return 0;
}
