// Verdicts are data. Every check - memlock, mr_host, rdma_stack, ... - returns a check_result; the same
// report object feeds the SPANK log, the prolog's drain reason, the job's AdminComment, the CLI and its JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

enum class verdict {
  pass,
  warn,   // works today but is fragile or slow; never fails a job
  fail,   // NCCL registration will (or did) fail here
  skip,   // not applicable or not supported here (no HCA, no GPU, built without CUDA)
  error,  // the checker itself broke (unreadable file, probe crashed); says nothing about the node
};

std::string_view to_string(verdict v);
std::optional<verdict> parse_verdict(std::string_view s);
// Severity order for "the worst of": pass < skip < warn < error < fail.
int severity(verdict v);
verdict worst(verdict a, verdict b);

// Who fixes a finding: the job (its script, environment, options, container), the node (its stack: driver,
// firmware, modules, slurmd's unit, sysctls) or the site (slurm.conf, plugstack, a site image). `none`: not said.
enum class fix_owner : std::uint8_t { none, job, node, site };
std::string_view to_string(fix_owner o);  // "", "job", "node", "site"
std::optional<fix_owner> parse_fix_owner(std::string_view s);

struct check_result {
  std::string id;  // stable id: memlock, mr_host, rdma_stack, ... (config, logs, JSON, fixture names)
  verdict result = verdict::skip;
  std::string summary;  // one line: what was found ("task memlock 64 KiB < required 8 GiB")
  std::string detail;   // the facts behind it, may be several lines
  std::string hint;     // the fix, one line; empty on pass/skip
  // The one device the finding is about ("mlx5_0", "0000:3b:00.0"); "" when none or several. Drain reasons carry
  // it as their <device> part (docs/drain-reasons.md); JSON has it only when set.
  std::string device = {};
  // Who fixes it, when the verdict names it (stack, nofile, the plugin's memlock); else owner_of() (owner.h).
  fix_owner owner = fix_owner::none;
  // Made by the step's probe runner for a probe that did not finish (killed, or not run once the step's probe
  // time was used up or the step was being ended: src/step/plugin_engine.cpp). In memory only, never in JSON: a
  // cancelled step's record leaves these out (cancelled_step_record, src/step/task_step.cpp).
  bool incomplete = false;
};

struct report {
  std::vector<check_result> checks;

  // The worst verdict over all checks, ignoring skip; pass when there are none.
  verdict overall() const;
  const check_result* find(std::string_view id) const;
};

// One line per check that is not pass/skip: "mrcheck: <id>: FAIL: <summary> (fix: <hint>)". The owner is not
// added here (these lines are parsed as they are); stack and nofile say it in their summary.
std::vector<std::string> failure_lines(const report& r);
// Human text: a table of all checks.
std::string to_text(const report& r);

void to_json(nlohmann::json& j, const check_result& c);
void from_json(const nlohmann::json& j, check_result& c);
// {"verdict": ..., "checks": [...]}; callers add "facts".
nlohmann::json report_to_json(const report& r);
// Parses what report_to_json wrote (a probe child's stdout, a spooled node report).
// Unknown verdict strings make it an error, never a silent pass.
bool report_from_json(const nlohmann::json& j, report& out, std::string& error);

}  // namespace mrcheck
