// mrcheck-prolog: judges this node's driver/firmware matrix and drains it through slurmctld when it is
// misaligned; resumes it when mrcheck drained it and the matrix is right again. Runs as root from Slurm's
// Prolog= (per job, per node) and HealthCheckProgram= (periodically, also on drained nodes: the only way a
// fixed node gets resumed without an admin).
//
// Exit codes (README "exit codes of the prolog"):
//   0  prolog mode: the node passes (warnings and checker errors included, unless on_error=fail);
//      healthcheck mode: always, once it has acted (Slurm ignores a health check's status; the drain is the
//      signal).
//   1  prolog mode only: the matrix fails. mrcheck has drained the node with its own reason (or, slurmctld
//      being unreachable, recorded the drain in state_dir for the next run). Slurm then drains the node itself
//      if it is not drained yet (reason "Prolog error") and requeues the job - held, unless slurm.conf has
//      SchedulerParameters=nohold_on_prolog_fail (docs/facts/slurm-prolog.md §1) - so the job starts on a healthy node
//      instead of dying in NCCL init here.
//   2  usage, configuration or rules error, or an unsafe state_dir: nothing was judged or changed. In prolog
//      mode Slurm drains the node with "Prolog error": a typo in the rules shows at once instead of silently
//      disabling the checks. Validate a rules file first with `mrcheck-prolog --dry-run --rules FILE`.
#include "admin_collect.h"
#include "slurm_control.h"

#include <mrcheck/facts.h>

#include "prolog/history_step.h"
#include "prolog/node_action.h"
#include "prolog/revalidate.h"
#include "prolog/textfile.h"

#include <mrcheck/build_config.h>
#include <mrcheck/check.h>
#include <mrcheck/check_registry.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/history.h>
#include <mrcheck/judge_node.h>
#include <mrcheck/log.h>
#include <mrcheck/matrix.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace mrcheck;

constexpr int k_exit_ok = 0;
constexpr int k_exit_fail = 1;
constexpr int k_exit_usage = 2;

enum class run_mode { prolog, healthcheck };

struct options {
  std::string config;
  std::string rules;
  std::string root;
  std::optional<run_mode> mode;
  bool dry_run = false;
  bool json = false;
  bool timings = false;
  std::string node;
  std::string state_dir;
  std::string textfile;
  std::optional<std::chrono::milliseconds> timeout;
};

void usage(FILE* out) {
  fmt::print(out,
             "usage: mrcheck-prolog [--config FILE] [--rules FILE] [--root DIR] [--mode prolog|healthcheck]\n"
             "                      [--node NAME] [--state-dir DIR] [--timeout DURATION] [--textfile PATH]\n"
             "                      [--dry-run] [--json] [--timings]\n"
             "Judges the driver/firmware matrix; drains this node through slurmctld on fail, resumes it when\n"
             "mrcheck drained it and it passes again. Mode defaults to prolog when SLURM_JOB_ID is set, else\n"
             "healthcheck. Exit: 0 pass (healthcheck: always), 1 fail (prolog), 2 usage/config error.\n"
             "options:\n"
             "  --config FILE      site policy (default " MRCHECK_DEFAULT_CONFIG
             " when it exists)\n"
             "  --rules FILE       matrix rules (default: rules= of the config, else /etc/slurm/mrcheck-rules.conf\n"
             "                     when it exists, else the built-in defaults)\n"
             "  --root DIR         judge a tree captured with `mrcheck dump` instead of this host\n"
             "  --node NAME        the Slurm node to drain or resume (default: $SLURMD_NODENAME, else the\n"
             "                     short host name)\n"
             "  --state-dir DIR    pending drain/resume when slurmctld is unreachable (default: state_dir=)\n"
             "  --timeout DURATION budget for slurmctld (default 10s in prolog mode, 30s in healthcheck mode)\n"
             "  --textfile PATH    write a Prometheus textfile for node_exporter's textfile collector: one\n"
             "                     mrcheck_check_status{{check=...}} gauge per check (-1 skip, 0 pass, 1 warn,\n"
             "                     2 fail, 3 error), mrcheck_status and mrcheck_last_run_timestamp_seconds;\n"
             "                     replaced atomically, a symlink is refused (default: prometheus_textfile=,\n"
             "                     not written by --dry-run)\n"
             "  --dry-run          judge and print only: no slurmctld call, no state_dir\n"
             "  --json             the report, the planned action and its outcome as JSON on stdout\n"
             "  --timings          one line on stderr with the milliseconds each phase took\n");
}

