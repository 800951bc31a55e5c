// Re-validation after a change (revalidate.h).
#include "prolog/revalidate.h"

#include <mrcheck/child.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <pwd.h>
#include <unistd.h>
#include <algorithm>
#include <initializer_list>
#include <string_view>

namespace mrcheck::prolog {

bool revalidation_due(const std::string& policy, const stack_history& h) {
  if (policy == "never") return false;
  if (policy == "always") return true;
  return !h.changes.empty() && (h.revalidated.empty() || h.revalidated == "fail");
}

nccl_mode revalidation_nccl_mode(const node_facts& f) {
  int gpus = f.gpus ? static_cast<int>(std::min<std::size_t>(f.gpus->size(), 1024)) : 0;
  // One node: the pair never spans two (node-pair is the plugin's, with a step of two nodes).
  return choose_nccl_mode(gpus, 1).mode.value_or(nccl_mode::local_pair);
}

namespace {

struct probe_run {
  verdict v = verdict::error;
  std::string what;
};

// `args` as words, not a std::vector<std::string> temporary: g++ 16 at -O2 (sid's, the Slurm 26.05 leg) reports a
// false -Wfree-nonheap-object on that temporary's destruction once this function is inlined.
probe_run run_probe(const config& cfg, std::initializer_list<std::string_view> args,
                    std::chrono::milliseconds timeout) {
  std::string name = fmt::format("probe {}", args.size() > 1 ? *(args.begin() + 1) : std::string_view());
  child_spec spec;
  spec.argv.push_back(cfg.helper_path());
  for (std::string_view a : args) spec.argv.emplace_back(a);
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"};
  spec.timeout = timeout;
  spec.cwd = "/";
  if (::geteuid() == 0) {
    // Unprivileged, as a job would be: a probe that only passes as root proves nothing.
    const passwd* pw = ::getpwnam("nobody");
    spec.uid = pw ? pw->pw_uid : 65534;
    spec.gid = pw ? pw->pw_gid : 65534;
  }
  auto out = run_child(spec);
  if (!out) return {verdict::error, fmt::format("{}: {}", name, out.error().message())};
  if (out->timed_out) return {verdict::fail, fmt::format("{}: {}", name, out->describe())};
  nlohmann::json j = nlohmann::json::parse(out->out, nullptr, false);
  report r;
  std::string err;
  if (j.is_discarded() || !report_from_json(j, r, err)) {
    return {verdict::error, fmt::format("{}: {}, no verdict ({})", name, out->describe(),
                                        escape_line(err.empty() ? out->err : err, 120))};
  }
  for (const auto& c : r.checks) {
    if (c.result == verdict::fail) return {verdict::fail, fmt::format("{}: {}", c.id, escape_line(c.summary, 140))};
  }
  verdict v = r.overall();
  if (r.checks.empty() ||
      std::all_of(r.checks.begin(), r.checks.end(), [](const check_result& c) { return c.result == verdict::skip; })) {
    v = verdict::skip;
  }
  return {v, fmt::format("{}: {}", name, to_string(v))};
}

}  // namespace

check_result run_revalidation(const config& cfg, nccl_mode mode) {
  check_result c;
  c.id = k_revalidate_id;
  std::string helper = cfg.helper_path();
  if (::access(helper.c_str(), X_OK) != 0) {
    c.result = verdict::skip;
    c.summary = fmt::format("no helper {} to run the probes", escape_line(helper, 128));
    return c;
  }
  probe_run mr = run_probe(cfg, {"probe", "mr", "--json"}, cfg.probe_timeout);
  probe_run nccl = run_probe(cfg, {"probe", "nccl", "--mode", to_string(mode), "--json"}, cfg.nccl_timeout);
  probe_run rdma = run_probe(cfg, {"probe", "rdma", "--json"}, cfg.probe_timeout);
  c.detail = mr.what + "\n" + nccl.what + "\n" + rdma.what;
  for (const probe_run* p : {&mr, &nccl, &rdma}) {
    if (p->v == verdict::fail) {
      c.result = verdict::fail;
      c.summary = p->what;
      c.hint = "the stack changed and a registration, NCCL or data-plane test fails now: see the change lines above";
      return c;
    }
  }
  auto all = [&](verdict v) { return mr.v == v && nccl.v == v && rdma.v == v; };
  c.result = mr.v == verdict::error || nccl.v == verdict::error || rdma.v == verdict::error ? verdict::error
             : all(verdict::skip)                                                           ? verdict::skip
                                                                                            : verdict::pass;
  c.summary = fmt::format("{}; {}; {}", mr.what, nccl.what, rdma.what);
  return c;
}

}  // namespace mrcheck::prolog
