// From scanner groups to findings: the shared diagnosis applied with this node's evidence, then text or JSON.
#include <mrcheck/child.h>
#include <mrcheck/container.h>
#include <mrcheck/explain.h>
#include <mrcheck/fabric.h>
#include <mrcheck/facts.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace mrcheck {

namespace {

std::string short_host(std::string_view h) { return std::string(h.substr(0, h.find('.'))); }

// The log names the failing host and it is this one. A log that names no host is no proof of where it ran.
bool log_is_from(const nccl_group& g, std::string_view host) {
  if (g.hosts.empty() || host.empty()) return false;
  const std::string want = short_host(host);
  return std::all_of(g.hosts.begin(), g.hosts.end(), [&](const std::string& h) { return short_host(h) == want; });
}

// The objects of one HCA resource that the log shows the device refusing ("limits exceeded" from mlx5 firmware,
// an allocation the efa driver failed): an ENOMEM of a call creating the same object is that limit.
std::set<std::string> refused_objects(const nccl_log_scanner& scanner) {
  std::set<std::string> out;
  for (const nccl_group* g : scanner.groups()) {
    const std::string_view o = hca_object(g->what.call);
    if (!o.empty() && (g->what.detail.find("limits exceeded") != std::string::npos ||
                       (g->what.transport == "kernel" && g->what.err == 12 && o != "mkey"))) {
      out.insert(std::string(o));
    }
  }
  return out;
}

std::string title(const failure& f) {
  switch (f.what) {
    case failure::kind::duplicate_gpu: return "Duplicate GPU detected";
    case failure::kind::no_device: return "NET/IB : No device found";
    case failure::kind::system_error: return "NCCL fatal error with no named call";
    case failure::kind::own_verdict: return fmt::format("mrcheck's {} check: FAIL", f.call);
    case failure::kind::fatal_warning: {
      std::string what = f.call == "cuda" ? fmt::format("CUDA failure '{}'", f.detail)
                         : f.call.empty() ? std::string("NCCL warning")
                                          : fmt::format("{} failed", f.call);
      if (f.err != 0) {
        std::string_view name = errno_name(f.err);
        what += fmt::format(": {}", name.empty() ? fmt::format("errno {}", f.err) : std::string(name));
      }
      return what + " (NCCL stopped on it)";
    }
    case failure::kind::completion_error: {
      std::string_view name = wc_status_name(f.wc_status.value_or(-1));
      return fmt::format("RDMA completion error {} ({})", name.empty() ? "status" : name, f.wc_status.value_or(-1));
    }
    case failure::kind::call: break;
  }
  std::string call = f.call.empty() ? "memory registration" : f.call;
  if (f.transport == "ofi") call = "NET/OFI " + call;
  if (f.transport == "libfabric")
    call = fmt::format("libfabric{} {}", f.provider.empty() ? "" : " " + f.provider, call);
  if (f.transport == "kernel") call = fmt::format("kernel {} {}", f.provider, call);
  if (f.transport == "ucx") call = "UCX " + call;
  if (f.err == 0) return fmt::format("{} failed (the log gives no errno)", call);
  std::string_view name = errno_name(f.err);
  return fmt::format("{} failed: {} ({})", call, name.empty() ? fmt::format("errno {}", f.err) : std::string(name),
                     errno_message(f.err).empty() ? "unknown" : errno_message(f.err));
}

std::string join(const std::set<std::string>& s, std::size_t max) {
  std::string out;
  std::size_t n = 0;
  for (const auto& v : s) {
    if (n == max) {
      out += fmt::format(" (+{} more)", s.size() - max);
      break;
    }
    out += (n++ ? " " : "") + v;
  }
  return out;
}

}  // namespace

std::string format_ranks(const std::set<int>& ranks) {
  std::string out;
  auto it = ranks.begin();
  while (it != ranks.end()) {
    int start = *it;
    int end = start;
    auto next = std::next(it);
    while (next != ranks.end() && *next == end + 1) {
      end = *next;
      ++next;
    }
    if (!out.empty()) out += ',';
    out += start == end ? std::to_string(start) : fmt::format("{}-{}", start, end);
    it = next;
  }
  return out;
}

