// Check "nccl_pair": the verdict on a 2-rank NCCL all-reduce (run_nccl_pair). A failure names what NCCL said
// and, through the shared diagnosis, why and how to fix it.
#include <mrcheck/diagnosis.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck {

namespace {

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += sep;
    s += x;
  }
  return s;
}

// The rank children inherit their parent's limits and credentials, so its are the evidence for theirs.
node_evidence own_evidence(const nccl_pair_outcome& o) {
  evidence_inputs in;
  in.own = &o.parent;
  return build_evidence(in);
}

// The failure NCCL's own output names, through the shared scanner (include/mrcheck/nccl_log.h): a failed
// verbs call first (with its errno), then a completion error, a duplicate GPU, an unattributed system error.
// "NET/IB : No device found" is not a failure of the run (NCCL falls back to sockets); the pass path handles it.
std::optional<failure> failure_from_logs(const nccl_pair_outcome& o) {
  nccl_log_scanner scanner;
  for (const auto& r : o.ranks) {
    for (const std::string* text : {&r.out, &r.err}) {
      std::string_view rest = *text;
      while (!rest.empty()) {
        std::size_t nl = rest.find('\n');
        scanner.feed_line(rest.substr(0, nl));
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      }
    }
  }
  auto rank_of = [](failure::kind k) {
    switch (k) {
      case failure::kind::call: return 0;
      case failure::kind::completion_error: return 1;
      case failure::kind::duplicate_gpu: return 2;
      case failure::kind::fatal_warning: return 3;
      case failure::kind::system_error: return 4;
      case failure::kind::no_device: return 9;
      case failure::kind::own_verdict: return 9;  // mrcheck's own line: never the rank's
    }
    return 9;
  };
  const nccl_group* best = nullptr;
  for (const nccl_group* g : scanner.groups()) {
    if (rank_of(g->what.what) < (best ? rank_of(best->what.what) : 9)) best = g;
  }
  if (!best) return std::nullopt;
  return best->what;
}

std::string stage_text(std::string_view stage) {
  if (stage == "load") return "loading CUDA/NCCL";
  if (stage == "id") return "the unique-id exchange";
  if (stage == "cuda") return "CUDA set-up";
  if (stage == "init") return "ncclCommInitRank";
  if (stage == "allreduce") return "ncclAllReduce";
  if (stage == "verify") return "checking the result";
  if (stage == "destroy") return "ncclCommDestroy";
  if (stage.empty()) return "start-up";
  return std::string(stage);
}

std::string where(const nccl_rank_run& r) {
  std::string stage = r.report ? r.report->stage : r.last_stage;
  if (!r.last_stage.empty() && !r.report) stage = r.last_stage;
  return fmt::format("rank {} {} in {}", r.rank, r.describe(), stage_text(stage));
}

std::string detail_of(const nccl_pair_outcome& o) {
  const nccl_log_facts& f = o.log;
  std::vector<std::string> lines;
  lines.push_back(
      fmt::format("mode {}; wall {:.2f} s", to_string(o.mode), static_cast<double>(o.elapsed.count()) / 1000.0));
  if (!f.version.empty()) lines.push_back("NCCL " + f.version);
  if (!f.transports.empty()) lines.push_back("channels via " + join(f.channels, ", "));
  if (!f.network.empty()) lines.push_back("network " + f.network);
  if (!f.ib_devices.empty()) lines.push_back("NET/IB devices " + join(f.ib_devices, ", "));
  if (f.ib_no_device) lines.push_back("NET/IB: no device found");
  if (!f.socket_devices.empty()) lines.push_back("NET/Socket devices " + f.socket_devices);
  if (f.gdr)
    lines.push_back(
        fmt::format("GPUDirect RDMA {}{}", *f.gdr ? "on" : "off", f.gdr_note.empty() ? "" : " (" + f.gdr_note + ")"));
  if (f.dmabuf) lines.push_back(fmt::format("DMA-BUF {}", *f.dmabuf ? "available" : "not available"));
  for (const auto& t : f.init_timings) lines.push_back("NCCL " + t.line);
  for (const auto& r : o.ranks) {
    std::string phases;
    if (r.report) {
      for (const auto& [name, ms] : r.report->phases_ms) phases += fmt::format(" {} {:.0f} ms", name, ms);
    }
    std::string timeline;
    for (const auto& [event, ms] : r.timeline_ms) timeline += fmt::format(" {} {:.0f}", event, ms);
    lines.push_back(fmt::format("rank {}: {}{}{}{}", r.rank, r.describe(), phases.empty() ? "" : ";", phases,
                                timeline.empty() ? "" : "; at ms since start:" + timeline));
  }
  for (const auto& w : f.warnings) lines.push_back("NCCL WARN " + w);
  if (!o.user_nccl_env.empty()) lines.push_back("job NCCL settings: " + join(o.user_nccl_env, " "));
  if (!o.nccl_conf.empty()) lines.push_back("NCCL also reads: " + join(o.nccl_conf, ", "));
  if (!o.env_set.empty()) lines.push_back("set by mrcheck: " + join(o.env_set, " "));
  return join(lines, "\n");
}

