// `mrcheck explain LOG`: the scanner's groups turned into findings and printed as text and JSON. The log is the
// job's output, so every byte of it is the user's; what explain prints lands in terminals, tickets and chat.
// Input: the log. Evidence: empty (unknown everything), and a second pass with a made-up node whose hostname
// may or may not be in the log, so both the "evidence applies" and "from another host" paths run.
// Invariants: one finding per failure group (failure_groups: what the program called fatal), in order; the text is
// printable lines; the JSON serialises (no invalid UTF-8 reaches it: dump() with the strict handler does not
// throw); every diagnosis string and the path note are printable.
// fuzz-requires: nccl_log.h
#include "fuzz_common.h"

#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>

#include <nlohmann/json.hpp>

namespace {

void check(const mrcheck::nccl_log_scanner& s, const mrcheck::node_evidence& ev,
           const mrcheck::evidence_origin& origin) {
  using mrcheck::fuzz::printable_ascii;
  auto findings = mrcheck::explain_groups(s, ev, origin);
  MRCHECK_FUZZ_REQUIRE(findings.size() == mrcheck::failure_groups(s, ev, origin).size(),
                       "one finding per failure group");
  MRCHECK_FUZZ_REQUIRE(findings.size() <= s.groups().size(), "no finding without a group");
  auto note = mrcheck::no_device_note(s, findings);
  if (note) MRCHECK_FUZZ_REQUIRE(printable_ascii(note->text), note->text);
  for (const auto& f : findings) {
    MRCHECK_FUZZ_REQUIRE(printable_ascii(f.diag.summary), f.diag.summary);
    MRCHECK_FUZZ_REQUIRE(printable_ascii(f.diag.fix), f.diag.fix);
    MRCHECK_FUZZ_REQUIRE(printable_ascii(f.diag.fallback), f.diag.fallback);
    for (const auto& e : f.diag.evidence) MRCHECK_FUZZ_REQUIRE(printable_ascii(e), e);
  }
  std::string text = mrcheck::findings_to_text(findings, "job.log", s);
  MRCHECK_FUZZ_REQUIRE(mrcheck::fuzz::printable_lines(text), text);
  nlohmann::json j = mrcheck::findings_to_json(findings, "job.log", s, origin);
  std::string dumped = j.dump();  // throws type_error 316 on invalid UTF-8
  MRCHECK_FUZZ_REQUIRE(!dumped.empty(), "empty json");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  nccl_log_scanner s;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    s.feed_line(line);
  }
  check(s, node_evidence{}, evidence_origin{});

  node_evidence ev;
  ev.memlock_soft = 64 << 10;
  ev.memlock_hard = 64 << 10;
  ev.memlock_source = "this shell (pid 77)";
  ev.cap_ipc_lock = false;
  ev.max_map_count = 65530;
  ev.mem_total = 64ull << 30;
  ev.kernel_stack = rdma_flavour::ofed;
  ev.user_stack = rdma_flavour::inbox;
  ev.rdma_core_version = "44.0";
  ev.has_iova2 = true;
  ev.peer_memory = false;
  ev.driver_flavour = nvidia_flavour::open;
  ev.driver_version = "580.82.09";
  check(s, ev, evidence_origin{"gpu-node-07", false});
  return 0;
}