// The options that take a value, as `--NAME VALUE` or `--NAME=VALUE`.
constexpr std::string_view k_value_options[] = {"--config",    "--rules",    "--root",    "--node",
                                                "--state-dir", "--textfile", "--timeout", "--mode"};

// Sets the value option `name`; false after printing why the value is refused.
bool set_value(options& o, std::string_view name, const std::string& v) {
  if (name == "--config") o.config = v;
  if (name == "--rules") o.rules = v;
  if (name == "--root") o.root = v;
  if (name == "--node") o.node = v;
  if (name == "--state-dir") o.state_dir = v;
  if (name == "--textfile") {
    if (v.empty() || v.front() != '/') {
      fmt::print(stderr, "mrcheck: prolog: --textfile must be an absolute path, not '{}'\n", escape_line(v, 64));
      return false;
    }
    o.textfile = v;
  }
  if (name == "--timeout") {
    auto d = parse_duration(v);
    if (!d) {
      fmt::print(stderr, "mrcheck: prolog: --timeout: {}\n", d.error().message());
      return false;
    }
    o.timeout = *d;
  }
  if (name == "--mode") {
    if (v != "prolog" && v != "healthcheck") {
      fmt::print(stderr, "mrcheck: prolog: --mode must be prolog or healthcheck, not '{}'\n", escape_line(v, 32));
      return false;
    }
    o.mode = v == "prolog" ? run_mode::prolog : run_mode::healthcheck;
  }
  return true;
}

std::optional<options> parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(k_exit_ok);
    }
    if (a == "--dry-run" || a == "--json" || a == "--timings") {
      (a == "--dry-run" ? o.dry_run : a == "--json" ? o.json : o.timings) = true;
      continue;
    }
    const auto* name = std::find_if(std::begin(k_value_options), std::end(k_value_options), [&](std::string_view n) {
      return a == n || (a.starts_with(n) && a.size() > n.size() && a[n.size()] == '=');
    });
    if (name == std::end(k_value_options)) {
      fmt::print(stderr, "mrcheck: prolog: unknown argument '{}'\n", escape_line(a, 64));
      return std::nullopt;
    }
    std::optional<std::string> value;
    if (a.size() > name->size()) {
      value = a.substr(name->size() + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    if (!value || !set_value(o, *name, *value)) return std::nullopt;
  }
  return o;
}

// Files that steer what happens to the node must be root's alone: a user who could write the rules could
// drain (or keep undrained) any node.
status check_trusted_file(const std::string& path) {
  if (::geteuid() != 0) return status::ok();
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return status::from_errno(fmt::format("stat {}", path), errno);
  if (sb.st_uid != 0) return status::error(fmt::format("{} is owned by uid {}, not root: refused", path, sb.st_uid));
  if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
    return status::error(
        fmt::format("{} is writable by group or others (mode {:o}): refused", path, sb.st_mode & 07777));
  }
  return status::ok();
}

// --timings: where the run's time goes, from main() on, as one line on stderr at the end (the profile
// behind bench/prolog/README.md; process start and dynamic linking come before main() and are not in it).
class phase_timer {
 public:
  using clock = std::chrono::steady_clock;
  explicit phase_timer(bool on) : on_(on), start_(clock::now()), last_(start_) {}
  void mark(std::string_view phase) {
    if (!on_) return;
    auto now = clock::now();
    text_ += fmt::format("{}{} {:.2f}", text_.empty() ? "" : ", ", phase, ms(now - last_));
    last_ = now;
  }
  void print(log_sink& out, std::string_view mode) const {
    if (!on_) return;
    log(out, log_level::info, "{}: timings (ms): {}; total {:.2f}", mode, text_, ms(last_ - start_));
  }

 private:
  static double ms(clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
  bool on_;
  clock::time_point start_;
  clock::time_point last_;
  std::string text_;
};

std::string short_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h = buf;
  // slurmd's default NodeName is the short host name (gethostname_short).
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  return h;
}

