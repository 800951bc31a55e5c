// The NCCL smoke test reads two things its rank children print: NCCL's own log (parse_nccl_log) and a
// "result {json}" control line (nccl_rank_report from_json). The children run as the job user with the job's
// environment (LD_PRELOAD, NCCL plugins), so both are untrusted.
// Invariants: every string parse_nccl_log keeps is printable ASCII within its documented bound; a "result" line
// either converts or throws a json exception the orchestrator catches (never a crash, never UB on odd numbers);
// to_json of a converted report converts back to the same report.
// fuzz-requires: nccl_probe.h
#include "fuzz_common.h"

#include <mrcheck/nccl_probe.h>

#include <nlohmann/json.hpp>

namespace {

void require_printable(const std::string& s, std::size_t max) {
  MRCHECK_FUZZ_REQUIRE(mrcheck::fuzz::printable_ascii(s) && s.size() <= max, s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);

  nccl_log_facts f = parse_nccl_log(text);
  require_printable(f.version, 64);
  require_printable(f.network, 64);
  require_printable(f.socket_devices, 200);
  for (const auto& s : f.transports) require_printable(s, 64);
  for (const auto& s : f.channels) require_printable(s, 64);
  for (const auto& s : f.ib_devices) require_printable(s, 128);
  for (const auto& s : f.warnings) require_printable(s, 400);
  for (const auto& t : f.init_timings) {
    require_printable(t.line, 400);
    // Finding F7 (README.md): the part names were kept raw.
    MRCHECK_FUZZ_REQUIRE(t.parts.size() <= 32, std::to_string(t.parts.size()));
    for (const auto& [name, secs] : t.parts) require_printable(name, 64);
  }
  nccl_log_facts merged;
  merge_nccl_log_facts(merged, f);
  merge_nccl_log_facts(merged, f);
  MRCHECK_FUZZ_REQUIRE(merged.channels == f.channels && merged.ib_devices == f.ib_devices, "merge is not idempotent");

  // Control lines, as pair.cpp reads them.
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!line.starts_with("result ")) continue;
    nccl_rank_report r;
    try {
      nlohmann::json j = nlohmann::json::parse(line.substr(7));
      // A float or an out-of-range number where from_json reads an integer (`"rank": 1e300`) was UB in
      // get<int>() (README.md, finding F3): it must throw a json exception now.
      r = j.get<nccl_rank_report>();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    nlohmann::json j = r;
    nccl_rank_report back = j.get<nccl_rank_report>();
    MRCHECK_FUZZ_REQUIRE(back.rank == r.rank && back.stage == r.stage && back.error == r.error &&
                             back.count == r.count && back.phases_ms.size() == r.phases_ms.size() &&
                             back.nccl_result == r.nccl_result && back.nccl_version == r.nccl_version &&
                             back.cuda_driver_version == r.cuda_driver_version && back.mismatches == r.mismatches &&
                             back.first_bad_index == r.first_bad_index,
                         j.dump());
  }
  return 0;
}
