// mrcheck report [--json] [--root DIR] [--config FILE]: every node fact and a verdict per check.
//
// Exit: 0 pass or warn, 1 a check failed, 2 usage or I/O error (bad --root, bad config) or a check that could
// not run at all (verdict error).
#include "commands.h"

#include <mrcheck/child.h>
#include <mrcheck/job_nccl.h>

#include <mrcheck/build_config.h>
#include <mrcheck/check_registry.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/history.h>
#include <mrcheck/history_store.h>
#include <mrcheck/matrix.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include <cstdlib>
#include <optional>

namespace mrcheck::cli {

namespace {

constexpr const char* k_report_usage = "usage: mrcheck report [--json] [--root DIR] [--config FILE]\n";

// Every check `report` runs (report_selection(): memlock, then the node's memory and the driver/firmware matrix
// under the same rules file mrcheck-prolog judges by, so `mrcheck report` on a node shows what its prolog would
// decide).
report run_all_checks(const node_facts& facts, const config& cfg, const matrix_rules& rules,
                      const matrix_facts& extra) {
  return run_checks(report_selection(), node_check_inputs(facts, rules, &cfg, &extra));
}

std::string text_facts(const node_facts& f) {
  auto or_unknown = [](const auto& r, auto&& show) -> std::string {
    return r ? show(*r) : "unknown: " + r.error().message();
  };
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

}  // namespace

int cmd_report(const args& a) {
  bool json = false;
  std::string root_dir;
  std::string config_file;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (o == "--json") {
      json = true;
    } else if ((o == "--root" || o == "--config") && i + 1 < a.size()) {
      (o == "--root" ? root_dir : config_file) = a[++i];
    } else if (o.starts_with("--root=")) {
      root_dir = o.substr(7);
    } else if (o.starts_with("--config=")) {
      config_file = o.substr(9);
    } else if (o == "--help" || o == "-h") {
      fmt::print("{}", k_report_usage);
      return k_exit_ok;
    } else {
      fmt::print(stderr, "mrcheck: report: unknown or incomplete option '{}'\n{}", escape_line(o, 64), k_report_usage);
      return k_exit_usage;
    }
  }
  sysroot root;
  if (!root_dir.empty()) {
    auto r = sysroot::open(root_dir);
    if (!r) {
      fmt::print(stderr, "mrcheck: report: --root: {}\n", r.error().message());
      return k_exit_usage;
    }
    root = *r;
  }
  std::string cfg_error;
  auto cfg = load_report_config(config_file, cfg_error);
  if (!cfg) {
    fmt::print(stderr, "mrcheck: report: config: {}\n", cfg_error);
    return k_exit_usage;
  }
  collect_options opts;
  opts.verbs_library = cfg->verbs_library;
  if (root.is_host()) {
    if (const char* sc = std::getenv("SLURM_CONF"); sc && *sc == '/') opts.slurm_conf = sc;
  }
  auto rules = load_matrix_rules_or_default(cfg->rules);
  if (!rules) {
    fmt::print(stderr, "mrcheck: report: rules: {}\n", rules.error().message());
    return k_exit_usage;
  }
  node_facts facts = collect_facts(root, opts);
  // The NCCL this shell's job would load (its LD_LIBRARY_PATH, python3's wheel, VIRTUAL_ENV, CONDA_PREFIX), read
  // from the file, never loaded. The `nccl` rule judges it when it is not the system's own.
  std::optional<job_nccl> job;
  if (root.is_host()) {
    job = find_job_nccl(job_nccl_inputs_from_env(current_environment()));
    const nccl_candidate* c = job->job();
    std::string sys_path = facts.libnccl ? facts.libnccl->path : std::string();
    if (c && (c->real_path.empty() || c->real_path != sys_path)) {
      facts.job_nccl_source = c->path + " (" + c->origin + ")";
      if (!c->info) {
        facts.job_nccl_version = c->info.error();
      } else if (c->info->version_code == 0) {
        facts.job_nccl_version = status::error("no NCCL version string in the file");
      } else {
        facts.job_nccl_version = c->info->version_code;
      }
    }
  }
  matrix_facts extra = collect_matrix_facts(root, opts.slurm_conf, !facts.libibverbs.is_ok());
  report r = run_all_checks(facts, *cfg, *rules, extra);
  const std::int64_t now = std::time(nullptr);
  stack_fingerprint fp = make_fingerprint(facts, extra, *rules, read_boot_info(root, now),
                                          read_dkms_modules(root, facts));
  // The node's stack history as mrcheck-prolog keeps it (readable by root only; include/mrcheck/history.h).
  std::optional<stack_history> hist;
  if (root.is_host() && !cfg->state_dir.empty() && ::geteuid() == 0) {
    hist = load_history(cfg->state_dir, facts.hostname, ::geteuid()).history;
  }
  if (json) {
    nlohmann::json j = report_to_json(r);
    j["facts"] = facts;
    if (job) j["facts"]["job_nccl"] = job_nccl_json(*job);
    j["stack"] = fingerprint_to_json(fp);
    if (facts.hostname_status) j["stack"]["host"] = facts.hostname;
    if (hist && !hist->changes.empty()) {
      nlohmann::json lines = nlohmann::json::array();
      for (const auto& c : hist->changes) {
        for (const auto& i : c.items) lines.push_back(change_line(c, i));
      }
      j["stack_changes"] = lines;
    }
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    std::string job_text;
    if (job) {
      job_text = fmt::format("job nccl       {}{}\n", job_nccl_summary(*job), job->why.empty() ? "" : " - " + job->why);
      for (const auto& l : job_nccl_lines(*job)) job_text += "               " + l + "\n";
    }
    fmt::print("{}{}\n{}", text_facts(facts), job_text, to_text(r));
    if (hist) {
      // The last change mrcheck-prolog saw, one line per fact (the whole history: state_dir/history-<node>.json).
      if (hist->changes.empty()) fmt::print("stack: unchanged since {}\n", utc_minute(hist->since));
      if (!hist->changes.empty()) {
        for (const auto& i : hist->changes.back().items) fmt::print("{}\n", change_line(hist->changes.back(), i));
      }
    }
    for (const auto& line : failure_lines(r)) fmt::print(stderr, "{}\n", line);
  }
  switch (r.overall()) {
    case verdict::fail: return k_exit_fail;
    case verdict::error: return k_exit_usage;
    default: return k_exit_ok;
  }
}

}  // namespace mrcheck::cli