node_evidence explain_evidence(const sysroot& root, evidence_origin& origin) {
  collect_options opts;
  opts.load_libraries = root.is_host();
  node_facts facts = collect_facts(root, opts);
  evidence_inputs in;
  in.facts = &facts;
  in.root = &root;
  node_evidence e = build_evidence(in);
  origin.hostname = facts.hostname;
  origin.from_root = !root.is_host();
  if (!facts.chain.empty()) {
    const process_fact& self = facts.chain.front();
    e.memlock_source = origin.from_root
                           ? fmt::format("pid {} ({}) in the --root tree", self.pid, escape_line(self.comm, 32))
                           : fmt::format("this shell on {}", facts.hostname.empty() ? "this node" : facts.hostname);
  }
  // The library's file name cannot tell MLNX/DOCA-OFED's rdma-core from the distribution's; dpkg can.
  if (auto dpkg = root.read("/var/lib/dpkg/status", 64u << 20)) {
    std::string version;
    rdma_flavour fl = user_stack_from_dpkg_status(*dpkg, &version);
    if (fl != rdma_flavour::unknown) {
      e.user_stack = fl;
      if (e.rdma_core_version.empty()) e.rdma_core_version = version;
    }
  }
  container_evidence(root, root.is_host() ? current_environment() : std::vector<std::string>{}, e);
  // Whether this node's IMEX daemon runs: it decides who fixes a refused MNNVL fabric handle (causes_nccl.cpp).
  if (imex_installed(root)) e.imex_daemon = read_imex_facts(root).daemon_pid.has_value();
  return e;
}

void apply_container_log(const container_log_scan& scan, node_evidence& e) {
  if (scan.runtime == container_runtime::none || e.runtime != container_runtime::none) return;
  // The log says where the job ran; this shell may well be on the host.
  e.in_container = true;
  e.runtime = scan.runtime;
}

namespace {

bool no_device_is_failure(const nccl_log_scanner& scanner, const nccl_group& g, const node_evidence& evidence,
                          const evidence_origin& origin) {
  if (scanner.asked_for_ib()) return true;
  // A multi-node job on nodes whose facts show HCAs wanted them: sockets there are the failure to explain.
  const bool facts_apply = origin.from_root || log_is_from(g, origin.hostname);
  return g.hosts.size() >= 2 && facts_apply && evidence.rdma_devices.value_or(0) > 0;
}

bool is_crash(const nccl_group& g) {
  return g.example.find("Segmentation fault") != std::string::npos ||
         g.example.find("signal 11") != std::string::npos || g.example.find("SIGSEGV") != std::string::npos;
}

}  // namespace

std::vector<const nccl_group*> failure_groups(const nccl_log_scanner& scanner, const node_evidence& evidence,
                                              const evidence_origin& origin) {
  std::vector<const nccl_group*> kept;
  bool specific = false;
  for (const nccl_group* g : scanner.groups()) {
    if (g->what.what == failure::kind::no_device && !no_device_is_failure(scanner, *g, evidence, origin)) continue;
    kept.push_back(g);
    specific = specific || g->what.what != failure::kind::system_error;
  }
  // The program's own "it failed" lines (torch's DistBackendError, nccl-tests' "NCCL failure") are findings only
  // when nothing more precise is in the log; otherwise they are that failure told again.
  // A crash is kept beside them only when NCCL's stack-size note may explain it (stack_limit).
  if (specific) {
    const bool stack_note = scanner.stack_unsafe_line() != 0;
    std::erase_if(kept, [&](const nccl_group* g) {
      return g->what.what == failure::kind::system_error && !(stack_note && is_crash(*g));
    });
  }
  return kept;
}