// What one run judges against: the site's configuration and rules, the filesystem root, the node's name.
struct run_setup {
  config cfg;
  matrix_rules rules;
  sysroot root;
  std::string node;
};

// --config (else the default file when present; unknown keys are errors, config.h), the rules, --root and the
// node name. Nullopt after logging why: a usage error.
std::optional<run_setup> load_setup(const options& o, const char* mode_name, stderr_log& out) {
  run_setup s;
  std::string config_path = o.config;
  if (config_path.empty() && std::filesystem::exists(MRCHECK_DEFAULT_CONFIG)) config_path = MRCHECK_DEFAULT_CONFIG;
  if (!config_path.empty()) {
    if (auto st = check_trusted_file(config_path); !st) {
      log(out, log_level::error, "{}: {}", mode_name, st.message());
      return std::nullopt;
    }
    if (auto st = load_config_file(s.cfg, config_path); !st) {
      log(out, log_level::error, "{}: {}", mode_name, st.message());
      return std::nullopt;
    }
  }
  std::string rules_path = !o.rules.empty() ? o.rules : s.cfg.rules;
  if (rules_path.empty() && std::filesystem::exists(std::string(k_default_rules_path)))
    rules_path = std::string(k_default_rules_path);
  if (!rules_path.empty()) {
    if (auto st = check_trusted_file(rules_path); !st) {
      log(out, log_level::error, "{}: {}", mode_name, st.message());
      return std::nullopt;
    }
  }
  auto rules = rules_path.empty() ? result<matrix_rules>(default_matrix_rules()) : load_matrix_rules(rules_path);
  if (!rules) {
    log(out, log_level::error, "{}: {}", mode_name, rules.error().message());
    return std::nullopt;
  }
  s.rules = std::move(*rules);

  if (!o.root.empty()) {
    auto r = sysroot::open(o.root);
    if (!r) {
      log(out, log_level::error, "{}: --root: {}", mode_name, r.error().message());
      return std::nullopt;
    }
    s.root = std::move(*r);
  }

  s.node = o.node;
  if (s.node.empty()) {
    const char* n = std::getenv("SLURMD_NODENAME");
    s.node = n && *n ? n : short_hostname();
  }
  if (!valid_node_name(s.node)) {
    log(out, log_level::error, "{}: node name '{}' is not valid (use --node NAME)", mode_name, escape_line(s.node, 64));
    return std::nullopt;
  }
  return s;
}

// Facts, verdicts and the stack fingerprint (include/mrcheck/judge_node.h), timed phase by phase.
node_judgement judge(const run_setup& s, std::int64_t now, phase_timer& t) {
  judge_options jo;
  jo.selection = prolog_selection();
  jo.cfg = &s.cfg;
  jo.now = now;
  jo.phase_done = [&t](std::string_view phase) { t.mark(phase); };
  return judge_node(s.root, s.rules, jo);
}

