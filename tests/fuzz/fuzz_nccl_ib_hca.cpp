// parse_nccl_ib_hca(): NCCL_IB_HCA from the job's environment, which picks the HCAs the registration probe
// uses. Untrusted. Invariants (NCCL's parseStringList limits): at most 32 items, names non-empty and at most 15
// bytes, raw kept to 256 bytes; unset means "not set"; matches() is NCCL's rule: an empty list matches
// everything, '^' inverts.
// fuzz-requires: mr_probe.h
#include "fuzz_common.h"

#include <mrcheck/mr_probe.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  nccl_hca_filter f = parse_nccl_ib_hca(text);
  MRCHECK_FUZZ_REQUIRE(f.set, "set");
  MRCHECK_FUZZ_REQUIRE(f.items.size() <= 32, "more than 32 items");
  MRCHECK_FUZZ_REQUIRE(f.raw.size() <= 256, "raw longer than 256");
  for (const auto& it : f.items) {
    MRCHECK_FUZZ_REQUIRE(!it.prefix.empty() && it.prefix.size() <= 15, it.prefix);
    MRCHECK_FUZZ_REQUIRE(it.prefix.find(',') == std::string::npos && it.prefix.find(':') == std::string::npos,
                         it.prefix);
  }
  if (f.items.empty()) {
    MRCHECK_FUZZ_REQUIRE(f.matches("mlx5_0", 1) != f.exclude, "empty list must match everything");
  } else {
    // Each listed device (name as given, its port or any) is matched unless the list excludes.
    for (const auto& it : f.items) {
      MRCHECK_FUZZ_REQUIRE(f.matches(it.prefix, it.port) != f.exclude, it.prefix);
    }
  }
  nccl_hca_filter unset = parse_nccl_ib_hca(std::nullopt);
  MRCHECK_FUZZ_REQUIRE(!unset.set && unset.items.empty() && unset.matches("mlx5_0", 1), "unset");
  return 0;
}
