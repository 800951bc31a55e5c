// decode_submit_record(): MRCHECK_SUBMIT, set by srun/sbatch on the submit host and read on the node as root.
// The user can forge it. Invariants: more than 1024 bytes is refused; a record that decodes has a known tool, a
// numeric job id, at most 16 hops with pids in 1..2^30 and text fields of at most 64 bytes; it re-encodes to at
// most 1024 bytes and decodes again to the same record; errors are one printable line.
// fuzz-requires: memlock_chain.h
#include "fuzz_common.h"

#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  auto r = decode_submit_record(text);
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(text.size() <= k_submit_record_max, "longer than the cap");
  MRCHECK_FUZZ_REQUIRE(r->tool == "srun" || r->tool == "sbatch" || r->tool == "salloc", r->tool);
  MRCHECK_FUZZ_REQUIRE(r->host.size() <= 64, r->host);
  for (char c : r->job_id) MRCHECK_FUZZ_REQUIRE(c >= '0' && c <= '9', r->job_id);
  if (r->sent) MRCHECK_FUZZ_REQUIRE(parse_propagated_limit(*r->sent).is_ok(), *r->sent);
  MRCHECK_FUZZ_REQUIRE(r->chain.size() <= k_submit_max_hops, "too many hops");
  for (const auto& h : r->chain) {
    MRCHECK_FUZZ_REQUIRE(h.pid > 0 && h.pid <= 0x3fffffff, "pid");
    MRCHECK_FUZZ_REQUIRE(h.comm.size() <= 64, h.comm);
  }
  std::string again = encode_submit_record(*r);
  MRCHECK_FUZZ_REQUIRE(again.size() <= k_submit_record_max, again);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(again), again);
  auto back = decode_submit_record(again);
  MRCHECK_FUZZ_REQUIRE(back.is_ok(), again + " -> " + back.error().message());
  MRCHECK_FUZZ_REQUIRE(*back == *r, again);
  return 0;
}