// The drain or resume through slurmctld within the budget; when the controller is unreachable the action is kept
// pending in the state directory for the next run. Records the outcome in `j` and returns the exit code.
int act(const options& o, const run_setup& s, const desired_action& want, run_mode mode, int fail_code,
        nlohmann::json& j, stderr_log& out) {
  const char* mode_name = mode == run_mode::prolog ? "prolog" : "healthcheck";
  const std::string& node = s.node;
  std::chrono::milliseconds budget = o.timeout.value_or(mode == run_mode::prolog ? std::chrono::milliseconds{10000}
                                                                                 : std::chrono::milliseconds{30000});
  std::string state_dir = !o.state_dir.empty() ? o.state_dir : s.cfg.state_dir;
  auto store = state_store::open(state_dir, ::geteuid());
  if (!store) {
    log(out, log_level::error, "{}: {}", mode_name, store.error().message());
    return k_exit_usage;
  }
  bool pending_drain = false;
  auto pending = store->load(node);
  if (!pending) {
    log(out, log_level::error, "{}: pending state: {}", mode_name, pending.error().message());
  } else if (*pending) {
    pending_drain = (*pending)->what == desired_action::kind::drain;
    if (**pending != want) {
      log(out, log_level::info, "{}: pending {} from an earlier run superseded by this run's {}", mode_name,
          to_string((*pending)->what), to_string(want.what));
    }
  }

  auto ctl = prolog::make_slurm_control();
  if (!ctl) {
    log(out, log_level::error, "{}: built without libslurm: cannot drain or resume {}", mode_name, node);
    j["outcome"] = {{"what", "failed"}, {"message", "built without libslurm"}};
    return mode == run_mode::prolog ? fail_code : k_exit_ok;
  }
  apply_outcome res = apply_action(*ctl, node, want, pending_drain, budget);
  j["outcome"] = {{"what", to_string(res.what)}, {"message", res.message}};
  switch (res.what) {
    case apply_outcome::kind::unreachable:
      if (auto st = store->save(node, want); !st) {
        log(out, log_level::error, "{}: {}: and the pending {} could not be saved: {}", mode_name, res.message,
            to_string(want.what), st.message());
      } else {
        log(out, log_level::error, "{}: {}; {} of {} pending in {}", mode_name, res.message, to_string(want.what), node,
            store->dir());
      }
      break;
    case apply_outcome::kind::failed: log(out, log_level::error, "{}: {}", mode_name, res.message); break;
    case apply_outcome::kind::nothing:
      if (auto st = store->clear(node); !st) log(out, log_level::error, "{}: {}", mode_name, st.message());
      break;
    default:
      log(out, log_level::info, "{}: {}", mode_name, res.message);
      if (auto st = store->clear(node); !st) log(out, log_level::error, "{}: {}", mode_name, st.message());
      break;
  }
  return fail_code;
}

// The stack history (prolog/history_step.h): every real run keeps it in state_dir; a dry run only with an
// explicit --state-dir, where it behaves exactly as a real run (fixture trees replayed in order).
prolog::history_step keep_history(const options& o, const run_setup& s, const node_judgement& jd, std::int64_t now,
                                  stderr_log& out, const char* mode_name) {
  prolog::history_step hist;
  if (o.dry_run && o.state_dir.empty()) return hist;
  std::string dir = !o.state_dir.empty() ? o.state_dir : s.cfg.state_dir;
  if (auto store = state_store::open(dir, ::geteuid())) {
    hist = prolog::begin_history(store->dir(), s.node, jd.fp, jd.rep, now, ::geteuid(), out, mode_name);
  } else if (o.dry_run) {
    log(out, log_level::error, "{}: stack history not kept: {}", mode_name, store.error().message());
  }
  return hist;
}

// Re-validation after a change (prolog/revalidate.h): a check of its own, so the drain, the JSON and the
// textfile carry it like any other.
void revalidate_if_due(const run_setup& s, node_judgement& jd, prolog::history_step& hist, std::int64_t now,
                       stderr_log& out, const char* mode_name, phase_timer& t) {
  if (!hist.history || !prolog::revalidation_due(s.cfg.revalidate, *hist.history)) return;
  check_result rv = prolog::run_revalidation(s.cfg, prolog::revalidation_nccl_mode(jd.facts));
  log(out, rv.result == verdict::fail ? log_level::error : log_level::info, "{}: {}: {}", mode_name, rv.id, rv.summary);
  hist.history->revalidated = std::string(to_string(rv.result));
  hist.history->revalidate_reason = escape_line(rv.summary, 200);
  hist.history->revalidated_time = now;
  hist.dirty = true;
  jd.rep.checks.push_back(std::move(rv));
  t.mark("revalidate");
}

// The Prometheus textfile, before any RPC (which may wait for an unreachable slurmctld): --textfile, else
// prometheus_textfile= unless this is a dry run (a rules check must not replace the node's metrics).
void write_metrics(const options& o, const run_setup& s, const node_judgement& jd, const prolog::history_step& hist,
                   std::int64_t now, const char* hpc_job, stderr_log& out, const char* mode_name, phase_timer& t) {
  std::string textfile = !o.textfile.empty() ? o.textfile : (o.dry_run ? "" : s.cfg.prometheus_textfile);
  if (textfile.empty()) return;
  textfile_input in{now, s.node, mode_name, hpc_job, &jd.facts, read_gpu_uuids(s.root, jd.facts)};
  std::string text = prometheus_textfile(jd.rep, in) +
                     prometheus_stack_lines(jd.fp, hist.history ? &*hist.history : nullptr);
  if (auto st = write_textfile(textfile, text, ::geteuid()); !st) {
    log(out, log_level::error, "{}: {}", mode_name, st.message());
  }
  t.mark("textfile");
}

