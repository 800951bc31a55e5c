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
#include <mrcheck/log.h>
#include <mrcheck/matrix.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
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

std::optional<options> parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::optional<std::string> {
      std::string prefix = std::string(name) + "=";
      if (a.starts_with(prefix)) return a.substr(prefix.size());
      if (a == name && i + 1 < argc) return std::string(argv[++i]);
      return std::nullopt;
    };
    auto is = [&](const char* name) { return a == name || a.starts_with(std::string(name) + "="); };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(k_exit_ok);
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--timings") {
      o.timings = true;
    } else if (is("--config")) {
      auto v = value("--config");
      if (!v) return std::nullopt;
      o.config = *v;
    } else if (is("--rules")) {
      auto v = value("--rules");
      if (!v) return std::nullopt;
      o.rules = *v;
    } else if (is("--root")) {
      auto v = value("--root");
      if (!v) return std::nullopt;
      o.root = *v;
    } else if (is("--node")) {
      auto v = value("--node");
      if (!v) return std::nullopt;
      o.node = *v;
    } else if (is("--state-dir")) {
      auto v = value("--state-dir");
      if (!v) return std::nullopt;
      o.state_dir = *v;
    } else if (is("--textfile")) {
      auto v = value("--textfile");
      if (!v) return std::nullopt;
      if (v->empty() || v->front() != '/') {
        fmt::print(stderr, "mrcheck: prolog: --textfile must be an absolute path, not '{}'\n", escape_line(*v, 64));
        return std::nullopt;
      }
      o.textfile = *v;
    } else if (is("--timeout")) {
      auto v = value("--timeout");
      if (!v) return std::nullopt;
      auto d = parse_duration(*v);
      if (!d) {
        fmt::print(stderr, "mrcheck: prolog: --timeout: {}\n", d.error().message());
        return std::nullopt;
      }
      o.timeout = *d;
    } else if (is("--mode")) {
      auto v = value("--mode");
      if (!v) return std::nullopt;
      if (*v == "prolog") {
        o.mode = run_mode::prolog;
      } else if (*v == "healthcheck") {
        o.mode = run_mode::healthcheck;
      } else {
        fmt::print(stderr, "mrcheck: prolog: --mode must be prolog or healthcheck, not '{}'\n", escape_line(*v, 32));
        return std::nullopt;
      }
    } else {
      fmt::print(stderr, "mrcheck: prolog: unknown argument '{}'\n", escape_line(a, 64));
      return std::nullopt;
    }
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

