// parse_matrix_rules(): etc/mrcheck-rules.conf as an admin edits it, read by mrcheck-prolog as root on every node.
// A typo must be an error naming file:line, never a silently disabled rule, and no text can crash the prolog.
// Invariants: errors are one printable line starting with "<file>:<line>: "; every version the rules hold prints
// and re-parses to itself; PCI device ids are normalised ("0x" + 1-4 lower-case hex digits); parsing is
// deterministic.
// fuzz-requires: matrix.h
#include "fuzz_common.h"

#include <mrcheck/matrix.h>

namespace {

void version_roundtrip(const std::optional<mrcheck::dotted_version>& v) {
  if (!v) return;
  auto again = mrcheck::parse_dotted_version(v->to_string());
  MRCHECK_FUZZ_REQUIRE(again && *again == *v && again->parts == v->parts, v->to_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = parse_matrix_rules(text, "rules.conf");
  if (!r) {
    const std::string m = r.error().message();  // a copy: error() returns by value
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(m) && m.rfind("rules.conf:", 0) == 0, m);
    return 0;
  }
  version_roundtrip(r->gpu_driver_min);
  version_roundtrip(r->cuda_driver_min);
  version_roundtrip(r->nccl_min);
  version_roundtrip(r->dmabuf_kernel_min);
  version_roundtrip(r->dmabuf_cuda_min);
  for (const auto& [major, fam] : r->hca_families) version_roundtrip(fam.min);
  for (const auto& [id, bytes] : r->gpu_memory) {
    MRCHECK_FUZZ_REQUIRE(id.size() >= 3 && id.size() <= 6 && id.rfind("0x", 0) == 0, id);
  }
  auto again = parse_matrix_rules(text, "rules.conf");
  MRCHECK_FUZZ_REQUIRE(again && again->gpu_memory == r->gpu_memory && again->uverbs_abi == r->uverbs_abi &&
                           again->hca_families.size() == r->hca_families.size(),
                       "not deterministic");
  return 0;
}