// The report, the planned action and (with --json) the stack and its history; the outcome is added later.
nlohmann::json run_json(const options& o, const run_setup& s, const node_judgement& jd,
                        const prolog::history_step& hist, const desired_action& want, const char* mode_name) {
  nlohmann::json j;
  if (o.json) j = report_to_json(jd.rep);
  j["node"] = s.node;
  j["mode"] = mode_name;
  j["rules"] = s.rules.source;
  j["action"] = {{"want", to_string(want.what)}, {"reason", want.reason}};
  if (o.json) {
    j["stack"] = fingerprint_to_json(jd.fp);
    j["history"] = prolog::history_json(hist);
  }
  return j;
}

void log_dry_run(const run_setup& s, const desired_action& want, nlohmann::json& j, stderr_log& out,
                 const char* mode_name) {
  if (want.what == desired_action::kind::drain) {
    log(out, log_level::info, "{}: dry run: would drain {} with reason '{}'", mode_name, s.node, want.reason);
  } else if (want.what == desired_action::kind::resume) {
    log(out, log_level::info, "{}: dry run: would resume {} if mrcheck drained it", mode_name, s.node);
  }
  j["outcome"] = {{"what", "dry_run"}};
}

int run(int argc, char** argv) {
  auto opts_or = parse_args(argc, argv);
  if (!opts_or) {
    usage(stderr);
    return k_exit_usage;
  }
  options& o = *opts_or;
  stderr_log out;
  phase_timer t(o.timings);

  const char* job_id = std::getenv("SLURM_JOB_ID");
  run_mode mode = o.mode.value_or(job_id && *job_id ? run_mode::prolog : run_mode::healthcheck);
  const char* mode_name = mode == run_mode::prolog ? "prolog" : "healthcheck";

  auto setup = load_setup(o, mode_name, out);
  if (!setup) return k_exit_usage;
  t.mark("config+rules");
  const std::int64_t now = std::time(nullptr);
  node_judgement jd = judge(*setup, now, t);
  for (const auto& line : failure_lines(jd.rep)) out.write(log_level::error, line);
  prolog::history_step hist = keep_history(o, *setup, jd, now, out, mode_name);
  t.mark("history");
  revalidate_if_due(*setup, jd, hist, now, out, mode_name, t);

  desired_action want = plan_action(jd.rep, setup->cfg.on_error, setup->cfg.drain_site);
  prolog::name_change_in_reason(want, jd.rep, hist, setup->cfg.drain_site);
  nlohmann::json j = run_json(o, *setup, jd, hist, want, mode_name);
  write_metrics(o, *setup, jd, hist, now, mode == run_mode::prolog && job_id ? job_id : "", out, mode_name, t);
  prolog::finish_history(hist, out, mode_name);

  bool fails = want.what == desired_action::kind::drain;
  int fail_code = mode == run_mode::prolog && fails ? k_exit_fail : k_exit_ok;
  int code = fail_code;
  if (o.dry_run) {
    log_dry_run(*setup, want, j, out, mode_name);
  } else {
    code = act(o, *setup, want, mode, fail_code, j, out);
  }
  t.mark("action");
  t.print(out, mode_name);
  if (o.json) fmt::print("{}\n", j.dump(2));
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // The SPANK plugin's root collector for AdminComment/report_dir: a mode of its own.
    if (argc > 1 && std::strcmp(argv[1], "admin-collect") == 0)
      return mrcheck::prolog::admin_collect_main(argc - 2, argv + 2);
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mrcheck: prolog: internal error: %s\n", escape_line(e.what(), 200).c_str());
  } catch (...) {
    std::fprintf(stderr, "mrcheck: prolog: internal error\n");
  }
  // Never take the job down for our own bug in prolog mode: 0, and the message above.
  return k_exit_ok;
}