namespace {

void explain_one(const nccl_log_scanner& scanner, const nccl_group* g, const std::set<std::string>& refused,
                 const node_evidence& evidence, const evidence_origin& origin, std::vector<finding>& out) {
  {
    finding f;
    f.group = *g;
    failure what = g->what;
    what.hca_limit_in_log = refused.count(std::string(hca_object(what.call))) != 0;
    // EFAULT is GPU memory only when the log says so (NCCL's GDRDMA path); a line naming host memory said otherwise.
    if (what.err == 14 && !what.gpu_buffer && scanner.log_says_gpu_memory()) what.gpu_buffer = true;
    // Node facts describe one machine: they are used only for failures of that machine (docs/transports.md,
    // "Whose facts"). What the log itself says (a runtime it names) is kept either way.
    f.evidence_applies = origin.from_root || log_is_from(*g, origin.hostname);
    if (f.evidence_applies) {
      f.diag = diagnose(what, evidence);
    } else {
      node_evidence from_log;
      if (origin.log_runtime != container_runtime::none) {
        from_log.in_container = true;
        from_log.runtime = origin.log_runtime;
      }
      f.diag = diagnose(what, from_log);
      f.diag.confirmed = false;
      f.diag.evidence.push_back(fmt::format(
          "node facts not used: {}; to judge with them run `mrcheck explain` on the failing node, or `mrcheck dump` "
          "there and pass its tree with --root",
          g->hosts.empty() ? fmt::format("the log does not name the failing host (this is {})",
                                         origin.hostname.empty() ? "an unnamed node" : origin.hostname)
                           : fmt::format("the failures are from {}, this is {}", join(g->hosts, 4),
                                         origin.hostname.empty() ? "an unnamed node" : origin.hostname)));
    }
    if (g->what.what == failure::kind::fatal_warning) {
      f.diag.evidence.push_back("NCCL failed after: " + g->example);
    }
    if (g->what.what == failure::kind::system_error && is_crash(*g) && scanner.stack_unsafe_line() != 0) {
      f.diag.what = cause::stack_limit;
      f.diag.summary = fmt::format(
          "the process crashed after NCCL warned (line {}) that its stack size limit is unlimited: threads started "
          "under an unlimited RLIMIT_STACK get small default stacks, and NCCL 2.27's MNNVL topology search overflows "
          "them (NVIDIA/nccl #2186)",
          scanner.stack_unsafe_line());
      f.diag.fix =
          "set a finite stack limit for the job (`ulimit -s 8192`, or the PropagateResourceLimits of Slurm) "
          "or use NCCL >= 2.28, which caps its threads' stacks";
      f.diag.fallback.clear();
    } else if (g->what.what == failure::kind::system_error && f.diag.what == cause::unknown) {
      f.diag.summary = fmt::format("a failure mrcheck has no rule for: {}", g->example);
      f.diag.fix = "rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET) to see the warning NCCL failed on";
    }
    if ((g->what.what == failure::kind::system_error || g->what.what == failure::kind::fatal_warning) &&
        !g->context.empty()) {
      for (const auto& w : g->context) {
        f.diag.evidence.push_back(
            "preceding NCCL WARN: " + w +
            (w.find("libibverbs") != std::string::npos ? " (no RDMA user space: NCCL would use TCP sockets)" : ""));
      }
    }
    out.push_back(std::move(f));
  }
}

}  // namespace

std::vector<finding> explain_groups(const nccl_log_scanner& scanner, const node_evidence& evidence,
                                    const evidence_origin& origin) {
  std::vector<finding> out;
  const std::set<std::string> refused = refused_objects(scanner);
  for (const nccl_group* g : failure_groups(scanner, evidence, origin)) {
    explain_one(scanner, g, refused, evidence, origin, out);
  }
  return out;
}

std::optional<path_note> no_device_note(const nccl_log_scanner& scanner, const std::vector<finding>& findings) {
  for (const nccl_group* g : scanner.groups()) {
    if (g->what.what != failure::kind::no_device) continue;
    for (const finding& f : findings) {
      if (f.group.what.what == failure::kind::no_device) return std::nullopt;
    }
    return path_note{"sockets",
                     fmt::format("NCCL found no RDMA device (line {}: NET/IB : No device found) and used TCP sockets; "
                                 "a note, not a failure: the job did not ask for InfiniBand (NCCL_NET=IB, NCCL_IB_HCA)",
                                 g->first_line),
                     "none needed on a node without an HCA; where one is expected, check /sys/class/infiniband, "
                     "mlx5_ib/ib_uverbs and /dev/infiniband in containers (`mrcheck report`)",
                     false};
  }
  return std::nullopt;
}

