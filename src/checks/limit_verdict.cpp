// The verdicts of `stack` and `nofile` (include/mrcheck/limit_chain.h): the Slurm task's predicted limit in the
// plugin, the calling process's chain in `mrcheck report`; and the chain table both print.
#include <mrcheck/limit_chain.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

namespace mrcheck {

namespace {

std::string rule_text(rlimit_kind k, std::uint64_t soft, const config& c) {
  bool bad = limit_bad(k, soft, c);
  if (k == rlimit_kind::stack) return bad ? "above " + limit_rule(k, c) : "within " + limit_rule(k, c);
  return bad ? "below " + limit_rule(k, c) : "at least " + limit_rule(k, c);
}

// The nearest process (index into chain) whose parent had another soft limit while it has the current one.
std::optional<std::size_t> changing_hop(rlimit_kind k, const std::vector<process_fact>& chain) {
  if (chain.empty() || !limit_of(chain[0], k)) return std::nullopt;
  const std::uint64_t value = limit_of(chain[0], k)->soft;
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    const auto& me = limit_of(chain[i], k);
    const auto& parent = limit_of(chain[i + 1], k);
    if (!me || me->soft != value || !parent) return std::nullopt;
    if (parent->soft != value) return i;
  }
  return std::nullopt;
}

// Each id written out, so the registry's test finds the code that makes it (check_registry_test).
check_result with_id(rlimit_kind k) {
  check_result r;
  if (k == rlimit_kind::stack)
    r.id = "stack";
  else
    r.id = "nofile";
  return r;
}

}  // namespace

check_result judge_task_limit(const limit_prediction& p, const config& c) {
  const auto& info = rlimit_info(p.kind);
  check_result r = with_id(p.kind);
  if (!p.known) {
    r.result = verdict::error;
    r.summary = fmt::format("the task's {} limit could not be read: {}", info.id,
                            p.notes.empty() ? std::string("unknown") : escape_line(p.notes.front(), 300));
    return r;
  }
  for (const auto& n : p.notes) r.detail += n + "\n";
  if (!p.hop) {
    r.result = verdict::pass;
    r.summary = fmt::format("task will start with {} soft {} ({})", info.id, format_limit(p.kind, p.start.soft),
                            rule_text(p.kind, p.start.soft, c));
    return r;
  }
  r.result = verdict::fail;
  r.owner = p.hop->owner;
  r.summary = fmt::format("task will start with {} soft {} ({}); set at {} ({}): {}", info.id,
                          format_limit(p.kind, p.start.soft), rule_text(p.kind, p.start.soft, c), p.hop->hop,
                          to_string(p.hop->owner), p.hop->cause);
  r.hint = p.hop->fix;
  return r;
}

check_result judge_chain_limit(rlimit_kind k, const std::vector<process_fact>& chain, const config& c) {
  const auto& info = rlimit_info(k);
  check_result r = with_id(k);
  if (chain.empty()) {
    r.result = verdict::error;
    r.summary = "could not read the process chain";
    return r;
  }
  const process_fact& start = chain.front();
  const auto& v = limit_of(start, k);
  if (!v) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read the {} limit of pid {} ({}): {}", info.id, start.pid,
                            escape_line(start.comm, 16), v.error().message());
    return r;
  }
  std::string head = fmt::format("{} ({}) {} soft {} ({})", escape_line(start.comm, 16), start.pid, info.id,
                                 format_limit(k, v->soft), rule_text(k, v->soft, c));
  if (!limit_bad(k, v->soft, c)) {
    r.result = verdict::pass;
    r.summary = head;
    return r;
  }
  r.result = verdict::fail;
  // srun sends this soft limit to every task (PropagateResourceLimits=ALL, Slurm's default).
  r.hint = k == rlimit_kind::stack
               ? fmt::format("`ulimit -s 8192` (any finite size up to {}) in this shell before srun/sbatch",
                             format_limit(k, c.stack_max))
               : fmt::format("`ulimit -n {}` or more in this shell before srun/sbatch", c.nofile_min);
  auto i = changing_hop(k, chain);
  if (!i) {
    r.owner = fix_owner::node;
    r.summary = head + "; the same up to the oldest process read: inherited from the node's login setup (node)";
    r.hint = fmt::format("the node's limits.conf or the unit of the login service (its {})", info.id);
    return r;
  }
  const process_fact& hop = chain[*i];
  const process_fact& parent = chain[*i + 1];
  // A process of the user set it (their shell's `ulimit`); one of root's (sshd, login, PAM) is the node's setup.
  r.owner = hop.uid && *hop.uid != 0 ? fix_owner::job : fix_owner::node;
  r.summary = fmt::format("{}; set at pid {} ({}) ({}), its parent pid {} ({}) had soft {}", head, hop.pid,
                          escape_line(hop.comm, 16), to_string(r.owner), parent.pid, escape_line(parent.comm, 16),
                          format_limit(k, limit_of(parent, k)->soft));
  return r;
}

std::vector<std::string> limit_table_lines(const limit_prediction& p) {
  const auto id = rlimit_info(p.kind).id;
  std::vector<std::string> out;
  out.push_back(
      fmt::format("mrcheck: {}: {:<12} {:<34} {:>12} {:>12}  {}", id, "host", "process", "soft", "hard", "note"));
  for (const auto& r : p.rows) {
    std::string soft = r.value ? format_limit(p.kind, r.value->soft) : "?";
    std::string hard = r.value ? format_limit(p.kind, r.value->hard) : "?";
    out.push_back(fmt::format("mrcheck: {}: {:<12} {:<34} {:>12} {:>12}  {}", id, escape_line(r.where, 12),
                              escape_line(r.what, 34), soft, hard, escape_line(r.note, 200)));
  }
  for (const auto& n : p.notes) out.push_back(fmt::format("mrcheck: {}: note: {}", id, escape_line(n, 300)));
  if (p.hop) {
    out.push_back(fmt::format("mrcheck: {}: set at {} ({}): {}", id, p.hop->hop, to_string(p.hop->owner),
                              escape_line(p.hop->cause, 400)));
  }
  return out;
}

}  // namespace mrcheck