// Facts and verdicts. On the host, loading the libraries (dlopen of libibverbs, libcuda and libnccl to read their
// versions: the slowest facts on a GPU node) runs on a second thread while this one reads sysfs and procfs; the
// facts are the same as collect_facts() would gather in one go. The facts are kept for the stack fingerprint.
struct judged {
  report rep;
  node_facts facts;
  matrix_facts extra;
};
judged judge_node(const run_setup& s, phase_timer& t) {
  collect_options copts;
  const char* slurm_conf_env = std::getenv("SLURM_CONF");
  if (slurm_conf_env && *slurm_conf_env && s.root.is_host()) copts.slurm_conf = slurm_conf_env;
  copts.verbs_library = s.cfg.verbs_library;
  copts.load_libraries = false;
  std::future<library_facts> libs;
  if (s.root.is_host()) {
    try {
      libs = std::async(std::launch::async, load_library_facts, s.cfg.verbs_library);
    } catch (const std::system_error&) {
      // No thread to be had: load them on this one below.
    }
  }
  node_facts facts = collect_facts(s.root, copts);
  t.mark("sysfs+procfs");
  if (s.root.is_host()) apply_library_facts(libs.valid() ? libs.get() : load_library_facts(s.cfg.verbs_library), facts);
  t.mark("libraries");
  matrix_facts extra = collect_matrix_facts(s.root, s.root.is_host() ? copts.slurm_conf : "/etc/slurm/slurm.conf",
                                            !facts.libibverbs.is_ok());
  t.mark("matrix facts");
  report rep = run_checks(prolog_selection(), node_check_inputs(facts, s.rules, &s.cfg, &extra));
  t.mark("judge");
  return {std::move(rep), std::move(facts), std::move(extra)};
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
  judged jd = judge_node(*setup, t);
  report& rep = jd.rep;
  for (const auto& line : failure_lines(rep)) out.write(log_level::error, line);

  // The stack history (prolog/history_step.h): every real run keeps it in state_dir; a dry run only with an
  // explicit --state-dir, where it behaves exactly as a real run (fixture trees replayed in order).
  const std::int64_t now = std::time(nullptr);
  stack_fingerprint fp = make_fingerprint(jd.facts, jd.extra, setup->rules, read_boot_info(setup->root, now),
                                          read_dkms_modules(setup->root, jd.facts));
  prolog::history_step hist;
  if (!o.dry_run || !o.state_dir.empty()) {
    std::string dir = !o.state_dir.empty() ? o.state_dir : setup->cfg.state_dir;
    if (auto store = state_store::open(dir, ::geteuid())) {
      hist = prolog::begin_history(store->dir(), setup->node, fp, rep, now, ::geteuid(), out, mode_name);
    } else if (o.dry_run) {
      log(out, log_level::error, "{}: stack history not kept: {}", mode_name, store.error().message());
    }
  }
  t.mark("history");
  // Re-validation after a change (prolog/revalidate.h): a check of its own, so the drain, the JSON and the
  // textfile carry it like any other.
  if (hist.history && prolog::revalidation_due(setup->cfg.revalidate, *hist.history)) {
    check_result rv = prolog::run_revalidation(setup->cfg, prolog::revalidation_nccl_mode(jd.facts));
    log(out, rv.result == verdict::fail ? log_level::error : log_level::info, "{}: {}: {}", mode_name, rv.id,
        rv.summary);
    hist.history->revalidated = std::string(to_string(rv.result));
    hist.history->revalidate_reason = escape_line(rv.summary, 200);
    hist.history->revalidated_time = now;
    hist.dirty = true;
    rep.checks.push_back(std::move(rv));
    t.mark("revalidate");
  }

  desired_action want = plan_action(rep, setup->cfg.on_error, setup->cfg.drain_site);
  prolog::name_change_in_reason(want, rep, hist, setup->cfg.drain_site);
  bool fails = want.what == desired_action::kind::drain;
  nlohmann::json j;
  if (o.json) j = report_to_json(rep);
  j["node"] = setup->node;
  j["mode"] = mode_name;
  j["rules"] = setup->rules.source;
  j["action"] = {{"want", to_string(want.what)}, {"reason", want.reason}};
  if (o.json) {
    j["stack"] = fingerprint_to_json(fp);
    j["history"] = prolog::history_json(hist);
  }

  // The Prometheus textfile, before any RPC (which may wait for an unreachable slurmctld): --textfile, else
  // prometheus_textfile= unless this is a dry run (a rules check must not replace the node's metrics).
  std::string textfile = !o.textfile.empty() ? o.textfile : (o.dry_run ? "" : setup->cfg.prometheus_textfile);
  if (!textfile.empty()) {
    textfile_input in{now,       setup->node,
                      mode_name, mode == run_mode::prolog && job_id ? job_id : "",
                      &jd.facts, read_gpu_uuids(setup->root, jd.facts)};
    std::string text = prometheus_textfile(rep, in) +
                       prometheus_stack_lines(fp, hist.history ? &*hist.history : nullptr);
    if (auto s = write_textfile(textfile, text, ::geteuid()); !s) {
      log(out, log_level::error, "{}: {}", mode_name, s.message());
    }
    t.mark("textfile");
  }

  prolog::finish_history(hist, out, mode_name);
  int fail_code = mode == run_mode::prolog && fails ? k_exit_fail : k_exit_ok;
  int code = fail_code;
  if (o.dry_run) {
    if (want.what == desired_action::kind::drain) {
      log(out, log_level::info, "{}: dry run: would drain {} with reason '{}'", mode_name, setup->node, want.reason);
    } else if (want.what == desired_action::kind::resume) {
      log(out, log_level::info, "{}: dry run: would resume {} if mrcheck drained it", mode_name, setup->node);
    }
    j["outcome"] = {{"what", "dry_run"}};
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