std::string findings_to_text(const std::vector<finding>& findings, std::string_view source,
                             const nccl_log_scanner& scanner) {
  std::string out;
  out += fmt::format("mrcheck: explain: {}: {} NCCL failure{} in {} line{}", source, findings.size(),
                     findings.size() == 1 ? "" : "s", scanner.lines(), scanner.lines() == 1 ? "" : "s");
  if (scanner.truncated_lines()) out += fmt::format(" ({} over-long lines cut at 64 KiB)", scanner.truncated_lines());
  if (scanner.dropped_events())
    out += fmt::format(" ({} failures beyond the group limit not shown)", scanner.dropped_events());
  out += '\n';
  int n = 0;
  for (const finding& f : findings) {
    const nccl_group& g = f.group;
    const diagnosis& d = f.diag;
    out += fmt::format("\n{}. {}{} - {}\n", ++n, to_string(d.what), d.confirmed ? "" : " (likely)", title(g.what));
    std::string where = fmt::format("{} time{}", g.count, g.count == 1 ? "" : "s");
    if (!g.ranks.empty()) {
      where += fmt::format(", rank{} {}{}", g.ranks.size() == 1 ? "" : "s", format_ranks(g.ranks),
                           g.ranks_capped ? " (and more)" : "");
    } else if (g.processes.size() > 1) {
      where += fmt::format(", {} processes", g.processes.size());
    }
    if (!g.hosts.empty()) {
      where += fmt::format(", host{} {}", g.hosts.size() == 1 ? "" : "s", join(g.hosts, 8));
    }
    std::string lines;
    for (std::size_t i = 0; i < g.lines.size() && i < 8; ++i) lines += (i ? "," : "") + std::to_string(g.lines[i]);
    if (g.count > 8) lines += ",...";
    where += fmt::format("; line{} {}", g.count == 1 ? "" : "s", lines);
    if (g.consequences)
      where += fmt::format("; {} follow-up error line{}", g.consequences, g.consequences == 1 ? "" : "s");
    out += fmt::format("   seen:     {}\n", where);
    out += fmt::format("   log:      {}\n", g.example);
    out += fmt::format("   why:      {}\n", d.summary);
    for (std::size_t i = 0; i < d.evidence.size(); ++i) {
      out += fmt::format("   {}{}\n", i == 0 ? "evidence: " : "          ", d.evidence[i]);
    }
    out += fmt::format("   fix:      {}\n", d.fix);
    if (d.owner != fix_owner::none) out += fmt::format("   owner:    {}\n", to_string(d.owner));
    if (!d.fallback.empty()) out += fmt::format("   fallback: {}\n", d.fallback);
  }
  return out;
}

nlohmann::json findings_to_json(const std::vector<finding>& findings, std::string_view source,
                                const nccl_log_scanner& scanner, const evidence_origin& origin) {
  nlohmann::json arr = nlohmann::json::array();
  for (const finding& f : findings) {
    const nccl_group& g = f.group;
    const diagnosis& d = f.diag;
    nlohmann::json j;
    j["cause"] = to_string(d.what);
    j["confirmed"] = d.confirmed;
    j["kind"] = g.what.what == failure::kind::call               ? "call"
                : g.what.what == failure::kind::completion_error ? "completion_error"
                : g.what.what == failure::kind::duplicate_gpu    ? "duplicate_gpu"
                : g.what.what == failure::kind::no_device        ? "no_device"
                : g.what.what == failure::kind::fatal_warning    ? "fatal_warning"
                : g.what.what == failure::kind::own_verdict      ? "own_verdict"
                                                                 : "system_error";
    j["transport"] = g.what.transport.empty() ? nlohmann::json("ib") : nlohmann::json(g.what.transport);
    j["provider"] = g.what.provider.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.what.provider);
    j["detail"] = g.what.detail.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.what.detail);
    j["call"] = g.what.call.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.what.call);
    j["errno"] = g.what.err ? nlohmann::json(g.what.err) : nlohmann::json(nullptr);
    j["errno_name"] = g.what.err && !errno_name(g.what.err).empty() ? nlohmann::json(errno_name(g.what.err))
                                                                    : nlohmann::json(nullptr);
    j["wc_status"] = g.what.wc_status ? nlohmann::json(*g.what.wc_status) : nlohmann::json(nullptr);
    j["count"] = g.count;
    j["lines"] = g.lines;
    j["ranks"] = g.ranks;
    j["ranks_truncated"] = g.ranks_capped;
    j["hosts"] = g.hosts;
    j["processes"] = g.processes.size();
    j["consequences"] = g.consequences;
    j["example"] = g.example;
    j["summary"] = d.summary;
    j["evidence"] = d.evidence;
    j["evidence_applies"] = f.evidence_applies;
    j["fix"] = d.fix;
    if (d.owner != fix_owner::none) j["owner"] = to_string(d.owner);  // only where a row knows (diagnosis::owner)
    j["fallback"] = d.fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.fallback);
    arr.push_back(std::move(j));
  }
  nlohmann::json out;
  out["source"] = std::string(source);
  out["lines_read"] = scanner.lines();
  out["truncated_lines"] = scanner.truncated_lines();
  out["dropped_failures"] = scanner.dropped_events();
  out["evidence_from"] = {{"host", origin.hostname}, {"root", origin.from_root}};
  out["findings"] = std::move(arr);
  return out;
}

}  // namespace mrcheck
