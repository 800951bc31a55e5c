// parse_dotted_version() and the integer version decoders: versions read from sysfs (fw_ver, module version),
// /proc/driver/nvidia/version, library file names and the rules file.
// Invariants: an accepted version has 1..8 numeric parts and prints back to text that re-parses equal; ordering
// is a total order consistent with equality (a trailing ".0" does not matter); cuda_version_from_int and
// nccl_version_from_int never crash on any int and give versions that re-parse.
// Input: the text; its first 8 bytes also serve as two ints for the decoders.
// fuzz-requires: matrix.h
#include "fuzz_common.h"

#include <mrcheck/matrix.h>

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto v = parse_dotted_version(text);
  if (!v) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(v.error().message()), v.error().message());
  } else {
    MRCHECK_FUZZ_REQUIRE(!v->parts.empty() && v->parts.size() <= 8, text);
    auto again = parse_dotted_version(v->to_string());
    MRCHECK_FUZZ_REQUIRE(again && again->parts == v->parts, v->to_string());
    dotted_version padded = *v;
    padded.parts.push_back(0);
    MRCHECK_FUZZ_REQUIRE(padded == *v && !(padded < *v) && !(*v < padded), v->to_string());
  }
  if (size >= 8) {
    int a = 0;
    int b = 0;
    std::memcpy(&a, data, sizeof a);
    std::memcpy(&b, data + 4, sizeof b);
    for (const dotted_version& d : {cuda_version_from_int(a), nccl_version_from_int(b)}) {
      if (d.parts.empty()) continue;
      auto again = parse_dotted_version(d.to_string());
      MRCHECK_FUZZ_REQUIRE(again && again->parts == d.parts, d.to_string());
    }
    if (v) {
      auto c = cuda_version_from_int(a);
      // Trichotomy: exactly one of <, ==, > holds.
      int n = (c < *v) + (c == *v) + (c > *v);
      MRCHECK_FUZZ_REQUIRE(n == 1, v->to_string());
    }
  }
  return 0;
}