// Every rank verified its all-reduce: pass, unless NCCL fell back to sockets or never used its network.
void judge_passed(const nccl_pair_outcome& o, check_result& c) {
  const nccl_log_facts& f = o.log;
  std::string via = f.transports.empty() ? std::string("an unreported transport") : join(f.transports, "+");
  const auto& rep = *o.ranks.front().report;
  c.result = verdict::pass;
  double init_s = 0;
  for (const auto& t : f.init_timings) init_s = std::max(init_s, t.total_s);
  c.summary = fmt::format("{}-rank all-reduce of {} verified via {} in {:.2f} s (init {:.2f} s, {}, NCCL {})",
                          o.mode == nccl_mode::node_pair ? 2 : static_cast<int>(o.ranks.size()),
                          format_bytes(rep.count * sizeof(float)), via, static_cast<double>(o.elapsed.count()) / 1000.0,
                          init_s, to_string(o.mode),
                          f.version.empty() ? (rep.nccl_version > 0 ? nccl_version_text(rep.nccl_version) : "unknown")
                                            : f.version);
  // NCCL falls back to TCP sockets without a warning when NET/IB finds no device (NCCL_IB_HCA=mlx5_9 on a
  // node without mlx5_9, a container without /dev/infiniband): the job would run, at a fraction of the speed.
  bool socket_only = !f.transports.empty() && std::all_of(f.transports.begin(), f.transports.end(),
                                                          [](const std::string& t) { return t == "NET/Socket"; });
  std::string ib_hca;
  for (const auto& e : o.user_nccl_env) {
    if (e.starts_with("NCCL_IB_HCA=")) ib_hca = e;
  }
  if (socket_only && f.ib_no_device && (o.rdma_devices.value_or(0) > 0 || !ib_hca.empty())) {
    failure nodev;
    nodev.what = failure::kind::no_device;
    node_evidence ev = own_evidence(o);
    ev.rdma_devices = o.rdma_devices;
    diagnosis d = diagnose(nodev, ev);
    c.result = verdict::warn;
    c.summary += fmt::format("; but NCCL said \"NET/IB : No device found\"{}: {}",
                             ib_hca.empty() ? "" : " with " + ib_hca, d.summary);
    c.hint = d.fix;
    return;
  }
  // The point of the probe is NCCL's network path; a pass that never touched NET proved less.
  bool used_net = std::any_of(f.transports.begin(), f.transports.end(),
                              [](const std::string& t) { return t.starts_with("NET/"); });
  if (!f.transports.empty() && !used_net) {
    c.result = verdict::warn;
    c.summary += "; NCCL did not use its network transport, so the HCA path is untested";
    c.hint = "unset NCCL_P2P_LEVEL/NCCL_SHM settings that keep traffic off NET, or run the node-pair mode";
  }
}

