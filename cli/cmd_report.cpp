// mrcheck report [--json] [--root DIR] [--config FILE]: every node fact and a verdict per check.
//
// Exit: 0 pass or warn, 1 a check failed, 2 usage or I/O error (bad --root, bad config) or a check that could
// not run at all (verdict error).
#include "command_line.h"

#include <mrcheck/job_nccl.h>

#include <mrcheck/build_config.h>
#include <mrcheck/check_registry.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/history.h>
#include <mrcheck/history_store.h>
#include <mrcheck/judge_node.h>
#include <mrcheck/matrix.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include <optional>

namespace mrcheck::cli {

namespace {

// A fact's text, or why it is unknown.
template <typename R, typename F>
std::string or_unknown(const R& r, F&& show) {
  return r ? show(*r) : "unknown: " + r.error().message();
}

std::string text_gpu_and_libraries(const node_facts& f);

// The node's facts, one line each: the kernel, limits and memory, RDMA, modules.
std::string text_facts(const node_facts& f) {
  std::string out;
  out += fmt::format("host           {}\n",
                     f.hostname_status ? f.hostname : "unknown: " + f.hostname_status.error().message());
  out += fmt::format("kernel         {}\n", or_unknown(f.kernel_release, [](const std::string& s) { return s; }));
  if (!f.chain.empty()) {
    const auto& p = f.chain.front();
    out += fmt::format("memlock        {} (pid {}): {}\n", escape_line(p.comm, 16), p.pid,
                       p.memlock ? fmt::format("soft {} hard {}", format_bytes(p.memlock->soft),
                                               format_bytes(p.memlock->hard))
                                 : "unknown: " + p.memlock.error().message());
  }
  out += fmt::format("max_map_count  {}\n",
                     or_unknown(f.max_map_count, [](std::uint64_t v) { return std::to_string(v); }));
  out += fmt::format("hugepages      {}\n", or_unknown(f.hugepages, [](const hugepages_fact& h) {
                       return fmt::format("{} total, {} free, {} each", h.total, h.free, format_bytes(h.page_size));
                     }));
  out += fmt::format("rdma devices   {}\n", or_unknown(f.rdma_devices, [](const std::vector<rdma_device_fact>& ds) {
                       if (ds.empty()) return std::string("none");
                       std::string s;
                       for (const auto& d : ds) {
                         std::string ports;
                         for (const auto& p : d.ports) ports += fmt::format(" port{} {}", p.number, p.state);
                         s += fmt::format("{}{} fw {} {}{}", s.empty() ? "" : "; ", d.name, d.fw_ver, d.hca_type,
                                          ports);
                       }
                       return s;
                     }));
  std::string mods;
  for (const auto& [name, m] : f.modules) {
    if (!m.loaded) continue;
    mods += fmt::format("{}{}{}{}", mods.empty() ? "" : ", ", name, m.version ? " " + *m.version : "",
                        m.taint.empty() ? "" : " taint " + m.taint);
  }
  out += fmt::format("modules        {}\n", mods.empty() ? "none of the RDMA/NVIDIA modules loaded" : mods);
  out += fmt::format("memory_peers   {}\n",
                     f.memory_peers ? fmt::format("{} client(s)", f.memory_peer_clients.size()) : "absent");
  return out + text_gpu_and_libraries(f);
}

// The rest: the NVIDIA driver, GPUs, the libraries and slurmd.
std::string text_gpu_and_libraries(const node_facts& f) {
  std::string out;
  out += fmt::format("nvidia driver  {}\n", or_unknown(f.nvidia, [](const nvidia_driver_fact& n) {
                       return fmt::format("{} ({}){}", n.version, to_string(n.flavour),
                                          n.note.empty() ? "" : "; " + n.note);
                     }));
  out += fmt::format("gpus           {}\n", or_unknown(f.gpus, [](const std::vector<gpu_fact>& gs) {
                       if (gs.empty()) return std::string("none");
                       std::string s;
                       for (const auto& g : gs) {
                         s += fmt::format("{}{} {} BAR1 {}", s.empty() ? "" : "; ", g.pci_bdf, g.device_id,
                                          g.bar1_error.empty() ? format_bytes(g.bar1_bytes)
                                                               : "unknown: " + g.bar1_error);
                       }
                       return s;
                     }));
  out += fmt::format("libibverbs     {}\n", or_unknown(f.libibverbs, [](const library_fact& l) {
                       std::string syms;
                       for (const auto& [s, ok] : l.symbols) syms += fmt::format(" {}{}", ok ? "+" : "-", s);
                       return fmt::format("{}{}", l.path, syms);
                     }));
  out += fmt::format("cuda driver    {}\n", or_unknown(f.cuda_driver_version, cuda_version_text));
  out += fmt::format("nccl           {}\n", or_unknown(f.nccl_version, nccl_version_text));
  out += fmt::format("slurmd         {}\n", or_unknown(f.slurmd, [](const process_fact& p) {
                       return fmt::format("pid {}: {}", p.pid,
                                          p.memlock
                                              ? fmt::format("memlock soft {} hard {}", format_bytes(p.memlock->soft),
                                                            format_bytes(p.memlock->hard))
                                              : "memlock unknown: " + p.memlock.error().message());
                     }));
  return out;
}

// Loads the config the report judges against: FILE when given (must load), else the build's default path
// when that file exists. An unreadable or invalid config is an error, never a silent default.
std::optional<config> load_report_config(const std::string& file, std::string& error) {
  config cfg;
  std::string path = file;
  if (path.empty()) {
    struct stat st {};
    if (::stat(MRCHECK_DEFAULT_CONFIG, &st) != 0) return cfg;
    path = MRCHECK_DEFAULT_CONFIG;
  }
  if (auto s = load_config_file(cfg, path); !s) {
    error = s.message();
    return std::nullopt;
  }
  return cfg;
}

struct report_options {
  bool json = false;
  std::string root_dir;
  std::string config_file;
};

// What the report judges under: the tree (or the host), the site's config and the rules. Nullopt after
// printing why: a usage error.
struct report_setup {
  sysroot root;
  config cfg;
  matrix_rules rules;
};
std::optional<report_setup> load_report_setup(const report_options& o) {
  report_setup s;
  if (!o.root_dir.empty()) {
    auto r = sysroot::open(o.root_dir);
    if (!r) {
      fmt::print(stderr, "mrcheck: report: --root: {}\n", r.error().message());
      return std::nullopt;
    }
    s.root = *r;
  }
  std::string cfg_error;
  auto cfg = load_report_config(o.config_file, cfg_error);
  if (!cfg) {
    fmt::print(stderr, "mrcheck: report: config: {}\n", cfg_error);
    return std::nullopt;
  }
  s.cfg = std::move(*cfg);
  auto rules = load_matrix_rules_or_default(s.cfg.rules);
  if (!rules) {
    fmt::print(stderr, "mrcheck: report: rules: {}\n", rules.error().message());
    return std::nullopt;
  }
  s.rules = std::move(*rules);
  return s;
}

void print_json(const node_judgement& j, const std::optional<stack_history>& hist) {
  nlohmann::json out = report_to_json(j.rep);
  out["facts"] = j.facts;
  if (j.job) out["facts"]["job_nccl"] = job_nccl_json(*j.job);
  out["stack"] = fingerprint_to_json(j.fp);
  if (j.facts.hostname_status) out["stack"]["host"] = j.facts.hostname;
  if (hist && !hist->changes.empty()) {
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& c : hist->changes) {
      for (const auto& i : c.items) lines.push_back(change_line(c, i));
    }
    out["stack_changes"] = lines;
  }
  fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

void print_text(const node_judgement& j, const std::optional<stack_history>& hist) {
  std::string job_text;
  if (j.job) {
    job_text = fmt::format("job nccl       {}{}\n", job_nccl_summary(*j.job),
                           j.job->why.empty() ? "" : " - " + j.job->why);
    for (const auto& l : job_nccl_lines(*j.job)) job_text += "               " + l + "\n";
  }
  fmt::print("{}{}\n{}", text_facts(j.facts), job_text, to_text(j.rep));
  if (hist) {
    // The last change mrcheck-prolog saw, one line per fact (the whole history: state_dir/history-<node>.json).
    if (hist->changes.empty()) fmt::print("stack: unchanged since {}\n", utc_minute(hist->since));
    if (!hist->changes.empty()) {
      // Each change, then the registration defaults that changed across it (include/mrcheck/history.h).
      for (const auto& i : hist->changes.back().items) {
        for (const auto& line : change_lines(hist->changes.back(), i)) fmt::print("{}\n", line);
      }
    }
  }
  for (const auto& line : failure_lines(j.rep)) fmt::print(stderr, "{}\n", line);
}

}  // namespace

void declare_report(command_line& c) {
  auto& o = c.make_options<report_options>();
  c.about(
      "Every fact mrcheck reads about this node, or about the node a `mrcheck dump` tree holds, and a verdict per\n"
      "check, judged by the same rules file as mrcheck-prolog; the NCCL this shell's job would load is judged too.\n");
  c.flag("--json", o.json, "the facts, the verdicts and the stack fingerprint as JSON on stdout");
  c.option("--root", o.root_dir, "DIR", "read the node from a `mrcheck dump` tree instead of this host");
  c.option("--config", o.config_file, "FILE",
           "mrcheck.conf to judge by (default " MRCHECK_DEFAULT_CONFIG " when it exists)");
  c.footer("exit: 0 pass or warn, 1 a check failed, 2 usage or I/O error, or a check that could not run\n");
}

int cmd_report(const args& a) {
  command_line line("report");
  declare_report(line);
  if (auto code = line.parse(a)) return *code;
  const auto& o = line.options<report_options>();
  auto s = load_report_setup(o);
  if (!s) return k_exit_usage;
  // report_selection(): memlock, then the node's memory and the driver/firmware matrix under the same rules file
  // mrcheck-prolog judges by, so `mrcheck report` on a node shows what its prolog would decide; the NCCL this
  // shell's job would load is judged in place of the system's.
  judge_options jo;
  jo.selection = report_selection();
  jo.cfg = &s->cfg;
  jo.job_nccl_from_env = true;
  jo.now = std::time(nullptr);
  node_judgement j = judge_node(s->root, s->rules, jo);
  // The node's stack history as mrcheck-prolog keeps it (readable by root only; include/mrcheck/history.h).
  std::optional<stack_history> hist;
  if (s->root.is_host() && !s->cfg.state_dir.empty() && ::geteuid() == 0) {
    hist = load_history(s->cfg.state_dir, j.facts.hostname, ::geteuid()).history;
  }
  if (o.json) {
    print_json(j, hist);
  } else {
    print_text(j, hist);
  }
  switch (j.rep.overall()) {
    case verdict::fail: return k_exit_fail;
    case verdict::error: return k_exit_usage;
    default: return k_exit_ok;
  }
}

}  // namespace mrcheck::cli