// What went wrong with the ranks, most specific first; sets the hint where the ranks alone say what to do.
std::string what_failed(const nccl_pair_outcome& o, std::string& hint) {
  const nccl_rank_run* first_bad = nullptr;
  for (const auto& r : o.ranks) {
    bool bad = !(r.exited && r.exit_code == 0 && r.report && r.report->ok);
    if (bad && !r.killed && (!first_bad || first_bad->killed)) first_bad = &r;
    if (bad && !first_bad) first_bad = &r;
  }
  std::string what;
  if (o.timed_out) {
    std::vector<std::string> ws;
    for (const auto& r : o.ranks) ws.push_back(where(r));
    what = fmt::format("NCCL pair timed out after {:.1f} s ({})", static_cast<double>(o.elapsed.count()) / 1000.0,
                       join(ws, "; "));
    hint =
        "NCCL hangs here: check NCCL_SOCKET_IFNAME and firewalls between the ranks; rerun with --verbose for NCCL's "
        "log";
  } else if (first_bad && first_bad->report && first_bad->report->mismatches > 0) {
    what = fmt::format("all-reduce gave wrong results on rank {}: {}", first_bad->rank,
                       escape_line(first_bad->report->error, 200));
    hint = "NCCL moved corrupted data: test the fabric and GPU (dcgmi diag, ib_write_bw) before running jobs here";
  } else if (first_bad && first_bad->report && !first_bad->report->error.empty()) {
    what = fmt::format("rank {} failed in {}: {}", first_bad->rank, stage_text(first_bad->report->stage),
                       escape_line(first_bad->report->error, 200));
    if (!first_bad->report->nccl_last_error.empty())
      what += " - " + escape_line(first_bad->report->nccl_last_error, 200);
  } else if (first_bad) {
    what = "NCCL pair failed: " + where(*first_bad);
    if (first_bad->signaled) hint = "the rank crashed inside CUDA/NCCL; rerun with --verbose and keep NCCL's log";
  } else {
    what = "NCCL pair failed";
  }
  for (const auto& r : o.ranks) {
    if (r.killed && !o.timed_out) what += fmt::format("; rank {} stopped after its peer failed", r.rank);
  }
  return what;
}

// A rank failed or the pair timed out: NCCL's log diagnosed where it can be, else the ranks' own account.
void judge_failed(const nccl_pair_outcome& o, check_result& c) {
  c.result = verdict::fail;
  std::optional<failure> fl = failure_from_logs(o);
  std::string what = what_failed(o, c.hint);
  if (fl) {
    diagnosis d = diagnose(*fl, own_evidence(o));
    std::string nccl_said;
    if (fl->what == failure::kind::call && fl->err != 0) {
      nccl_said = fmt::format("NCCL: Call to {} failed with error {}", fl->call, errno_message(fl->err));
    } else if (fl->what == failure::kind::call) {
      nccl_said = fmt::format("NCCL: Call to {} failed", fl->call);
    } else {
      nccl_said = "NCCL: " + std::string(to_string(d.what));
    }
    c.summary = fmt::format("{}: {}", nccl_said, d.summary);
    c.detail = what + "\n" + join(d.evidence, "\n") + "\n" + c.detail;
    c.hint = d.fix;
  } else {
    c.summary = what;
    // The last warning is the one nearest the failure; earlier ones are often harmless (a missing sysfs path).
    if (!o.log.warnings.empty()) c.summary += " (NCCL WARN " + o.log.warnings.back() + ")";
    if (c.hint.empty()) c.hint = "rerun `mrcheck probe nccl --verbose` and `mrcheck explain` on NCCL's log";
  }
}

}  // namespace

check_result judge_nccl_pair(const nccl_pair_outcome& o) {
  check_result c;
  c.id = "nccl_pair";
  if (!o.setup_error.empty()) {
    c.result = verdict::error;
    c.summary = "could not run the NCCL pair: " + escape_line(o.setup_error, 200);
    c.detail = detail_of(o);
    c.hint = o.mode == nccl_mode::node_pair ? "check that both nodes run the probe for the same job step and can reach "
                                              "each other on TCP ports 20000-28999"
                                            : "";
    // The channel between nodes refuses to run without munged (docs/DESIGN.md): say so, not "unreachable".
    if (o.setup_error.find("could not authenticate") != std::string::npos) {
      c.hint = "the node-pair probe authenticates through munged (Slurm's auth/munge); check munged on both nodes";
    }
    return c;
  }
  c.detail = detail_of(o);

  // Not applicable here: no library, no GPU (the first rank that says so is enough).
  for (const auto& r : o.ranks) {
    if (r.report && r.report->missing_library) {
      c.result = verdict::skip;
      c.summary = "NCCL or CUDA library not found: " + escape_line(r.report->error, 200);
      return c;
    }
    if (r.report && r.report->no_gpu) {
      c.result = verdict::skip;
      c.summary = "no usable GPU: " + escape_line(r.report->error, 200);
      return c;
    }
  }

  bool all_ok = !o.ranks.empty() && std::all_of(o.ranks.begin(), o.ranks.end(), [](const nccl_rank_run& r) {
    return r.exited && r.exit_code == 0 && r.report && r.report->ok;
  });
  if (all_ok) {
    judge_passed(o, c);
  } else {
    judge_failed(o, c);
  }
  return c;
}

}  // namespace mrcheck
